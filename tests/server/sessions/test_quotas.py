"""Quotas per organisation and per session, deadlines, abort, and the return of unused items."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from bank.models import Exposure, SampleItem
from server.sessions.models import EvalSession
from server.sessions.service import expire_overdue
from tests.support.api import (
    World,
    evaluator_session,
    login,
    open_session,
    running_api,
    test_settings,
)
from tests.support.database import database_session


async def _held_families(db_url: str, org_id: uuid.UUID) -> tuple[int, int]:
    """(delivered, reserved-only) families held for ``org_id``."""
    async with database_session(db_url) as db:
        rows = (
            (
                await db.execute(
                    select(Exposure.delivered_at.is_not(None), func.count())
                    .where(Exposure.org_id == org_id)
                    .group_by(Exposure.delivered_at.is_not(None))
                )
            )
            .tuples()
            .all()
        )
    counts = {bool(k): n for k, n in rows}
    return counts.get(True, 0), counts.get(False, 0)


async def test_sessions_per_period_gives_429_with_retry_after(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(
        test_settings(db_url, max_sessions_per_period=2, session_period_s=3600)
    ) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        for _ in range(2):
            await open_session(client, headers, world.a.model_id, n_items=2)
        refused = await client.post(
            "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 2}, headers=headers
        )
    assert refused.status_code == 429
    assert 3500 <= int(refused.headers["retry-after"]) <= 3601
    assert "2 sessions in the last 3600 s" in refused.json()["detail"]


async def test_session_size_is_bounded(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(test_settings(db_url, max_session_items=10)) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        refused = await client.post(
            "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 11}, headers=headers
        )
    assert refused.status_code == 422 and "between 1 and 10" in refused.json()["detail"]


async def test_pending_window_of_two(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(test_settings(db_url, pending_window=2)) as (_, client):
        headers, sid = await evaluator_session(client, world.a, n_items=4)
        first = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
        second = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
        third = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
        assert (first["position"], second["position"], third["position"]) == (0, 1, 0)
        out_of_order = {"position": 1, "item_id": second["item_id"], "answer": "x"}
        assert (
            await client.post(f"/v1/sessions/{sid}/answers", json=out_of_order, headers=headers)
        ).status_code == 409
        state = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
        assert (state["pending"], state["allocated"]) == (2, 2)


async def test_abort_returns_undelivered_items_to_the_pool(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        admin = await login(client, world.a.keys["admin"])
        sid = (await open_session(client, headers, world.a.model_id, n_items=6))["id"]
        for _ in range(2):
            item = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
            body = {"position": item["position"], "item_id": item["item_id"], "answer": "x"}
            await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
        await client.get(f"/v1/sessions/{sid}/next", headers=headers)  # third delivered, pending
        assert await _held_families(db_url, world.a.id) == (3, 3)
        aborted = await client.post(f"/v1/admin/sessions/{sid}/abort", headers=admin)
        assert aborted.status_code == 200
        assert (
            aborted.json()["state"],
            aborted.json()["released"],
            aborted.json()["allocated"],
        ) == ("aborted", 3, 0)
        assert await _held_families(db_url, world.a.id) == (3, 0)
        assert (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).status_code == 409
        assert (
            await client.post(f"/v1/admin/sessions/{sid}/abort", headers=admin)
        ).status_code == 409


async def test_a_vendor_aborts_its_own_broken_run_and_gets_its_slot_back(
    world_db: tuple[str, World],
) -> None:
    """With one session allowed, a vendor whose run broke aborts it itself: the slot comes
    back at once (not at the 7-day deadline), the delivered item stays exposed (the next
    session does not draw it again), the reply shows no more than a read, and another
    organisation cannot abort it."""
    db_url, world = world_db
    async with running_api(test_settings(db_url, max_concurrent_sessions=1)) as (_, client):
        vendor = await login(client, world.a.keys["vendor"])
        sid = (await open_session(client, vendor, world.a.model_id))["id"]
        delivered = (await client.get(f"/v1/sessions/{sid}/next", headers=vendor)).json()
        refused = await client.post(
            "/v1/sessions", json={"model_id": str(world.a.model_id)}, headers=vendor
        )
        assert refused.status_code == 409  # the one slot is held
        other_org = await login(client, world.b.keys["vendor"])
        assert (
            await client.post(f"/v1/sessions/{sid}/abort", headers=other_org)
        ).status_code == 404
        aborted = await client.post(f"/v1/sessions/{sid}/abort", headers=vendor)
        assert aborted.status_code == 200, aborted.text
        read = await client.get(f"/v1/sessions/{sid}", headers=vendor)
        assert aborted.json() == read.json() and read.json()["state"] == "aborted"
        assert (await client.post(f"/v1/sessions/{sid}/abort", headers=vendor)).status_code == 409
        again = await open_session(client, vendor, world.a.model_id)  # the slot is back
        seen = set()
        while (
            got := await client.get(f"/v1/sessions/{again['id']}/next", headers=vendor)
        ).status_code == 200:
            item = got.json()
            seen.add(item["item_id"])
            body = {"position": item["position"], "item_id": item["item_id"], "answer": "x"}
            await client.post(f"/v1/sessions/{again['id']}/answers", json=body, headers=vendor)
        assert seen and delivered["item_id"] not in seen


async def test_expired_sessions_release_items_and_refuse_work(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(
        test_settings(db_url, session_deadline_s=10, max_concurrent_sessions=1)
    ) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        session = await open_session(client, headers, world.a.model_id, n_items=5)
        sid = session["id"]
        item = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
        async with database_session(db_url) as db:
            later = datetime.now(UTC) + timedelta(seconds=11)
            assert await expire_overdue(db, now=later) == 1
            record = await db.get(EvalSession, uuid.UUID(sid))
            assert record is not None and record.state == "expired"
        assert await _held_families(db_url, world.a.id) == (1, 0)
        body = {"position": item["position"], "item_id": item["item_id"], "answer": "x"}
        late = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
        assert late.status_code == 409 and "expired" in late.json()["detail"]
        # The expired session no longer counts against the concurrency quota.
        await open_session(client, headers, world.a.model_id, n_items=5)


async def test_released_families_can_be_sampled_again(world_db: tuple[str, World]) -> None:
    """The whole bank for one org: allocate all, abort, and the next session gets them back,
    except the delivered one."""
    db_url, world = world_db
    async with running_api(test_settings(db_url, max_session_items=100_000)) as (_, client):
        headers = await login(client, world.a.keys["evaluator"])
        admin = await login(client, world.a.keys["admin"])
        first = await open_session(client, headers, world.a.model_id, n_items=100_000)
        total = first["n_items"]
        await client.get(f"/v1/sessions/{first['id']}/next", headers=headers)
        empty = await client.post(
            "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 5}, headers=headers
        )
        assert empty.status_code == 409 and "no items left" in empty.json()["detail"]
        await client.post(f"/v1/admin/sessions/{first['id']}/abort", headers=admin)
        second = await open_session(client, headers, world.a.model_id, n_items=100_000)
    assert second["n_items"] == total - 1
    async with database_session(db_url) as db:
        samples = {
            s: set(
                (
                    await db.execute(
                        select(SampleItem.family_id)
                        .join(EvalSession, EvalSession.sample_id == SampleItem.sample_id)
                        .where(EvalSession.id == uuid.UUID(s))
                    )
                ).scalars()
            )
            for s in (first["id"], second["id"])
        }
    assert len(samples[first["id"]] - samples[second["id"]]) == 1


async def test_other_org_is_unaffected_by_one_orgs_quota(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    async with running_api(test_settings(db_url, max_concurrent_sessions=1)) as (_, client):
        a = await login(client, world.a.keys["evaluator"])
        b = await login(client, world.b.keys["evaluator"])
        results = await asyncio.gather(
            client.post(
                "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 3}, headers=a
            ),
            client.post(
                "/v1/sessions", json={"model_id": str(world.b.model_id), "n_items": 3}, headers=b
            ),
        )
    assert [r.status_code for r in results] == [201, 201]
