"""The ``proctor`` command (Typer): the root of every sub-command."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from clients.runner.cli import run_command
from fakellm.cli import fake_llm_app
from server.auth.permissions import PLATFORM_ROLES
from server.auth.service import create_api_key
from server.cli.analyze import analyze_command
from server.cli.bank import app as bank_app
from server.cli.judge import app as judge_app
from server.cli.leaderboard import leaderboard_command, set_anchor_command
from server.cli.simulate import simulate_command
from server.cli.unit_of_work import run_in_unit_of_work
from server.config import get_settings
from server.database import migrate, runtime_role_warning
from server.errors import Conflict
from server.orgs.service import create_org, find_org, get_org

app = typer.Typer(help="Proctor: a live, dynamic evaluation server for LLMs.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
admin_app = typer.Typer(help="Organisations, keys and the ranking anchor.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(bank_app, name="bank")
app.add_typer(admin_app, name="admin")
app.add_typer(fake_llm_app, name="fake-llm", help="A stand-in OpenAI-compatible LLM server.")
app.add_typer(judge_app, name="judge")
app.command("analyze")(analyze_command)
app.command("leaderboard")(leaderboard_command)
app.command("run")(run_command)
app.command("simulate")(simulate_command)
admin_app.command("set-anchor")(set_anchor_command)


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply schema migrations as the owner (PROCTOR_MIGRATION_DATABASE_URL, else
    PROCTOR_DATABASE_URL, else the embedded SQLite file), then grant PROCTOR_DATABASE_URL's
    role only what the server needs (PostgreSQL, when the two roles differ)."""
    settings = get_settings()
    url = settings.effective_migration_url
    role = migrate(url, settings.effective_database_url, revision)
    typer.echo(f"database at {revision}: {_redact(url)}")
    if role is not None:
        typer.echo(f"runtime role {role}: DML on the tables, only INSERT and SELECT on audit_log")


@admin_app.command("create-org")
def admin_create_org(
    name: str,
    exist_ok: bool = typer.Option(False, "--exist-ok", help="Succeed if it exists already."),
    operator: bool = typer.Option(
        False,
        "--operator",
        help="The operator's own organisation: the only one whose keys may be admin or "
        "auditor, roles that act on every organisation. At most one.",
    ),
) -> None:
    """Create an organisation and print its id. With --exist-ok --operator an existing
    organisation of that name must be the operator already (it is never promoted)."""

    async def work(session: AsyncSession) -> str:
        existing = await find_org(session, name=name) if exist_ok else None
        if existing is not None and operator and not existing.is_operator:
            raise Conflict(f"organisation {existing.name!r} exists and is not the operator")
        org = existing or await create_org(session, name=name, operator=operator)
        return str(org.id)

    typer.echo(run_in_unit_of_work(work))


@admin_app.command("create-key")
def admin_create_key(
    org: str = typer.Option(..., "--org", help="Organisation name."),
    role: str = typer.Option(
        ...,
        "--role",
        help="evaluator or vendor (own organisation), or a platform role, admin or auditor, "
        "which acts on every organisation and only the operator organisation's keys may have.",
    ),
) -> None:
    """Create an API key and print it once (only its hash is stored). A platform-role key
    is refused unless --org is the operator organisation, and warned about on stderr."""

    async def work(session: AsyncSession) -> str:
        owner = await get_org(session, name=org)
        _, key = await create_api_key(session, org_id=owner.id, role=role)
        return key

    key = run_in_unit_of_work(work)
    if role in PLATFORM_ROLES:
        typer.echo(
            f"warning: this {role} key acts on every organisation, not only {org!r}; "
            "keep it to the operator's staff",
            err=True,
        )
    typer.echo(key)


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
) -> None:
    """Run the HTTP API (OpenAPI at /docs). Migrates the database first."""
    import uvicorn

    settings = get_settings()
    migrate(settings.effective_migration_url, settings.effective_database_url)
    if warning := runtime_role_warning(settings.effective_database_url):
        typer.secho(f"WARNING: {warning}", err=True, fg=typer.colors.RED, bold=True)
    from server.http_protocol import DeadlineHttpToolsProtocol

    limits = get_settings()
    uvicorn.run(
        "server.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=False,
        # the client address (rate limits, audit) is the peer's, unless it is a trusted proxy
        proxy_headers=bool(limits.trusted_proxies),
        forwarded_allow_ips=limits.trusted_proxies or None,
        # header and body read deadlines (slowloris); pinned to httptools, which it extends
        http=DeadlineHttpToolsProtocol,
        limit_concurrency=limits.http_max_connections,
        # an idle kept-alive connection gets as long to start its next request as a new
        # one gets to send its headers
        timeout_keep_alive=max(1, math.ceil(limits.http_header_timeout_s)),
    )


def _redact(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


@app.command("demo")
def demo(
    items: Annotated[int, typer.Option("--items", min=5, help="Items per session.")] = 150,
    sessions: Annotated[int, typer.Option("--sessions", min=1, help="Sessions per model.")] = 3,
    models: Annotated[
        int, typer.Option("--models", min=1, max=5, help="How many demo models.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seeds answers and abilities.")] = 0,
    report: Annotated[
        Path, typer.Option("--report", help="Where to write the HTML report.")
    ] = Path("proctor-demo-report.html"),
    workdir: Annotated[
        Path | None,
        typer.Option("--workdir", help="Keep the database and transcripts here."),
    ] = None,
) -> None:
    """The whole system on this machine, no services needed: import the sample bank, serve
    Proctor and local models of different abilities with a local judge, run every model
    through its sessions, score, and print the leaderboard (and write an HTML report)."""
    from rich.console import Console

    from server.cli.demo import DemoConfig, run_demo

    config = DemoConfig(
        items=items, sessions=sessions, models=models, seed=seed, report=report, workdir=workdir
    )
    # piped output gets a table wide enough for its columns, not the 80-column default
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    result = run_demo(config, console)
    if result.failures or not result.ranking_matches:
        raise typer.Exit(1)
