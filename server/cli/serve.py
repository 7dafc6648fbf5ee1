"""``proctor serve``: the HTTP API."""

from __future__ import annotations

import math

import typer

from server.cli.groups import command_registrar
from server.config import get_settings
from server.database import migrate, runtime_role_warning


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
) -> None:
    """Run the HTTP API (OpenAPI at /docs).

    Migrates the database first, and warns when the runtime role may change the schema."""
    import uvicorn

    from server.http_protocol import DeadlineHttpToolsProtocol

    settings = get_settings()
    migrate(settings.effective_migration_url, settings.effective_database_url)
    if warning := runtime_role_warning(settings.effective_database_url):
        typer.secho(f"WARNING: {warning}", err=True, fg=typer.colors.RED, bold=True)
    uvicorn.run(
        "server.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=False,
        # the client address (rate limits, audit) is the peer's, unless it is a trusted proxy
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=settings.trusted_proxies or None,
        # header and body read deadlines (slowloris); pinned to httptools, which it extends
        http=DeadlineHttpToolsProtocol,
        limit_concurrency=settings.http_max_connections,
        # an idle kept-alive connection gets as long to start its next request as a new
        # one gets to send its headers
        timeout_keep_alive=max(1, math.ceil(settings.http_header_timeout_s)),
    )


register = command_registrar("serve", serve_command, "proctor serve --host 0.0.0.0 --workers 4")
