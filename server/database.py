"""Engines, sessions and schema migrations (Alembic) for SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine; SQLite gets foreign keys on, WAL and a busy timeout."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"timeout": 30})
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # The sqlite3 module would only BEGIN before the first write, leaving earlier reads
    # outside the transaction; turn that off and BEGIN ourselves (SQLAlchemy's recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    """Every transaction takes the write lock up front, so two writers serialise instead of
    failing halfway (the embedded default serves one user; readers are not blocked in WAL)."""
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded attributes after commit (no implicit refresh I/O)."""
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def unit_of_work(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """One transaction: commit when the block ends normally, roll back on any exception."""
    async with session_factory(engine)() as session, session.begin():
        yield session


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
