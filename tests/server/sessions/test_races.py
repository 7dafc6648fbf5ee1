"""Concurrent requests on one session or one organisation: the database keeps the rules."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from server.database import create_engine, unit_of_work
from server.sessions.models import Answer, EvalSession
from tests.support.api import World, evaluator_session, login, running_api, test_settings
from tests.support.database import database_session


async def test_fifty_identical_answers_make_one(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    headers, sid = await evaluator_session(client, world.a, n_items=3)
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
    body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
    responses = await asyncio.gather(
        *(client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers) for _ in range(50))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(201) == 1 and statuses.count(409) == 49, statuses
    state = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
    assert (state["completed"], state["pending"]) == (1, 0)


async def test_fifty_concurrent_next_give_one_pending_item(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    headers, sid = await evaluator_session(client, world.a, n_items=5)
    responses = await asyncio.gather(
        *(client.get(f"/v1/sessions/{sid}/next", headers=headers) for _ in range(50))
    )
    assert {r.status_code for r in responses} == {200}
    assert len({(r.json()["position"], r.json()["item_id"]) for r in responses}) == 1
    state = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
    assert (state["pending"], state["allocated"]) == (1, 4)


async def test_concurrent_session_creation_never_exceeds_the_quota(
    world_db: tuple[str, World],
) -> None:
    db_url, world = world_db
    async with running_api(test_settings(db_url, max_concurrent_sessions=3)) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        body = {"model_id": str(world.a.model_id), "n_items": 4}
        responses = await asyncio.gather(
            *(client.post("/v1/sessions", json=body, headers=headers) for _ in range(12))
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 3 + [409] * 9, statuses
    refused = next(r for r in responses if r.status_code == 409).json()
    assert refused["title"] == "Quota exhausted" and "3 open sessions" in refused["detail"]
    async with database_session(db_url) as db:
        n = await db.scalar(
            select(func.count()).select_from(EvalSession).where(EvalSession.org_id == world.a.id)
        )
    assert n == 3


async def test_two_clients_on_one_session(world_db: tuple[str, World]) -> None:
    """A second token is refused while the first holds the lease, and gets it once idle.
    (The lease is 2 s: at 0.5 s a busy CI machine let it lapse between two requests.)"""
    db_url, world = world_db
    async with running_api(test_settings(db_url, lease_idle_s=2.0)) as (_, client):
        first, sid = await evaluator_session(client, world.a, n_items=3)
        second = await login(client, world.a.keys["evaluator"])
        item = (await client.get(f"/v1/sessions/{sid}/next", headers=first)).json()
        refused = await client.get(f"/v1/sessions/{sid}/next", headers=second)
        assert refused.status_code == 403 and "session in use" in refused.json()["detail"]
        body = {"position": item["position"], "item_id": item["item_id"], "answer": "x"}
        assert (
            await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=second)
        ).status_code == 403
        await asyncio.sleep(2.2)
        resumed = await client.get(f"/v1/sessions/{sid}/next", headers=second)
        assert resumed.status_code == 200 and resumed.json() == item  # the crashed client's item
        assert (await client.get(f"/v1/sessions/{sid}/next", headers=first)).status_code == 403


async def test_answers_survive_only_once_per_position(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    """Racing answers for different positions: only the pending one is accepted."""
    client, world, _ = api
    headers, sid = await evaluator_session(client, world.a, n_items=4)
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
    bodies = [
        {"position": p, "item_id": item["item_id"] if p == 0 else str(uuid.uuid4()), "answer": "x"}
        for p in range(4)
    ]
    responses = await asyncio.gather(
        *(client.post(f"/v1/sessions/{sid}/answers", json=b, headers=headers) for b in bodies * 5)
    )
    assert sum(r.status_code == 201 for r in responses) == 1
    engine = create_engine(client._transport.app.state.runtime.settings.effective_database_url)  # type: ignore[attr-defined]
    try:
        async with unit_of_work(engine) as db:
            rows = (
                (
                    await db.execute(
                        select(Answer.position).where(Answer.session_id == uuid.UUID(sid))
                    )
                )
                .scalars()
                .all()
            )
    finally:
        await engine.dispose()
    assert rows == [0]
