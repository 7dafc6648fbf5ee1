"""Database fixtures: migrated SQLite and PostgreSQL databases, per-test rollback sessions.

* ``db_url`` is parametrised over ``sqlite`` and ``postgres``: a test using it (or
  ``db_engine`` / ``db_session``) runs once on each database.
* ``db_session`` wraps the test in a transaction that is rolled back afterwards; code under
  test that commits only releases a SAVEPOINT (Polar's pattern), so tests stay isolated.
* ``fresh_db_url`` is a new, migrated, empty database per test for tests that need real
  commits (CLI subprocesses): a file for SQLite, ``CREATE DATABASE ... TEMPLATE`` for
  PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Executable, Row
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from server.database import create_engine, unit_of_work, upgrade
from tests.support.services import PostgresServer

TEMPLATE_DB = "proctor_template"
BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that per-test databases are copied from."""
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    """Name of a migrated PostgreSQL database usable as a ``CREATE DATABASE`` template."""
    postgres_server.create_database(TEMPLATE_DB)
    upgrade(postgres_server.url(TEMPLATE_DB))
    return TEMPLATE_DB


def _new_sqlite(template: Path, directory: Path) -> str:
    target = directory / f"{uuid.uuid4().hex}.db"
    target.write_bytes(template.read_bytes())
    return f"sqlite+aiosqlite:///{target}"


async def new_postgres_database(server: PostgresServer, template: str) -> str:
    """A new database copied from the migrated ``template``; returns its URL."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    engine = create_engine(server.url("postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await engine.dispose()
    return server.url(name)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres``: tests depending on it run on both."""
    return str(request.param)


@pytest.fixture(scope="session")
async def db_url(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A migrated database shared by the session's rollback-isolated tests."""
    return await make_database_url(backend, request, tmp_path_factory.mktemp("db"))


@pytest.fixture
async def fresh_db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new migrated, empty database for this test alone."""
    return await make_database_url(backend, request, tmp_path)


async def make_database_url(backend: str, request: pytest.FixtureRequest, directory: Path) -> str:
    """A new migrated empty database on ``backend`` (SQLite file under ``directory``)."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        return _new_sqlite(template, directory)
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name: str = request.getfixturevalue("postgres_template")
    return await new_postgres_database(server, name)


@pytest.fixture(scope="session")
async def db_engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(db_url)
    yield engine
    await engine.dispose()


@asynccontextmanager
async def rolled_back_session(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """A session inside a transaction that is rolled back at the end; the code under test may
    commit, which only releases a SAVEPOINT."""
    async with engine.connect() as connection:
        transaction = await connection.begin()
        session = AsyncSession(
            bind=connection, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        try:
            yield session
        finally:
            await session.close()
            await transaction.rollback()


@pytest.fixture
async def db_session(db_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """A session inside a transaction that is rolled back when the test ends."""
    async with rolled_back_session(db_engine) as session:
        yield session


@pytest.fixture
def run_sync() -> Callable[..., object]:
    """Run a blocking call (a CLI subprocess, Alembic) off the event loop."""

    async def runner(function: Callable[..., object], *args: object) -> object:
        return await asyncio.to_thread(function, *args)

    return runner


@asynccontextmanager
async def database_session(db_url: str) -> AsyncIterator[AsyncSession]:
    """One unit of work on a fresh engine for ``db_url``, disposed afterwards: for setting up
    or reading back what a server under test sees, apart from its own engine."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            yield db
    finally:
        await engine.dispose()


async def fetch_all(db_url: str, statement: Executable) -> list[Row[Any]]:
    """The rows of ``statement``, run on a fresh engine for ``db_url`` (disposed afterwards)."""
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            return list((await connection.execute(statement)).all())
    finally:
        await engine.dispose()


@asynccontextmanager
async def engine_with_bank(
    backend: str,
    request: pytest.FixtureRequest,
    directory: Path,
    *,
    disciplines: int,
    subdisciplines: int,
    per_cell: int,
) -> AsyncIterator[AsyncEngine]:
    """An engine on a new migrated database on ``backend`` holding a synthetic bank
    (``tests.support.factories.make_bank``, both question types, augmented), disposed
    afterwards: the shared bank of a module's rolled-back sessions."""
    from tests.support.factories import make_bank

    engine = create_engine(await make_database_url(backend, request, directory))
    try:
        async with unit_of_work(engine) as session:
            await make_bank(
                session,
                disciplines=disciplines,
                qtypes=["multiple_choice", "short_answer"],
                subdisciplines=subdisciplines,
                per_cell=per_cell,
                augment=True,
            )
        yield engine
    finally:
        await engine.dispose()


def module_bank(
    *, disciplines: int, subdisciplines: int, per_cell: int
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The fixtures ``bank_engine`` (module-scoped: ``engine_with_bank`` on each backend)
    and ``session`` (a rolled-back session on it) of a module whose tests share one bank::

        bank_engine, session = module_bank(disciplines=4, subdisciplines=3, per_cell=25)
    """

    @pytest.fixture(scope="module", name="bank_engine")
    async def bank_engine_fixture(
        backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> AsyncIterator[AsyncEngine]:
        directory = Path(tmp_path_factory.mktemp("bank"))
        bank = {"disciplines": disciplines, "subdisciplines": subdisciplines, "per_cell": per_cell}
        async with engine_with_bank(backend, request, directory, **bank) as engine:
            yield engine

    @pytest.fixture(name="session")
    async def session_fixture(bank_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
        async with rolled_back_session(bank_engine) as session:
            yield session

    return bank_engine_fixture, session_fixture
