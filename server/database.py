"""Engines, sessions and schema migrations (Alembic) for SQLite and PostgreSQL, and the
runtime role's privileges on PostgreSQL.

On PostgreSQL the server runs as a role that owns nothing: migrations run as the owner
(``PROCTOR_MIGRATION_DATABASE_URL``), then ``grant_runtime_privileges`` gives the runtime
role (``PROCTOR_DATABASE_URL``) only what it needs, so it cannot disable, rewrite or drop
the append-only audit log. ``runtime_role_warning`` says when the server's own connection
could (it owns ``audit_log``, is a superuser, or holds more than INSERT and SELECT on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from bank.locks import lock_key

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
AUDIT_TABLE = "audit_log"
VERSION_TABLE = "alembic_version"
DML = "SELECT, INSERT, UPDATE, DELETE"
RUNTIME_TABLE_PRIVILEGES: Mapping[str, str] = {
    AUDIT_TABLE: "SELECT, INSERT",
    "chain_checkpoints": "SELECT, INSERT",
    "result_ledger": "SELECT, INSERT",
    VERSION_TABLE: "SELECT",
}
"""The runtime role's privileges on the tables that differ from ``DML`` (every other
table of ``server.models.metadata``)."""
RUNTIME_SEQUENCE_PRIVILEGES = "USAGE, SELECT"
"""``nextval`` and ``currval`` for the tables' serial ids; no ``setval`` (UPDATE)."""
GRANT_LOCK = "proctor:grant-runtime-privileges"
"""Advisory lock serialising concurrent grants (replicas starting together): concurrent
GRANTs on one object fail with "tuple concurrently updated"."""

log = logging.getLogger(__name__)
T = TypeVar("T")


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine; SQLite gets foreign keys on, WAL and a busy timeout. Every
    package's models are registered first (``_register_every_model``)."""
    _register_every_model()
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"timeout": 30, "factory": RollbackOnClose})
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


def _register_every_model() -> None:
    """Import every package's models: the ORM resolves a foreign key to another package's
    table (``judge_calibrations.set_id`` to ``calibration_sets``) at the first flush, and a
    command that imports only what it runs (``server.cli.lazy``) had not loaded that table,
    so ``proctor judge agreement --store`` failed on PostgreSQL."""
    import server.models  # noqa: F401  (for the mappers it registers)


class RollbackOnClose(sqlite3.Connection):
    """A SQLite connection that rolls its transaction back before it closes.

    ``close`` alone does not end a transaction while a statement of it is still being
    stepped: SQLite then keeps the connection as a "zombie", with its transaction and the
    database's write lock, until the statement's cursor is garbage-collected. That is what
    a cancelled query leaves behind (a task cancelled at shutdown, an ``asyncio.timeout``):
    SQLAlchemy closes the connection while the aiosqlite cursor, half read, lives on in the
    traceback, and every later writer waited for the lock, then failed with "database is
    locked". A ``ROLLBACK`` ends the transaction even with statements pending."""

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # e.g. closed already: nothing to end
            if self.in_transaction:
                self.rollback()
        super().close()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # The sqlite3 module would only BEGIN before the first write, leaving earlier reads
    # outside the transaction; turn that off and BEGIN ourselves (SQLAlchemy's recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


READ_ONLY = "proctor_read_only"
"""Execution option of a connection whose transactions only read (``read_only_snapshot``)."""


