"""Abuse of the token protocol and of the limits: refresh races, limits that a refresh
could reset, floods of bad credentials, and the audit log under a flood.

On PostgreSQL the counters live in Redis, as in production; on SQLite in process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from server.audit.models import AuditEntry
from server.database import create_engine
from tests.server.auth.test_access import assert_problem, away_from_window_edge
from tests.support.api import World, login, running_api, unique_address
from tests.support.api import test_settings as make_settings
from tests.support.services import RedisServer

FLOODER = ("203.0.113.7", 40000)
BYSTANDER = ("198.51.100.9", 40001)
KEY_GUESSER = ("203.0.113.8", 40002)


def settings_for(
    db_url: str, backend: str, request: pytest.FixtureRequest, **overrides: Any
) -> Any:
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    return make_settings(db_url, redis_url, **overrides)


def client_from(app: Any, address: tuple[str, int]) -> httpx.AsyncClient:
    """A client of the in-process app that connects from ``address``."""
    transport = httpx.ASGITransport(app=app, client=address)
    return httpx.AsyncClient(transport=transport, base_url="http://proctor.test")


async def test_concurrent_refreshes_of_one_token_have_exactly_one_winner(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    async with running_api(settings_for(db_url, backend, request)) as (_, client):
        headers = await login(client, world.a.keys["vendor"])
        replies = await asyncio.gather(
            *(client.post("/v1/auth/refresh", headers=headers) for _ in range(20))
        )
        statuses = sorted(r.status_code for r in replies)
        assert statuses == [200] + [401] * 19, statuses
        (winner,) = [r for r in replies if r.status_code == 200]
        new = {"Authorization": f"Bearer {winner.json()['access_token']}"}
        assert (await client.get("/v1/whoami", headers=new)).status_code == 200
        assert (await client.get("/v1/whoami", headers=headers)).status_code == 401
        # the losers got no token that works: one new token in all
        tokens = {r.json()["access_token"] for r in replies if r.status_code == 200}
        assert len(tokens) == 1


async def test_refreshing_does_not_reset_the_rate_limit(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    settings = settings_for(db_url, backend, request, rate_limit_per_minute=6)
    async with running_api(settings, address=unique_address()) as (_, client):
        await away_from_window_edge()
        headers = await login(client, world.a.keys["vendor"])
        statuses = []
        for _ in range(10):  # refresh before every request, as the bypass did
            renewed = await client.post("/v1/auth/refresh", headers=headers)
            statuses.append(renewed.status_code)
            if renewed.status_code != 200:
                break
            headers = {"Authorization": f"Bearer {renewed.json()['access_token']}"}
            statuses.append((await client.get("/v1/whoami", headers=headers)).status_code)
        assert statuses.count(200) == 6 and statuses[-1] == 429, statuses


async def test_the_organisation_limit_spans_its_keys(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    settings = settings_for(
        db_url, backend, request, rate_limit_per_minute=1000, rate_limit_org_per_minute=8
    )
    async with running_api(settings) as (_, client):
        await away_from_window_edge()
        mine = [await login(client, world.a.keys[role]) for role in ("vendor", "evaluator")]
        statuses = [
            (await client.get("/v1/whoami", headers=mine[i % 2])).status_code for i in range(8)
        ]
        assert statuses == [200] * 8
        for headers in mine:
            assert_problem(await client.get("/v1/whoami", headers=headers), 429)
        theirs = await login(client, world.b.keys["vendor"])
        assert (await client.get("/v1/whoami", headers=theirs)).status_code == 200


async def audit_rows_of(db_url: str, address: str) -> tuple[int, int]:
    """(rows, requests they stand for) of ``address`` in the audit log."""
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            rows, requests = (
                await connection.execute(
                    select(func.count(), func.coalesce(func.sum(AuditEntry.repeats), 0)).where(
                        AuditEntry.client == address
                    )
                )
            ).one()
    finally:
        await engine.dispose()
    return int(rows), int(requests)


async def test_a_bad_token_flood_is_cut_off_per_address_and_folded_in_the_audit_log(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    settings = settings_for(db_url, backend, request, auth_failures_per_minute=20)
    async with running_api(settings) as (app, client):
        await away_from_window_edge()
        good = await login(client, world.a.keys["vendor"])  # before the flood
        async with client_from(app, FLOODER) as flooder, client_from(app, BYSTANDER) as other:
            bad = {"Authorization": "Bearer not-a-token"}
            statuses = [
                (await flooder.get("/v1/models", headers=bad)).status_code for _ in range(300)
            ]
            assert statuses[:20] == [401] * 20 and set(statuses[20:]) == {429}, statuses[:25]
            # past the limit the address is refused before anything is verified, even with
            # a valid token or key
            assert_problem(await flooder.get("/v1/whoami", headers=good), 429)
            key = {"api_key": world.a.keys["vendor"]}
            assert_problem(await flooder.post("/v1/auth/token", json=key), 429)
            # another address is not affected
            assert (await other.get("/v1/whoami", headers=good)).status_code == 200
            assert (await other.get("/v1/models", headers=bad)).status_code == 401
    # the lifespan has ended: folded refusals are flushed; 302 requests, a few rows
    rows, requests = await audit_rows_of(db_url, FLOODER[0])
    assert requests == 302
    assert rows <= 6, rows


async def test_bad_api_keys_count_as_refused_authentications(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, _ = world_db
    settings = settings_for(
        db_url, backend, request, auth_failures_per_minute=5, rate_limit_per_minute=100_000
    )
    async with running_api(settings) as (app, _), client_from(app, KEY_GUESSER) as flooder:
        await away_from_window_edge()
        statuses = [
            (await flooder.post("/v1/auth/token", json={"api_key": f"pk_wrong{i}"})).status_code
            for i in range(8)
        ]
    assert statuses == [401] * 5 + [429] * 3, statuses


async def test_a_key_hammering_past_its_limit_leaves_folded_audit_rows(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    settings = settings_for(db_url, backend, request, rate_limit_per_minute=5)
    async with running_api(settings, address=unique_address()) as (_, client):
        await away_from_window_edge()
        headers = await login(client, world.a.keys["vendor"])
        statuses = [
            (await client.get("/v1/whoami", headers=headers)).status_code for _ in range(100)
        ]
        assert statuses == [200] * 5 + [429] * 95, statuses
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            rows, requests = (
                await connection.execute(
                    select(func.count(), func.sum(AuditEntry.repeats)).where(
                        AuditEntry.route == "/v1/whoami", AuditEntry.status == 429
                    )
                )
            ).one()
    finally:
        await engine.dispose()
    assert requests == 95 and rows <= 3, (rows, requests)
