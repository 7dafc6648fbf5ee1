"""Prove that the service fixtures give real, throwaway PostgreSQL and Redis servers.

Every test here talks to a live server over TCP; none of them can pass against
a fake, and the start-up/clean-up contract of tests/support/services.py is checked too.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support import services


def _port_is_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


# --------------------------------------------------------------------------- #
# PostgreSQL
# --------------------------------------------------------------------------- #


async def test_postgres_select_version(postgres_server: services.PostgresServer) -> None:
    conn = await asyncpg.connect(postgres_server.dsn("postgres"))
    try:
        version = await conn.fetchval("select version()")
    finally:
        await conn.close()
    assert isinstance(version, str)
    assert version.startswith("PostgreSQL ")


async def test_postgres_table_roundtrip(postgres_server: services.PostgresServer) -> None:
    dbname = f"t_{uuid.uuid4().hex[:12]}"
    postgres_server.create_database(dbname)
    conn = await asyncpg.connect(postgres_server.dsn(dbname))
    try:
        await conn.execute("create table item (id serial primary key, name text not null)")
        await conn.executemany("insert into item (name) values ($1)", [("a",), ("b",)])
        rows = await conn.fetch("select id, name from item order by id")
        assert [(r["id"], r["name"]) for r in rows] == [(1, "a"), (2, "b")]
        assert await conn.fetchval("select current_database()") == dbname
    finally:
        await conn.close()


async def test_postgres_is_the_throwaway_server(
    postgres_server: services.PostgresServer,
) -> None:
    """Our own cluster (temp data dir, durable settings the API insists on), not a
    system-wide one."""
    conn = await asyncpg.connect(postgres_server.dsn())
    try:
        data_dir = await conn.fetchval("show data_directory")
        fsync = await conn.fetchval("show fsync")
        commit = await conn.fetchval("show synchronous_commit")
        superuser = await conn.fetchval(
            "select rolsuper from pg_roles where rolname = $1", "postgres"
        )
    finally:
        await conn.close()
    assert Path(data_dir).is_relative_to(postgres_server.socket_dir)
    assert (fsync, commit) == ("on", "on")
    assert superuser is True


async def test_postgres_url_works_with_sqlalchemy(
    postgres_server: services.PostgresServer,
) -> None:
    url = postgres_server.url("postgres")
    assert url == f"postgresql+asyncpg://postgres@127.0.0.1:{postgres_server.port}/postgres"
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("select 40 + 2"))).scalar_one() == 42
    finally:
        await engine.dispose()


def test_postgres_dsn_format(postgres_server: services.PostgresServer) -> None:
    port = postgres_server.port
    assert postgres_server.dsn("db1") == f"postgresql://postgres@127.0.0.1:{port}/db1"


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "x; drop", "a" * 64])
def test_create_database_rejects_bad_names(
    postgres_server: services.PostgresServer, name: str
) -> None:
    with pytest.raises(ValueError, match="invalid database name"):
        postgres_server.create_database(name)


def test_create_database_twice_is_a_clear_error(
    postgres_server: services.PostgresServer,
) -> None:
    dbname = f"t_{uuid.uuid4().hex[:12]}"
    postgres_server.create_database(dbname)
    with pytest.raises(services.ServiceStartError, match="already exists"):
        postgres_server.create_database(dbname)


def test_postgres_is_stopped_and_deleted_on_exit(postgres_bindir: Path) -> None:
    with services.postgres_server(postgres_bindir) as server:
        workdir, port = server.socket_dir, server.port
        assert workdir.is_dir()
        assert not _port_is_closed(port)
    assert _port_is_closed(port)
    assert not workdir.exists()


def test_postgres_startup_failure_shows_log_tail(postgres_bindir: Path) -> None:
    bad = {"shared_buffers": "'not-a-size'"}
    with pytest.raises(services.ServiceStartError) as excinfo:  # noqa: SIM117
        with services.postgres_server(postgres_bindir, settings=bad, timeout=10):
            pytest.fail("server started despite an invalid setting")
    message = str(excinfo.value)
    assert "pg_ctl start failed" in message
    assert "shared_buffers" in message  # comes from the server log tail


# --------------------------------------------------------------------------- #
# Redis
# --------------------------------------------------------------------------- #


async def test_redis_set_get_incr(redis_server: services.RedisServer) -> None:
    key = f"test:{uuid.uuid4().hex}"
    async with aioredis.Redis.from_url(redis_server.url) as client:
        assert await client.set(key, "hello") is True
        assert await client.get(key) == b"hello"
        assert await client.incr(f"{key}:n") == 1
        assert await client.incr(f"{key}:n") == 2
        await client.delete(key, f"{key}:n")


async def test_redis_info_reports_real_server(redis_server: services.RedisServer) -> None:
    async with aioredis.Redis.from_url(redis_server.url) as client:
        info = await client.info("server")
        persistence = await client.info("persistence")
    assert info["redis_version"]
    assert info["tcp_port"] == redis_server.port
    assert persistence["aof_enabled"] == 0


def test_redis_url_format(redis_server: services.RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"


def test_redis_is_stopped_and_deleted_on_exit(redis_binary: Path) -> None:
    with services.redis_server(redis_binary) as server:
        port = server.port
        assert not _port_is_closed(port)
    assert _port_is_closed(port)


def test_redis_startup_failure_shows_log_tail(redis_binary: Path) -> None:
    with pytest.raises(services.ServiceStartError) as excinfo:  # noqa: SIM117
        with services.redis_server(redis_binary, extra_args=["--no-such-directive", "x"]):
            pytest.fail("redis started despite an invalid directive")
    assert "no-such-directive" in str(excinfo.value)  # from the server log tail


# --------------------------------------------------------------------------- #
# Markers
# --------------------------------------------------------------------------- #


def test_service_tests_are_marked(
    request: pytest.FixtureRequest,
    postgres_server: services.PostgresServer,
    redis_server: services.RedisServer,
) -> None:
    assert request.node.get_closest_marker("postgres") is not None
    assert request.node.get_closest_marker("redis") is not None
    assert ("service", "postgres") in request.node.user_properties


def test_plain_tests_are_not_marked(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("postgres") is None
    assert request.node.get_closest_marker("redis") is None
