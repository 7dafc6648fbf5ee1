"""``proctor db``: the database schema."""

from __future__ import annotations

import typer
from sqlalchemy.engine import make_url

from server.cli.groups import group, group_registrar
from server.config import get_settings
from server.database import migrate

app = group("db", "Database schema.", "proctor db upgrade")
register = group_registrar(app)


@app.command("upgrade")
def upgrade_command(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply schema migrations and grant the runtime role its rights.

    Migrates as the owner (PROCTOR_MIGRATION_DATABASE_URL, else PROCTOR_DATABASE_URL, else
    the embedded SQLite file), then grants PROCTOR_DATABASE_URL's role only what the server
    needs (PostgreSQL, when the two roles differ)."""
    settings = get_settings()
    url = settings.effective_migration_url
    role = migrate(url, settings.effective_database_url, revision)
    typer.echo(f"database at {revision}: {_redact(url)}")
    if role is not None:
        typer.echo(f"runtime role {role}: DML on the tables, only INSERT and SELECT on audit_log")


def _redact(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)