def _sqlite_begin(connection: Any) -> None:
    """Every transaction takes the write lock up front, so two writers serialise instead of
    failing halfway (the embedded default serves one user; readers are not blocked in WAL);
    a read-only one (``READ_ONLY``) takes none, and WAL gives it a snapshot."""
    read_only = connection.get_execution_options().get(READ_ONLY, False)
    connection.exec_driver_sql("BEGIN DEFERRED" if read_only else "BEGIN IMMEDIATE")


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded attributes after commit (no implicit refresh I/O)."""
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def unit_of_work(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """One transaction: commit when the block ends normally, roll back on any exception."""
    async with session_factory(engine)() as session, session.begin():
        yield session


@asynccontextmanager
async def read_only_snapshot(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """One read-only transaction that sees a single snapshot of the database (repeatable
    read on PostgreSQL, a deferred transaction under WAL on SQLite), for long reads that
    must agree with themselves (a session bundle, a re-derivation, a chain walk) without
    holding SQLite's write lock: writers go on meanwhile. Rolled back at the end."""
    async with engine.connect() as connection:
        await connection.execution_options(**{READ_ONLY: True})
        if connection.dialect.name == "postgresql":
            await connection.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        async with AsyncSession(bind=connection, expire_on_commit=False) as db:
            await connection.begin()
            try:
                yield db
            finally:
                await connection.rollback()


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` that works from an installed package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision`` (blocking).

    Alembic's async environment runs its own event loop, so the migration runs in a worker
    thread: callable from plain code and from inside a running loop alike.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(command.upgrade, alembic_config(url), revision).result()


def migrate(migration_url: str, runtime_url: str, revision: str = "head") -> str | None:
    """``upgrade`` the database as the owner at ``migration_url``, then
    ``grant_runtime_privileges`` to the role of ``runtime_url``; returns that role, or
    ``None`` when nothing was granted (blocking)."""
    upgrade(migration_url, revision)
    return grant_runtime_privileges(migration_url, runtime_url)


def grant_runtime_privileges(owner_url: str, runtime_url: str) -> str | None:
    """As the owner at ``owner_url``, give the role of ``runtime_url`` exactly what the
    server needs, and revoke anything else this owner had granted it on those objects:

    * USAGE on the schema (and no CREATE);
    * SELECT, INSERT, UPDATE, DELETE on every table of ``server.models.metadata``, except
      the append-only ``audit_log``, ``chain_checkpoints`` and ``result_ledger`` (SELECT
      and INSERT only) and ``alembic_version`` (SELECT only);
    * USAGE and SELECT on those tables' sequences.

    No TRUNCATE, REFERENCES or TRIGGER anywhere: a runtime role that owns nothing (and is
    no member of the owner) can then neither alter, disable, drop nor replace the audit
    log's triggers, nor update, delete or truncate its rows. Idempotent: run it
    after every upgrade (new tables get their grants). Runs only when both URLs are
    PostgreSQL and name different roles; returns the runtime role, else ``None`` (SQLite,
    or the server itself is the owner, which ``runtime_role_warning`` reports). Blocking.
    """
    if not (_is_postgres(owner_url) and _is_postgres(runtime_url)):
        return None
    return _run_blocking(_grant(owner_url, runtime_url))


def runtime_role_warning(url: str) -> str | None:
    """``privileged_role_warning`` for the database at ``url`` (blocking)."""
    if not _is_postgres(url):
        return None
    return _run_blocking(_warning_at(url))


async def warn_if_privileged(engine: AsyncEngine) -> str | None:
    """Log ``privileged_role_warning`` at WARNING (the server's start-up check); return it."""
    warning = await privileged_role_warning(engine)
    if warning:
        log.warning("%s", warning)
    return warning


async def privileged_role_warning(engine: AsyncEngine) -> str | None:
    """Why ``engine``'s role could tamper with the audit log, or ``None``.

    Reported: a superuser; the owner of ``audit_log`` (or a member of the owning role);
    a role holding more than INSERT and SELECT on it. Always ``None`` on SQLite and on a
    database without ``audit_log`` (not migrated yet)."""
    if engine.dialect.name != "postgresql":
        return None
    async with engine.connect() as connection:
        row = (await connection.execute(text(_ROLE_QUERY))).one()
    role, superuser, owner, is_owner, excess = row
    fix = (
        ": it could disable the audit log's triggers, rewrite or drop it. Run the server as "
        "a role that owns nothing (PROCTOR_DATABASE_URL) and migrate as the owner "
        "(PROCTOR_MIGRATION_DATABASE_URL); see deploy/README.md"
    )
    if superuser:
        return f"the server connects to PostgreSQL as superuser {role!r}{fix}"
    if is_owner:
        how = "owns audit_log" if role == owner else f"is a member of {owner!r}, owner of audit_log"
        return f"the server connects to PostgreSQL as {role!r}, which {how}{fix}"
    if excess:
        return (
            f"the server connects to PostgreSQL as {role!r}, which holds {', '.join(excess)} "
            f"on audit_log (it needs only INSERT and SELECT){fix}"
        )
    return None


_ROLE_QUERY = """
SELECT r.rolname, r.rolsuper, pg_get_userbyid(c.relowner),
       coalesce(pg_has_role(c.relowner, 'MEMBER'), false),
       ARRAY(SELECT p FROM unnest(ARRAY['UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'REFERENCES'])
             AS p WHERE has_table_privilege(c.oid, p) ORDER BY p)
FROM pg_roles AS r LEFT JOIN pg_class AS c ON c.oid = to_regclass('audit_log')
WHERE r.rolname = current_user
"""

_TABLES_QUERY = """
SELECT c.relname FROM pg_class AS c
WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relkind IN ('r', 'p')
  AND c.relname = ANY(:names)
ORDER BY c.relname
"""

_SEQUENCES_QUERY = """
SELECT s.relname FROM pg_class AS s
JOIN pg_depend AS d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid
  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
JOIN pg_class AS t ON t.oid = d.refobjid
WHERE s.relkind = 'S' AND t.relnamespace = s.relnamespace
  AND s.relnamespace = to_regnamespace(current_schema()) AND t.relname = ANY(:tables)
ORDER BY s.relname
"""


async def _grant(owner_url: str, runtime_url: str) -> str | None:
    engine = create_engine(owner_url)
    try:
        async with engine.begin() as connection:
            owner = await _scalar(connection, "SELECT current_user")
            role = make_url(runtime_url).username or await _role_of(runtime_url)
            if role == owner:
                return None
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(GRANT_LOCK)}
            )
            for statement in await _grant_statements(connection, role):
                await connection.exec_driver_sql(statement)
        log.info("granted the runtime privileges to %s", role)
        return role
    finally:
        await engine.dispose()


async def _grant_statements(connection: AsyncConnection, role: str) -> list[str]:
    """REVOKE and GRANT statements giving ``role`` exactly its privileges."""
    from server.models import metadata  # here: the models import half the server

    quote = connection.dialect.identifier_preparer.quote
    schema = await _scalar(connection, "SELECT current_schema()")
    names = [*metadata.tables, VERSION_TABLE]
    tables = list((await connection.execute(text(_TABLES_QUERY), {"names": names})).scalars())
    sequences = list(
        (await connection.execute(text(_SEQUENCES_QUERY), {"tables": tables})).scalars()
    )
    grantee = quote(role)
    statements = [
        f"GRANT USAGE ON SCHEMA {quote(schema)} TO {grantee}",
        f"REVOKE CREATE ON SCHEMA {quote(schema)} FROM {grantee}",
    ]
    by_privileges: dict[str, list[str]] = {}
    for table in tables:
        by_privileges.setdefault(RUNTIME_TABLE_PRIVILEGES.get(table, DML), []).append(table)
    if tables:
        statements.append(f"REVOKE ALL ON TABLE {_names(quote, tables)} FROM {grantee}")
    for privileges, group in by_privileges.items():
        statements.append(f"GRANT {privileges} ON TABLE {_names(quote, group)} TO {grantee}")
    if sequences:
        listed = _names(quote, sequences)
        statements.append(f"REVOKE ALL ON SEQUENCE {listed} FROM {grantee}")
        statements.append(f"GRANT {RUNTIME_SEQUENCE_PRIVILEGES} ON SEQUENCE {listed} TO {grantee}")
    return statements


async def _warning_at(url: str) -> str | None:
    engine = create_engine(url)
    try:
        return await privileged_role_warning(engine)
    finally:
        await engine.dispose()


async def _role_of(url: str) -> str:
    """The role a URL without a user name connects as (libpq's defaults)."""
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await _scalar(connection, "SELECT current_user")
    finally:
        await engine.dispose()


async def _scalar(connection: AsyncConnection, sql: str) -> str:
    return str((await connection.exec_driver_sql(sql)).scalar_one())


def _names(quote: Callable[[str], str], names: list[str]) -> str:
    return ", ".join(quote(name) for name in names)


def _is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def _run_blocking(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on its own event loop in a worker thread: callable from plain code and
    from inside a running loop alike."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()
