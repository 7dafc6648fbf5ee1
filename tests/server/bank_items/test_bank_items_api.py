"""The item review API (``/v1/admin/bank/items``) on the running app, SQLite and PostgreSQL:
who may read and review, what each role sees, the review actions and their refusals,
hostile bodies, and the audit row of a review."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from bank.item_status import change_status
from bank.models import Item, ItemStatus, ItemStatusChange, Stratum
from tests.support.api import World, login
from tests.support.audit import audit_rows, last_audit_id
from tests.support.database import database_session

Api = tuple[httpx.AsyncClient, World, FastAPI]
WorldDb = tuple[str, World]
ITEMS = "/v1/admin/bank/items"


async def flag(db_url: str, n: int, *, qtype: str = "multiple_choice") -> list[uuid.UUID]:
    """Flag ``n`` original items of ``qtype`` as the health job would; their ids."""
    async with database_session(db_url) as db:
        ids = list(
            (
                await db.execute(
                    select(Item.id)
                    .where(Item.qtype == qtype, Item.variant == "original", Item.status == "active")
                    .order_by(Item.id)
                    .limit(n)
                )
            ).scalars()
        )
        await change_status(
            db, item_ids=ids, to=ItemStatus.FLAGGED, actor="health-job", reasons=["floor"]
        )
    return ids


async def statuses(db_url: str, ids: list[uuid.UUID]) -> list[str]:
    async with database_session(db_url) as db:
        found = await db.execute(select(Item.id, Item.status).where(Item.id.in_(ids)))
        rows = dict(found.tuples().all())
    return [rows[i] for i in ids]


async def active_count(db_url: str) -> tuple[int, int]:
    """Sum of the strata's maintained active counts, and the count from scratch."""
    async with database_session(db_url) as db:
        maintained = await db.scalar(select(func.sum(Stratum.n_active)))
        counted = await db.scalar(select(func.count()).where(Item.status == "active"))
    return int(maintained or 0), int(counted or 0)


