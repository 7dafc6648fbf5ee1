"""No answer-key oracle in what a vendor reads while its session runs.

The attack: answer one item, poll ``GET /v1/sessions/{id}/scoring`` until it is scored, and
read whether the answer was right off the change in ``points``. Here two sessions get one
answer each, one right and one wrong; once both are scored, everything the vendor (and the
organisation's evaluator) can read about them is the same but for ids and times, while an
admin sees the different points. Once a session is complete and scored, its aggregate
result is shown. Adaptive sessions, whose stopping and item choice follow the verdicts, are
not open to vendors, and their estimate is hidden from non-platform roles until scored.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.api import World, login, open_session, running_api
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import (
    answer_for,
    answer_items,
    judged_settings,
    wait_until,
)

LEASE_IDLE_S = 0.2
VOLATILE = {"session_id", "id", "deadline_at", "created_at", "ended_at", "model_id", "commitment"}
"""Ids, times and the sample commitment (a hash of a fresh random seed): they differ
between any two sessions whatever was answered."""


async def answer_first_item(
    client: httpx.AsyncClient, db_url: str, headers: dict[str, str], sid: str, *, right: bool
) -> None:
    answered = await answer_items(
        client, db_url, sid, headers, lambda item, _: answer_for(item, right), limit=1
    )
    assert len(answered) == 1


def stable(document: Any) -> Any:
    """``document`` without ids and timestamps."""
    if isinstance(document, dict):
        return {k: stable(v) for k, v in document.items() if k not in VOLATILE}
    if isinstance(document, list):
        return [stable(v) for v in document]
    return document


async def views(client: httpx.AsyncClient, headers: dict[str, str], sid: str) -> Any:
    scoring = (await client.get(f"/v1/sessions/{sid}/scoring", headers=headers)).json()
    session = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
    return stable({"scoring": scoring, "session": session})


async def test_one_scored_answer_tells_the_vendor_nothing(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    assert world.a.model_id is not None
    async with running_api(judged_settings(db_url, llm)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        vendor = await login(client, world.a.keys["vendor"])
        admin = await login(client, world.a.keys["admin"])
        sids = {}
        for right in (True, False):
            sid = (await open_session(client, evaluator, world.a.model_id, n_items=4))["id"]
            await answer_first_item(client, db_url, vendor, sid, right=right)
            sids[right] = sid

        async def both_scored() -> bool:
            for sid in sids.values():
                now = (await client.get(f"/v1/sessions/{sid}/scoring", headers=vendor)).json()
                if (now["judged"], now["waiting"]) != (1, 0):
                    return False
            return True

        await wait_until(both_scored, what="both answers scored")
        for role_headers in (vendor, evaluator):
            right_view = await views(client, role_headers, sids[True])
            wrong_view = await views(client, role_headers, sids[False])
            assert right_view == wrong_view
            scoring = right_view["scoring"]
            assert scoring["points"] is scoring["scored"] is scoring["needs_review"] is None
            assert (scoring["answers"], scoring["judged"], scoring["waiting"]) == (1, 1, 0)
        # platform roles see the verdict figures at any time
        points = {
            right: (await client.get(f"/v1/sessions/{sid}/scoring", headers=admin)).json()["points"]
            for right, sid in sids.items()
        }
        assert points == {True: 3, False: 0}


async def test_a_scored_session_shows_its_aggregate_result(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    assert world.a.model_id is not None
    async with running_api(judged_settings(db_url, llm)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        vendor = await login(client, world.a.keys["vendor"])
        sid = (await open_session(client, evaluator, world.a.model_id, n_items=2))["id"]
        await answer_first_item(client, db_url, vendor, sid, right=True)
        await answer_first_item(client, db_url, vendor, sid, right=True)

        async def scored() -> dict[str, Any] | None:
            now = (await client.get(f"/v1/sessions/{sid}/scoring", headers=vendor)).json()
            return now if now["state"] == "scored" else None

        final = await wait_until(scored, what="the session scored")
    assert (final["points"], final["scored"], final["needs_review"]) == (6, 2, 0)


async def test_adaptive_sessions_are_not_open_to_vendors_and_hide_their_estimate(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    assert world.a.model_id is not None
    async with running_api(judged_settings(db_url, llm, lease_idle_s=LEASE_IDLE_S)) as (_, client):
        body = {"model_id": str(world.a.model_id), "mode": "adaptive", "n_items": 8}
        vendor = await login(client, world.a.keys["vendor"])
        refused = await client.post("/v1/sessions", json=body, headers=vendor)
        assert refused.status_code == 403, refused.text
        evaluator = await login(client, world.a.keys["evaluator"])
        admin = await login(client, world.a.keys["admin"])
        opened = await client.post(
            "/v1/sessions",
            json={**body, "adaptive": {"policy": "uniform", "target_halfwidth": 50}},
            headers=evaluator,
        )
        assert opened.status_code == 201, opened.text
        sid = opened.json()["id"]
        for _ in range(4):
            await answer_first_item(client, db_url, evaluator, sid, right=True)

        async def scored_four() -> bool:
            now = (await client.get(f"/v1/sessions/{sid}", headers=admin)).json()
            return bool(now["adaptive"]["n_scored"] == 4)

        await wait_until(scored_four, what="four answers scored")
        admin_view = (await client.get(f"/v1/sessions/{sid}", headers=admin)).json()["adaptive"]
        assert admin_view["estimate"] is not None
        for headers in (vendor, evaluator):
            seen = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
            assert seen["state"] != "scored"
            assert seen["adaptive"]["estimate"] is None
            assert seen["adaptive"]["halfwidth"] is None
            assert seen["adaptive"]["stop_reason"] is None
            assert seen["adaptive"]["n_scored"] is seen["adaptive"]["checks"] is None
        # nor may a vendor drive it: its next item and its stop follow the verdicts
        await asyncio.sleep(LEASE_IDLE_S * 2)  # the evaluator's lease is idle
        vendor_next = await client.get(f"/v1/sessions/{sid}/next", headers=vendor)
        assert vendor_next.status_code == 403, vendor_next.text
        assert "adaptive" in vendor_next.json()["detail"]
