"""Backups of the whole database, and restores from them.

PostgreSQL: ``pg_dump --format=custom`` as the owner (``PROCTOR_MIGRATION_DATABASE_URL``,
else ``PROCTOR_DATABASE_URL``); restored with ``pg_restore --clean --if-exists --no-owner
--no-privileges --single-transaction`` as the owner, so that the objects belong to the
restoring owner whatever the roles were called where the backup was made, and a failed
restore changes nothing. The runtime role's privileges are then granted again
(``grant_runtime_privileges``), exactly as after ``proctor db upgrade``. The password goes
to the child processes in ``PGPASSWORD``, never on their command line.

SQLite (the embedded default): an online, consistent copy through SQLite's backup API,
restored by the same API into the data directory's database, which no process may hold
open (the server must be stopped).

A backup holds the database only: the bank's encryption keys (``PROCTOR_BANK_KEYS``,
``PROCTOR_BANK_KEY_FILE`` or ``<data_dir>/bank-keys``) and the embedded default's
``jwt-secret`` are never in it (``KEY_REMINDER``). Every failure is a ``BackupError`` with
one line saying what went wrong and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url

from server.config import Settings
from server.database import alembic_config, create_engine, grant_runtime_privileges

SESSIONS_TABLE = "eval_sessions"
"""A target database holding rows here is not overwritten without ``force``."""
VERSION_TABLE = "alembic_version"
BACKUP_MODE = 0o600
KEY_REMINDER = (
    "the bank's encryption keys (PROCTOR_BANK_KEYS, PROCTOR_BANK_KEY_FILE or "
    "<data_dir>/bank-keys) are not in the backup: back them up separately, or the reference "
    "answers in it cannot be read"
)
PG_TIMEOUT_S = 6 * 3600.0
_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)")
_DAMAGED = ("end of file", "too short", "valid archive", "magic string", "could not read")
"""pg_restore's words for a file that is truncated or no custom-format backup at all."""


class BackupError(Exception):
    """A backup or restore that did not happen; the message is one line."""


@dataclass(frozen=True)
class BackupResult:
    """A backup written: where, how large, how long it took, and of what."""

    path: Path
    size_bytes: int
    seconds: float
    source: str
    """The database backed up (URL without password, or the SQLite file)."""


@dataclass(frozen=True)
class RestoreResult:
    """A restore done: from where, into what, how long it took."""

    path: Path
    seconds: float
    target: str
    """The database restored into (URL without password, or the SQLite file)."""
    revision: str | None
    """The schema revision of the restored database (``alembic_version``)."""
    runtime_role: str | None
    """The runtime role granted its privileges again (PostgreSQL with two roles)."""
    replaced_sessions: int
    """Sessions the target held before it was overwritten (non-zero only with ``force``)."""

    @property
    def schema_advice(self) -> str | None:
        """What to do when the restored schema is not this version's head, else ``None``."""
        return schema_advice(self.revision)


def backup(settings: Settings, path: Path, pg_bindir: Path | None = None) -> BackupResult:
    """Write a backup of the configured database to ``path`` (atomically: a temporary file
    beside it, renamed; mode 0600), replacing a file already there. Blocking."""
    path = path.expanduser()
    if path.is_dir():
        raise BackupError(f"{path} is a directory; give the backup file's path")
    if not path.parent.is_dir():
        raise BackupError(f"directory {path.parent} does not exist")
    url = settings.effective_migration_url
    started = time.monotonic()
    with _temporary_beside(path) as temporary:
        if _is_sqlite(url):
            source = str(_sqlite_backup(_sqlite_path(url), temporary))
        else:
            source = _pg_dump(url, temporary, pg_bindir)
        _fsync(temporary)
        os.replace(temporary, path)
    _fsync_directory(path.parent)
    return BackupResult(path, path.stat().st_size, time.monotonic() - started, source)


