"""How workers claim the slots of runs (``server.runs.claims``), on both backends with no
worker running: fair between organisations and runs, never more slots of a model at once
than its endpoint's concurrency, one holder per slot, and a lapsed lease taken over."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import update

from server.database import create_engine, unit_of_work
from server.runs import claims
from server.runs.models import RunSlot
from server.runs.states import SlotState
from tests.support.api import World, login, open_session, running_api, test_settings

LEASE_S = 30.0


@pytest.fixture
async def api(world_db: tuple[str, World]) -> AsyncIterator[tuple[httpx.AsyncClient, World, str]]:
    db_url, world = world_db
    async with running_api(test_settings(db_url)) as (_, client):  # no run worker
        yield client, world, db_url


async def start(
    client: httpx.AsyncClient, world: World, org: str, sessions: int, concurrency: int
) -> str:
    owner = getattr(world, org)
    headers = await login(client, owner.keys["evaluator"])
    endpoint = {
        "base_url": "https://models.example.com/v1",
        "model": "m",
        "concurrency": concurrency,
    }
    put = await client.put(f"/v1/models/{owner.model_id}/endpoint", json=endpoint, headers=headers)
    assert put.status_code == 200, put.text
    body = {"model_id": str(owner.model_id), "sessions": sessions}
    run = await client.post("/v1/runs", json=body, headers=headers)
    assert run.status_code == 201, run.text
    return str(run.json()["id"])


async def claim(db_url: str, owner: str, n: int, now: datetime) -> list[claims.SlotWork]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            return await claims.claim_slots(db, owner=owner, n=n, now=now, lease_s=LEASE_S)
    finally:
        await engine.dispose()


async def test_claims_are_shared_fairly_and_held_to_the_endpoint_s_concurrency(
    api: tuple[httpx.AsyncClient, World, str],
) -> None:
    client, world, db_url = api
    big = await start(client, world, "a", sessions=6, concurrency=3)
    small = await start(client, world, "b", sessions=2, concurrency=8)
    now = datetime.now(UTC)
    first = await claim(db_url, "worker-1", 2, now)
    # one of each organisation first, although organisation a's run is older
    assert Counter(str(w.run_id) for w in first) == {big: 1, small: 1}
    rest = await claim(db_url, "worker-2", 10, now)
    by_run = Counter(str(w.run_id) for w in first + rest)
    assert by_run == {big: 3, small: 2}  # a's endpoint takes 3 at once
    assert len({(w.run_id, w.index) for w in first + rest}) == 5  # never one slot twice
    assert await claim(db_url, "worker-3", 10, now) == []
    run = (
        await client.get(f"/v1/runs/{big}", headers=await login(client, world.a.keys["evaluator"]))
    ).json()
    assert run["state"] == "running"
    # a worker that stops renewing: its slots are free once the lease has run out
    later = now + timedelta(seconds=LEASE_S + 1)
    taken_over = await claim(db_url, "worker-3", 10, later)
    assert Counter(str(w.run_id) for w in taken_over) == {big: 3, small: 2}


async def test_a_dead_worker_s_open_sessions_are_resumed_before_new_ones_open(
    api: tuple[httpx.AsyncClient, World, str],
) -> None:
    client, world, db_url = api
    run_id = await start(client, world, "a", sessions=4, concurrency=2)
    headers = await login(client, world.a.keys["evaluator"])
    assert world.a.model_id
    opened = [(await open_session(client, headers, world.a.model_id, 2))["id"] for _ in range(2)]
    now = datetime.now(UTC)
    engine = create_engine(db_url)
    try:  # slots 2 and 3 were being driven by a worker that died (their leases ran out)
        async with unit_of_work(engine) as db:
            for index, session_id in zip((2, 3), opened, strict=True):
                await db.execute(
                    update(RunSlot)
                    .where(RunSlot.run_id == uuid.UUID(run_id), RunSlot.index == index)
                    .values(
                        session_id=uuid.UUID(session_id),
                        state=SlotState.DRIVING.value,
                        lease_owner="dead-worker",
                        lease_expires_at=now - timedelta(seconds=1),
                    )
                )
    finally:
        await engine.dispose()
    taken = await claim(db_url, "survivor", 10, now)  # the endpoint allows two at once
    assert sorted(w.index for w in taken) == [2, 3]
