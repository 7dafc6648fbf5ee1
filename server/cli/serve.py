"""``proctor serve``: the HTTP API."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from server.cli.groups import command_registrar


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
    log_level: str = typer.Option("warning", help="Level of uvicorn's own log lines."),
) -> None:
    """Run the HTTP API (OpenAPI at /docs).

    Migrates the database first, and warns when the runtime role may change the schema.
    On SIGTERM it stops accepting connections and gives the requests in flight
    PROCTOR_SHUTDOWN_GRACE_S seconds to finish."""
    import uvicorn

    from server.config import get_settings
    from server.database import migrate, runtime_role_warning
    from server.http_protocol import DeadlineHttpToolsProtocol
    from server.observability.logs import configure_logging

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    migrate(settings.effective_migration_url, settings.effective_database_url)
    if warning := runtime_role_warning(settings.effective_database_url):
        typer.secho(f"WARNING: {warning}", err=True, fg=typer.colors.RED, bold=True)
    with metrics_directory(workers):
        uvicorn.run(
            "server.app:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            log_config=None,  # every process logs through server.observability.logs
            access_log=False,  # the app writes its own access line (with a request id)
            timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_s),
            # the client address (rate limits, audit) is the peer's, unless it is a trusted
            # proxy
            proxy_headers=bool(settings.trusted_proxies),
            forwarded_allow_ips=settings.trusted_proxies or None,
            # header and body read deadlines (slowloris); pinned to httptools, which it
            # extends
            http=DeadlineHttpToolsProtocol,
            limit_concurrency=settings.http_max_connections,
            # an idle kept-alive connection gets as long to start its next request as a new
            # one gets to send its headers
            timeout_keep_alive=max(1, math.ceil(settings.http_header_timeout_s)),
        )


@contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """With several workers, a fresh ``PROMETHEUS_MULTIPROC_DIR`` for their metrics (each
    worker process starts after it is set, so writes its values there), removed at exit.
    An operator's own directory is emptied of the previous run's files first (it may be a
    volume that outlives the container, whose dead processes' values would still be summed)
    and kept. One worker without that variable keeps its metrics in memory."""
    from server.observability.metrics import MULTIPROC_ENV

    preset = os.environ.get(MULTIPROC_ENV)
    if preset:
        for stale in Path(preset).glob("*.db"):
            stale.unlink(missing_ok=True)
    if workers == 1 or preset:
        yield
        return
    directory = tempfile.mkdtemp(prefix="proctor-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)


register = command_registrar("serve", serve_command, "proctor serve --host 0.0.0.0 --workers 4")