def restore(
    settings: Settings, path: Path, *, force: bool = False, pg_bindir: Path | None = None
) -> RestoreResult:
    """Overwrite the configured database with the backup at ``path``.

    Refused (``BackupError``, nothing changed) when the file is missing or not a readable
    backup, when the target holds sessions and ``force`` is false, and (SQLite) when another
    process has the database open. On PostgreSQL the restore is one transaction: a damaged
    backup leaves the target as it was. Blocking."""
    path = path.expanduser()
    if not path.is_file():
        raise BackupError(f"no backup file at {path}")
    url = settings.effective_migration_url
    started = time.monotonic()
    if _is_sqlite(url):
        target, revision, replaced = _sqlite_restore(path, _sqlite_path(url), force)
        role = None
    else:
        target, replaced = _pg_restore(url, path, force, pg_bindir)
        role = _grant(url, settings.effective_database_url)
        revision = _pg_revision(url)
    return RestoreResult(path, time.monotonic() - started, target, revision, role, replaced)


def schema_advice(revision: str | None) -> str | None:
    """``None`` when ``revision`` is this version's schema head; else what to do: upgrade a
    backup of an older version, run the newer version a backup came from."""
    script = ScriptDirectory.from_config(alembic_config(""))
    if revision in script.get_heads():
        return None
    try:
        known = revision is not None and script.get_revision(revision) is not None
    except CommandError:  # "Can't locate revision"
        known = False
    if known:
        return "the backup's schema is older than this version of Proctor: run proctor db upgrade"
    return (
        f"the backup's schema revision {revision or '(none)'} is unknown to this version of "
        "Proctor (a newer one made it?): run the version that made the backup"
    )


# --------------------------------------------------------------------------- #
# PostgreSQL
# --------------------------------------------------------------------------- #


def _pg_dump(url: str, output: Path, bindir: Path | None) -> str:
    tool = _pg_tool("pg_dump", bindir)
    parsed = make_url(url)
    _check_dump_version(tool, url)
    _run_pg(
        [str(tool), "--format=custom", f"--file={output}", *_connection_options(parsed)],
        parsed,
        "pg_dump",
    )
    return _redact(parsed)


def _pg_restore(url: str, backup_file: Path, force: bool, bindir: Path | None) -> tuple[str, int]:
    tool = _pg_tool("pg_restore", bindir)
    parsed = make_url(url)
    _run_pg([str(tool), "--list", str(backup_file)], parsed, "pg_restore")  # a backup at all?
    sessions = _pg_sessions(url)
    if sessions and not force:
        raise BackupError(_refusal(_redact(parsed), sessions))
    _run_pg(
        [
            str(tool),
            "--clean",
            "--if-exists",
            "--no-owner",
            "--no-privileges",
            "--single-transaction",
            "--exit-on-error",
            *_connection_options(parsed),
            str(backup_file),
        ],
        parsed,
        "pg_restore",
    )
    return _redact(parsed), sessions


def _grant(owner_url: str, runtime_url: str) -> str | None:
    try:
        return grant_runtime_privileges(owner_url, runtime_url)
    except Exception as error:  # asyncpg raises its own errors on connect, not SQLAlchemy's
        raise BackupError(
            f"restored, but granting the runtime role failed ({_one_line(error)}); "
            "run proctor db upgrade"
        ) from None


def _connection_options(parsed: URL) -> list[str]:
    """libpq options for ``parsed``; the password is left to ``_pg_environment``."""
    options = [f"--dbname={parsed.database}"] if parsed.database else []
    host = parsed.host or _query(parsed, "host")
    if host:
        options.append(f"--host={host}")
    if parsed.port:
        options.append(f"--port={parsed.port}")
    if parsed.username:
        options.append(f"--username={parsed.username}")
    return [*options, "--no-password"]


def _pg_environment(parsed: URL) -> dict[str, str]:
    """This process's environment with the URL's password and TLS mode for libpq."""
    env = dict(os.environ)
    env.pop("PGPASSWORD", None)
    if parsed.password is not None:
        env["PGPASSWORD"] = str(parsed.password)
    ssl = _query(parsed, "sslmode") or _query(parsed, "ssl")
    if ssl:
        env["PGSSLMODE"] = {"true": "require", "false": "disable"}.get(ssl.lower(), ssl)
    return env


def _query(parsed: URL, name: str) -> str | None:
    value = parsed.query.get(name)
    if isinstance(value, tuple):
        value = value[0] if value else None
    return value