async def test_who_may_read_and_review(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [item] = await flag(db_url, 1)
    reads = [f"{ITEMS}", f"{ITEMS}/{item}/history"]
    keep = {"action": "keep", "note": "looks fine"}
    callers: dict[str, dict[str, str]] = {
        f"a-{role}": await login(client, key) for role, key in world.a.keys.items()
    }
    callers.update({f"b-{r}": await login(client, k) for r, k in world.b.keys.items()})
    for name, headers in callers.items():
        may_read = name in ("a-admin", "a-auditor")
        for url in reads:
            response = await client.get(url, headers=headers)
            assert response.status_code == (200 if may_read else 403), (name, url, response.text)
        if name != "a-admin":
            response = await client.post(f"{ITEMS}/{item}/review", json=keep, headers=headers)
            assert response.status_code == 403, (name, response.text)
    for url in reads:
        assert (await client.get(url)).status_code == 401
    assert (await client.post(f"{ITEMS}/{item}/review", json=keep)).status_code == 401
    assert await statuses(db_url, [item]) == ["flagged"]  # no refused call changed it
    response = await client.post(f"{ITEMS}/{item}/review", json=keep, headers=callers["a-admin"])
    assert response.status_code == 200, response.text
    assert await statuses(db_url, [item]) == ["active"]


async def test_the_queue_shows_answers_to_admins_only(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    flagged = await flag(db_url, 5)
    admin = await login(client, world.a.keys["admin"])
    auditor = await login(client, world.a.keys["auditor"])
    as_admin = (await client.get(ITEMS, headers=admin)).json()
    as_auditor = (await client.get(ITEMS, headers=auditor)).json()
    assert {row["id"] for row in as_admin} == {str(i) for i in flagged}
    assert [row["id"] for row in as_admin] == sorted((str(i) for i in flagged), reverse=True)
    assert all(row["answer"] and row["status"] == "flagged" for row in as_admin)
    assert all(row["answer"] is None and row["explanation"] is None for row in as_auditor)
    assert [r["question"] for r in as_auditor] == [r["question"] for r in as_admin]
    change = as_auditor[0]["latest_change"]
    assert (change["from_status"], change["to_status"]) == ("active", "flagged")
    assert (change["reasons"], change["actor"]) == (["floor"], "health-job")
    for key in ("id", "family_id", "discipline", "qtype", "subdiscipline", "options"):
        assert key in as_auditor[0]
    # pages: descending id from ``before``
    first = (await client.get(ITEMS, params={"limit": 2}, headers=auditor)).json()
    rest = (
        await client.get(ITEMS, params={"limit": 10, "before": first[-1]["id"]}, headers=auditor)
    ).json()
    assert [r["id"] for r in first + rest] == [r["id"] for r in as_admin]
    # other filters
    discipline = as_admin[0]["discipline"]
    same = (await client.get(ITEMS, params={"discipline": discipline}, headers=admin)).json()
    assert {r["id"] for r in same} == {r["id"] for r in as_admin if r["discipline"] == discipline}
    active = await client.get(ITEMS, params={"status": "active", "limit": 3}, headers=admin)
    assert active.status_code == 200 and [r["status"] for r in active.json()] == ["active"] * 3
    assert all(r["latest_change"] is None for r in active.json())


async def test_keep_retire_and_refused_moves(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    kept, retired = await flag(db_url, 2)
    admin = await login(client, world.a.keys["admin"])
    before = await active_count(db_url)
    response = await client.post(
        f"{ITEMS}/{kept}/review", json={"action": "keep", "note": "fine"}, headers=admin
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["action"] == "keep" and body["revision"] is None
    assert body["item"]["status"] == "active" and body["item"]["answer"]
    assert body["item"]["latest_change"]["reasons"] == ["keep"]
    assert body["item"]["latest_change"]["note"] == "fine"
    response = await client.post(
        f"{ITEMS}/{retired}/review", json={"action": "retire", "note": "broken"}, headers=admin
    )
    assert response.status_code == 200 and response.json()["item"]["status"] == "retired"
    maintained, counted = await active_count(db_url)
    assert maintained == counted == before[0] + 1
    # refused: retired -> active, retired -> retired, active -> active; state intact
    for item, action, detail in (
        (retired, "keep", "may not become active from retired"),
        (retired, "retire", "already retired"),
        (kept, "keep", "already active"),
        (kept, "edit", "only a flagged item"),
    ):
        payload: dict[str, Any] = {"action": action, "note": "again"}
        if action == "edit":
            payload["answer"] = "B"
        response = await client.post(f"{ITEMS}/{item}/review", json=payload, headers=admin)
        assert response.status_code == 409, response.text
        assert detail in response.json()["detail"]
    assert await statuses(db_url, [kept, retired]) == ["active", "retired"]
    history = (await client.get(f"{ITEMS}/{retired}/history", headers=admin)).json()
    assert history["status"] == "retired" and history["replaced_by"] == []
    assert [(c["from_status"], c["to_status"]) for c in history["changes"]] == [
        ("active", "flagged"),
        ("flagged", "retired"),
    ]
    ghost = uuid.uuid4()
    for response in (
        await client.post(
            f"{ITEMS}/{ghost}/review", json={"action": "keep", "note": "x"}, headers=admin
        ),
        await client.get(f"{ITEMS}/{ghost}/history", headers=admin),
    ):
        assert response.status_code == 404, response.text
        assert response.headers["content-type"] == "application/problem+json"


async def test_edit_and_restore(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [old] = await flag(db_url, 1)
    admin = await login(client, world.a.keys["admin"])
    auditor = await login(client, world.a.keys["auditor"])
    response = await client.post(
        f"{ITEMS}/{old}/review",
        json={"action": "edit", "note": "the key was wrong", "answer": "C"},
        headers=admin,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    revision = body["revision"]
    assert body["item"]["status"] == "retired"
    assert revision["status"] == "active" and revision["replaces_id"] == str(old)
    assert revision["family_id"] == body["item"]["family_id"] and revision["answer"] == "C"
    assert revision["question"] == body["item"]["question"]
    old_history = (await client.get(f"{ITEMS}/{old}/history", headers=auditor)).json()
    assert old_history["replaced_by"] == [revision["id"]]
    assert old_history["changes"][-1]["reasons"] == ["edit"]
    # a reviewer's note may spell out the answer: admins read it, auditors do not
    assert old_history["changes"][-1]["note"] is None
    as_admin = (await client.get(f"{ITEMS}/{old}/history", headers=admin)).json()
    assert as_admin["changes"][-1]["note"] == "the key was wrong"
    new_history = (await client.get(f"{ITEMS}/{revision['id']}/history", headers=auditor)).json()
    assert new_history["replaces_id"] == str(old) and new_history["changes"] == []
    maintained, counted = await active_count(db_url)
    assert maintained == counted
    # an edit to another item's question and options is refused, the item stays flagged
    [other_flagged] = await flag(db_url, 1)
    async with database_session(db_url) as db:
        other = (
            await db.execute(
                select(Item)
                .where(Item.qtype == "multiple_choice", Item.status == "active")
                .limit(1)
            )
        ).scalar_one()
        copy = {"question": other.question, "options": other.options}
    response = await client.post(
        f"{ITEMS}/{other_flagged}/review",
        json={"action": "edit", "note": "n", **copy},
        headers=admin,
    )
    assert response.status_code == 409 and "already has this question" in response.json()["detail"]
    assert await statuses(db_url, [other_flagged]) == ["flagged"]


HOSTILE: list[tuple[str, Any]] = [
    ("not an object", ["keep"]),
    ("no action", {"note": "n"}),
    ("unknown action", {"action": "delete", "note": "n"}),
    ("no note", {"action": "keep"}),
    ("empty note", {"action": "keep", "note": ""}),
    ("blank note", {"action": "keep", "note": "   "}),
    ("huge note", {"action": "keep", "note": "n" * 20_000}),
    ("NUL in note", {"action": "keep", "note": "a\u0000b"}),
    ("unknown field", {"action": "keep", "note": "n", "answer_key": "A"}),
    ("edit fields on keep", {"action": "keep", "note": "n", "answer": "B"}),
    ("edit without fields", {"action": "edit", "note": "n"}),
    ("NUL in question", {"action": "edit", "note": "n", "question": "q\u0000"}),
    ("huge question", {"action": "edit", "note": "n", "question": "q" * 100_001}),
    ("options not strings", {"action": "edit", "note": "n", "options": [1, {"a": 2}]}),
    ("one option", {"action": "edit", "note": "n", "options": ["only"]}),
    ("27 options", {"action": "edit", "note": "n", "options": [str(i) for i in range(27)]}),
    ("answer not an option", {"action": "edit", "note": "n", "answer": "Q"}),
    ("answer wrong type", {"action": "edit", "note": "n", "answer": ["A"]}),
    ("unchanged edit", {"action": "edit", "note": "n", "answer": "__SAME__"}),
]


@pytest.mark.parametrize(("what", "payload"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_bodies_are_refused_with_4xx(
    api: Api, world_db: WorldDb, what: str, payload: Any
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [item] = await flag(db_url, 1)
    admin = await login(client, world.a.keys["admin"])
    if isinstance(payload, dict) and payload.get("answer") == "__SAME__":
        async with database_session(db_url) as db:
            payload = {
                **payload,
                "answer": await db.scalar(select(Item.answer).where(Item.id == item)),
            }
    response = await client.post(f"{ITEMS}/{item}/review", json=payload, headers=admin)
    assert 400 <= response.status_code < 500, (what, response.status_code, response.text)
    assert await statuses(db_url, [item]) == ["flagged"], what


async def test_hostile_paths_and_queries_are_refused_with_4xx(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [item] = await flag(db_url, 1)
    admin = await login(client, world.a.keys["admin"])
    lone_surrogate = b'{"action": "keep", "note": "\\ud800"}'
    for method, url, kwargs in (
        ("GET", ITEMS, {"params": {"status": "deleted"}}),
        ("GET", ITEMS, {"params": {"limit": 0}}),
        ("GET", ITEMS, {"params": {"limit": 10**9}}),
        ("GET", ITEMS, {"params": {"before": "not-a-uuid"}}),
        ("GET", ITEMS, {"params": {"discipline": "d" * 101}}),
        ("GET", f"{ITEMS}/not-a-uuid/history", {}),
        ("POST", f"{ITEMS}/not-a-uuid/review", {"json": {"action": "keep", "note": "n"}}),
        ("POST", f"{ITEMS}/{item}/review", {"content": b"{not json"}),
        ("POST", f"{ITEMS}/{item}/review", {"content": lone_surrogate}),
        ("POST", f"{ITEMS}/{item}/review", {"content": b'{"action": "keep", "note": "\xff"}'}),
    ):
        headers = {**admin, "content-type": "application/json"}
        response = await client.request(method, url, headers=headers, **kwargs)
        assert 400 <= response.status_code < 500, (url, kwargs, response.text)
    assert await statuses(db_url, [item]) == ["flagged"]


async def test_a_review_is_audited(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    kept, refused = await flag(db_url, 2)
    admin = await login(client, world.a.keys["admin"])
    subject = (await client.get("/v1/whoami", headers=admin)).json()["subject"]
    base = await last_audit_id(db_url)
    ok = await client.post(
        f"{ITEMS}/{kept}/review", json={"action": "keep", "note": "ok"}, headers=admin
    )
    await client.post(
        f"{ITEMS}/{refused}/review", json={"action": "retire", "note": "x"}, headers=admin
    )
    conflict = await client.post(
        f"{ITEMS}/{refused}/review", json={"action": "keep", "note": "x"}, headers=admin
    )
    assert (ok.status_code, conflict.status_code) == (200, 409)
    rows = [r for r in await audit_rows(db_url, base) if r.route == f"{ITEMS}/{{item_id}}/review"]
    assert [(r.method, r.status, r.subject, r.org_id) for r in rows] == [
        ("POST", 200, subject, world.a.id),
        ("POST", 200, subject, world.a.id),
        ("POST", 409, subject, world.a.id),
    ]
    # the history names the reviewer's key too
    async with database_session(db_url) as db:
        actors = set(
            (
                await db.execute(
                    select(ItemStatusChange.actor).where(ItemStatusChange.item_id == kept)
                )
            ).scalars()
        )
    assert actors == {"health-job", subject}
