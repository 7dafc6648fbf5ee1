"""``proctor db``: the database schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from server.cli.groups import example, group, group_registrar
from server.cli.output import fail, stderr

app = group("db", "Database schema, backups and restores.", "proctor db upgrade")
register = group_registrar(app)
APPEND = "audit_log, chain_checkpoints and result_ledger"
"""The append-only tables, as ``db upgrade`` names them."""


@app.command("upgrade")
def upgrade_command(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply schema migrations and grant the runtime role its rights.

    Migrates as the owner (PROCTOR_MIGRATION_DATABASE_URL, else PROCTOR_DATABASE_URL, else
    the embedded SQLite file), then grants PROCTOR_DATABASE_URL's role only what the server
    needs (PostgreSQL, when the two roles differ)."""
    from alembic.util import CommandError

    from server.config import get_settings
    from server.database import migrate

    settings = get_settings()
    url = settings.effective_migration_url
    try:
        role = migrate(url, settings.effective_database_url, revision)
    except CommandError as error:  # an unknown or unreachable revision
        fail(f"proctor db upgrade: {error}")
    typer.echo(f"database at {revision}: {_redact(url)}")
    if role is not None:
        typer.echo(f"runtime role {role}: DML on the tables, only INSERT and SELECT on {APPEND}")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


PgBindir = Annotated[
    Path | None,
    typer.Option(
        "--pg-bindir",
        help="Directory of pg_dump and pg_restore (PostgreSQL); default: the PATH.",
        file_okay=False,
    ),
]


@app.command("backup", epilog=example("proctor db backup /var/backups/proctor-2026-11-24.dump"))
def backup_command(
    path: Annotated[Path, typer.Argument(help="The backup file to write (replaced if present).")],
    pg_bindir: PgBindir = None,
) -> None:
    """Write a backup of the whole database to a file.

    PostgreSQL: pg_dump --format=custom as the owner (PROCTOR_MIGRATION_DATABASE_URL, else
    PROCTOR_DATABASE_URL); its major version must be at least the server's. Embedded
    default: a consistent copy of the SQLite file, taken while the server runs. The file is
    written atomically with mode 0600. The bank's encryption keys are not in it: back them
    up separately."""
    from server.backup import KEY_REMINDER, BackupError, backup
    from server.config import get_settings

    try:
        done = backup(get_settings(), path, pg_bindir)
    except BackupError as error:
        fail(f"proctor db backup: {error}")
    except OSError as error:
        fail(f"proctor db backup: {path}: {error.strerror or error}")
    typer.echo(
        f"backup of {done.source} written to {done.path}: "
        f"{_size(done.size_bytes)} in {done.seconds:.1f} s"
    )
    stderr.print(f"reminder: {KEY_REMINDER}", markup=False)


@app.command(
    "restore",
    epilog=example(
        "proctor db restore /var/backups/proctor-2026-11-24.dump",
        "proctor db restore --force /var/backups/proctor-2026-11-24.dump",
    ),
)
def restore_command(
    path: Annotated[Path, typer.Argument(help="A file written by proctor db backup.")],
    force: Annotated[
        bool,
        typer.Option("--force", help="Overwrite a database that already holds sessions."),
    ] = False,
    pg_bindir: PgBindir = None,
) -> None:
    """Replace the database's contents with a backup.

    A restore overwrites everything in the database; one that holds sessions is refused
    unless --force. PostgreSQL: pg_restore in one transaction as the owner
    (PROCTOR_MIGRATION_DATABASE_URL, else PROCTOR_DATABASE_URL), so a damaged backup
    changes nothing; then the runtime role (PROCTOR_DATABASE_URL) gets its privileges
    again. Embedded default: stop the server first (a database in use is refused). Then
    run proctor db upgrade if this version of Proctor is newer than the backup's."""
    from server.backup import KEY_REMINDER, BackupError, restore
    from server.config import get_settings

    try:
        done = restore(get_settings(), path, force=force, pg_bindir=pg_bindir)
    except BackupError as error:
        fail(f"proctor db restore: {error}")
    except OSError as error:
        fail(f"proctor db restore: {path}: {error.strerror or error}")
    replaced = f", replacing {done.replaced_sessions} session(s)" if done.replaced_sessions else ""
    typer.echo(
        f"restored {done.path} into {done.target} in {done.seconds:.1f} s{replaced}; "
        f"schema revision {done.revision or 'unknown'}"
    )
    if done.runtime_role is not None:
        typer.echo(
            f"runtime role {done.runtime_role}: DML on the tables, only INSERT and SELECT on "
            f"{APPEND}"
        )
    if done.schema_advice is not None:
        stderr.print(f"warning: {done.schema_advice}", markup=False)
    stderr.print(f"reminder: {KEY_REMINDER}", markup=False)


def _size(size_bytes: int) -> str:
    if size_bytes < 1024:
        return f"{size_bytes} bytes"
    size = size_bytes / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