def _run_pg(command: list[str], parsed: URL, what: str) -> str:
    """Run a PostgreSQL client tool; its stdout, or ``BackupError`` with its first error."""
    try:
        done = subprocess.run(
            command,
            env=_pg_environment(parsed),
            capture_output=True,
            text=True,
            timeout=PG_TIMEOUT_S,
            check=False,
        )
    except OSError as error:
        raise BackupError(f"cannot run {what}: {error.strerror or error}") from None
    except subprocess.TimeoutExpired:
        raise BackupError(f"{what} did not finish within {PG_TIMEOUT_S / 3600:.0f} h") from None
    if done.returncode != 0:
        raise BackupError(_tool_error(what, done.stderr))
    return done.stdout


def _tool_error(what: str, stderr: str) -> str:
    """One line: the tool's first error; for pg_restore, whether the file is damaged, and
    that the database was not changed (one transaction)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    first = re.sub(rf"^{what}:\s*(error:\s*)?", "", first) or "no message"
    if what != "pg_restore":
        return f"{what} failed: {first}"
    if "unsupported version" in stderr:
        first += " (written by a newer pg_dump: use that version's pg_restore, --pg-bindir)"
    elif any(words in first for words in _DAMAGED):
        first += " (the backup file is truncated or not a proctor db backup file)"
    elif "must be owner" in stderr or "permission denied" in stderr:
        first += " (restore as the owner: set PROCTOR_MIGRATION_DATABASE_URL)"
    return f"pg_restore failed: {first}; the database was not changed"


def _pg_tool(name: str, bindir: Path | None) -> Path:
    if bindir is not None:
        tool = bindir.expanduser() / name
        if not os.access(tool, os.X_OK):
            raise BackupError(f"no executable {name} in {bindir}")
        return tool
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} not found on PATH: install the PostgreSQL client of the server's major "
            "version (Debian: apt-get install postgresql-client-N) or pass --pg-bindir"
        )
    return Path(found)


def tool_major_version(tool: Path) -> int:
    """The major version ``tool --version`` reports (``pg_dump (PostgreSQL) 15.4`` -> 15)."""
    try:
        output = subprocess.run(
            [str(tool), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BackupError(f"cannot run {tool} --version: {error}") from None
    found = _VERSION.search(output)
    if found is None:
        raise BackupError(f"cannot tell the version of {tool} from {output.strip()!r}")
    return int(found.group(1))


def _check_dump_version(tool: Path, url: str) -> None:
    """pg_dump refuses a server of a newer major version than its own: say which client to
    install instead of passing on its message."""
    client = tool_major_version(tool)
    server = _server_major_version(url)
    if client < server:
        raise BackupError(
            f"{tool} is PostgreSQL {client} but the server is PostgreSQL {server}: pg_dump "
            f"cannot back up a newer server; install postgresql-client-{server} and pass "
            f"--pg-bindir /usr/lib/postgresql/{server}/bin"
        )


def _server_major_version(url: str) -> int:
    return int(_pg_scalar(url, "SHOW server_version_num") or 0) // 10_000


def _pg_sessions(url: str) -> int:
    """Sessions in the database at ``url`` (0 when it has no sessions table yet)."""
    exists = _pg_scalar(url, f"SELECT to_regclass('{SESSIONS_TABLE}') IS NOT NULL")
    if exists != "True":
        return 0
    return int(_pg_scalar(url, f"SELECT count(*) FROM {SESSIONS_TABLE}") or 0)


def _pg_revision(url: str) -> str | None:
    exists = _pg_scalar(url, f"SELECT to_regclass('{VERSION_TABLE}') IS NOT NULL")
    if exists != "True":
        return None
    return _pg_scalar(url, f"SELECT max(version_num) FROM {VERSION_TABLE}")


def _pg_scalar(url: str, sql: str) -> str | None:
    async def query() -> str | None:
        engine = create_engine(url, pool_pre_ping=False)
        try:
            async with engine.connect() as connection:
                value = (await connection.execute(text(sql))).scalar()
            return None if value is None else str(value)
        finally:
            await engine.dispose()

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:  # callable inside a running loop too
            return pool.submit(asyncio.run, query()).result()
    except Exception as error:  # asyncpg raises its own errors on connect, not SQLAlchemy's
        raise BackupError(f"cannot query {_redact(make_url(url))}: {_one_line(error)}") from None


# --------------------------------------------------------------------------- #
# SQLite
# --------------------------------------------------------------------------- #


def _sqlite_backup(database: Path, output: Path) -> Path:
    if not database.is_file():
        raise BackupError(f"no database at {database}; nothing to back up")
    try:
        with (
            contextlib.closing(_sqlite_connect(database, timeout=30)) as source,
            contextlib.closing(sqlite3.connect(output)) as copy,
        ):
            source.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal
    except sqlite3.Error as error:
        raise BackupError(f"cannot back up {database}: {error}") from None
    return database


def _sqlite_restore(backup_file: Path, database: Path, force: bool) -> tuple[str, str | None, int]:
    revision = _check_sqlite_backup(backup_file)
    database.parent.mkdir(parents=True, exist_ok=True)
    try:
        target = _sqlite_connect(database, timeout=0)
    except sqlite3.Error as error:
        raise BackupError(f"cannot open {database}: {error}") from None
    with contextlib.closing(target):
        try:
            # held until the connection closes: nobody else reads or writes meanwhile
            target.execute("PRAGMA locking_mode=EXCLUSIVE")
            target.execute("BEGIN EXCLUSIVE")
            target.execute("COMMIT")
            sessions = _sqlite_sessions(target)
        except sqlite3.OperationalError as error:
            if "locked" not in str(error):
                raise BackupError(f"cannot restore into {database}: {error}") from None
            raise BackupError(
                f"{database} is in use by another process: stop proctor serve (and every "
                "other proctor command) first"
            ) from None
        except sqlite3.DatabaseError as error:
            raise BackupError(
                f"cannot restore into {database}: {error}; move that file away first"
            ) from None
        if sessions and not force:
            raise BackupError(_refusal(str(database), sessions))
        try:
            with contextlib.closing(_sqlite_connect(backup_file, timeout=0)) as source:
                source.backup(target)
        except sqlite3.Error as error:
            raise BackupError(f"cannot restore into {database}: {error}") from None
    return str(database), revision, sessions


def _check_sqlite_backup(backup_file: Path) -> str | None:
    """The backup's schema revision; ``BackupError`` unless it is an intact SQLite database
    with Proctor's schema."""
    what = f"{backup_file} is not a usable Proctor backup"
    try:
        with contextlib.closing(
            sqlite3.connect(f"{backup_file.resolve().as_uri()}?mode=ro", uri=True, timeout=0)
        ) as source:
            check = [row[0] for row in source.execute("PRAGMA quick_check")]
            if check != ["ok"]:
                raise BackupError(f"{what}: damaged ({check[0]})")
            tables = {row[0] for row in source.execute("SELECT name FROM sqlite_master")}
            if VERSION_TABLE not in tables or SESSIONS_TABLE not in tables:
                raise BackupError(f"{what}: it has no Proctor schema")
            row = source.execute(f"SELECT max(version_num) FROM {VERSION_TABLE}").fetchone()
    except sqlite3.DatabaseError as error:
        raise BackupError(f"{what}: {error}") from None
    return None if row is None or row[0] is None else str(row[0])


