"""``/healthz`` and ``/readyz``, and the request id every response carries.

Readiness fails for real: a database whose recorded revision is not this release's head,
a Redis nobody listens for, and a PostgreSQL cluster stopped with ``pg_ctl stop -m
immediate`` under the running app (which then also scrapes ``proctor_db_up 0``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from server.database import create_engine, unit_of_work, upgrade
from tests.support import services
from tests.support.api import World, login, running_api, test_settings
from tests.support.audit import audit_rows
from tests.support.ports import free_port
from tests.support.services import RedisServer

from .scrape import METRICS_TOKEN, scrape, value


async def test_healthz_answers_ok(world_db: tuple[str, World]) -> None:
    db_url, _ = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_when_everything_answers(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, _ = world_db
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    async with running_api(test_settings(db_url, redis_url)) as (_, client):
        response = await client.get("/readyz")
    assert response.status_code == 200, response.text
    expected = {"status": "ok", "database": "ok", "migrations": "ok"}
    if redis_url is not None:
        expected["redis"] = "ok"
    assert response.json() == expected


async def test_readyz_fails_on_a_database_not_at_the_head_revision(
    world_db: tuple[str, World],
) -> None:
    db_url, _ = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        assert (await client.get("/readyz")).status_code == 200
        engine = create_engine(db_url)
        try:
            async with unit_of_work(engine) as db:
                await db.execute(text("UPDATE alembic_version SET version_num = 'older'"))
        finally:
            await engine.dispose()
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "failing", "database": "ok", "migrations": "failing"}


async def test_readyz_fails_when_redis_does_not_answer(world_db: tuple[str, World]) -> None:
    db_url, _ = world_db
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    settings = test_settings(db_url, nobody, scoring_in_process=True, metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (_, client):
        response = await client.get("/readyz")
        samples = await scrape(client)
    assert response.status_code == 503
    assert response.json()["redis"] == "failing"
    assert response.json()["database"] == "ok"
    assert value(samples, "proctor_redis_up") == 0
    assert value(samples, "proctor_db_up") == 1


async def test_probes_are_not_audited(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (_, client):
        for _ in range(5):
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            await scrape(client)
        headers = await login(client, world.a.keys["evaluator"])
        assert (await client.get("/v1/sessions", headers=headers)).status_code == 200
    routes = {row.route for row in await audit_rows(db_url)}
    assert "/v1/sessions" in routes  # the audit did run
    assert not routes & {"/healthz", "/readyz", "/metrics"}


async def test_every_response_carries_a_request_id(world_db: tuple[str, World]) -> None:
    db_url, _ = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        mine = await client.get("/healthz", headers={"X-Request-ID": "trace-42.a_b"})
        missing = await client.get("/no/such/route")
        refused = await client.get("/v1/sessions")  # no token: 401
        hostile = await client.get("/healthz", headers={"X-Request-ID": "a b\tc" + "x" * 80})
        too_long = await client.get("/healthz", headers={"X-Request-ID": "x" * 65})
    assert mine.headers["X-Request-ID"] == "trace-42.a_b"
    assert missing.status_code == 404 and refused.status_code == 401
    generated = [r.headers["X-Request-ID"] for r in (missing, refused, hostile, too_long)]
    for request_id in generated:
        assert uuid.UUID(hex=request_id).version == 4
    assert len(set(generated)) == len(generated)


# --- a database that stops under the running app ------------------------------------


@pytest.fixture(scope="module")
def private_pg(postgres_bindir: Path) -> Iterator[services.PostgresServer]:
    """A cluster of this module's own: stopping it leaves the suite's server alone."""
    with services.postgres_server(postgres_bindir) as pg:
        yield pg


@pytest.mark.postgres
async def test_readyz_and_scrape_when_the_database_stops(
    private_pg: services.PostgresServer,
) -> None:
    name = f"probes_{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(private_pg.create_database, name)
    db_url = private_pg.url(name)
    await asyncio.to_thread(upgrade, db_url)
    settings = test_settings(db_url, metrics_token=METRICS_TOKEN, scoring_in_process=False)
    async with running_api(settings) as (_, client):
        assert (await client.get("/readyz")).status_code == 200
        assert value(await scrape(client), "proctor_db_up") == 1
        await asyncio.to_thread(services.stop_postgres_immediately, private_pg)
        try:
            response = await client.get("/readyz")
            samples = await scrape(client)  # 200, saying the database is down
            alive = await client.get("/healthz")
        finally:
            await asyncio.to_thread(services.start_postgres_again, private_pg)
    assert response.status_code == 503
    assert response.json() == {"status": "failing", "database": "failing", "migrations": "failing"}
    assert value(samples, "proctor_db_up") == 0
    assert ("proctor_sessions", frozenset({("state", "active")})) not in samples
    assert alive.status_code == 200