def _sqlite_sessions(connection: sqlite3.Connection) -> int:
    found = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (SESSIONS_TABLE,)
    ).fetchone()
    if not found[0]:
        return 0
    return int(connection.execute(f"SELECT count(*) FROM {SESSIONS_TABLE}").fetchone()[0])


def _sqlite_connect(path: Path, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=timeout, isolation_level=None)


def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise BackupError(f"{url} is not a SQLite file")
    return Path(database)


# --------------------------------------------------------------------------- #
# Shared
# --------------------------------------------------------------------------- #


def _refusal(target: str, sessions: int) -> str:
    return (
        f"{target} holds {sessions} session(s): a restore overwrites everything in it; "
        "pass --force to overwrite it"
    )


@contextlib.contextmanager
def _temporary_beside(path: Path) -> Iterator[Path]:
    """A new empty file of mode 0600 in ``path``'s directory, removed unless renamed."""
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(descriptor)
    temporary = Path(name)
    os.chmod(temporary, BACKUP_MODE)
    try:
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    os.chmod(path, BACKUP_MODE)
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def _redact(parsed: URL) -> str:
    return parsed.render_as_string(hide_password=True)


def _one_line(error: BaseException) -> str:
    message = str(getattr(error, "orig", None) or error)
    return message.splitlines()[0] if message else type(error).__name__
