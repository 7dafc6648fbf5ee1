"""Named item sets over the API, on SQLite and PostgreSQL: admins save them
(``POST /v1/admin/bank/item-sets``), admins and auditors list them, and evaluators open
sessions drawn from one (``item_set`` on ``POST /v1/sessions``, through the SDK)."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from bank.models import Exposure, Item, SampleItem, Stratum
from clients.sdk import AsyncProctorClient, ConflictError, SessionMode
from clients.sdk._core import create_session as create_session_call
from server.sessions.models import EvalSession
from tests.support.api import World, login, open_session
from tests.support.database import database_session

ROUTE = "/v1/admin/bank/item-sets"
BASE_URL = "http://proctor.test"
Api = tuple[httpx.AsyncClient, World, FastAPI]


async def bank_families(db_url: str) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Family id -> item ids (sorted) of the seeded bank, families in id order."""
    async with database_session(db_url) as db:
        rows = await db.execute(select(Item.family_id, Item.id).order_by(Item.family_id, Item.id))
        out: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
        for family_id, item_id in rows.tuples():
            out[family_id].append(item_id)
    return dict(out)


async def flag(db_url: str, item_ids: list[uuid.UUID]) -> None:
    """Set items' status to flagged directly (keeping the strata's active counts)."""
    async with database_session(db_url) as db:
        strata = await db.execute(
            update(Item)
            .where(Item.id.in_(item_ids), Item.status == "active")
            .values(status="flagged")
            .returning(Item.stratum_id)
        )
        for stratum_id in strata.scalars().all():
            await db.execute(
                update(Stratum)
                .where(Stratum.id == stratum_id)
                .values(n_active=Stratum.n_active - 1)
            )


async def save(
    client: httpx.AsyncClient, headers: dict[str, str], name: str, item_ids: list[uuid.UUID]
) -> httpx.Response:
    body = {"name": name, "item_ids": [str(i) for i in item_ids], "rule": {"kind": "test"}}
    return await client.post(ROUTE, json=body, headers=headers)


async def listed(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = await client.get(ROUTE, headers=headers)
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


async def test_admins_save_and_oversight_lists_sets(api: Api, world_db: tuple[str, World]) -> None:
    client, world, _ = api
    fams = list((await bank_families(world_db[0])).values())
    headers = {role: await login(client, key) for role, key in world.a.keys.items()}
    items = [*fams[0], fams[1][0], fams[0][0]]
    body = {"name": "selective", "item_ids": [str(i) for i in items], "rule": {"top": 0.5}}

    response = await client.post(ROUTE, json=body, headers=headers["admin"])

    assert response.status_code == 201, response.text
    saved = response.json()
    assert set(saved) == {"id", "name", "n_items", "rule", "created_by", "created_at"}
    assert saved["name"] == "selective" and saved["rule"] == {"top": 0.5}
    assert saved["n_items"] == len(set(items))
    assert "item_ids" not in saved  # a set's members are never sent back
    whoami = (await client.get("/v1/whoami", headers=headers["admin"])).json()
    assert saved["created_by"] == whoami["subject"]
    for role in ("admin", "auditor"):
        assert await listed(client, headers[role]) == [saved]
    for role in ("evaluator", "vendor", "auditor"):
        refused = await client.post(ROUTE, json={**body, "name": role}, headers=headers[role])
        assert refused.status_code == 403, (role, refused.text)
    for role in ("evaluator", "vendor"):
        assert (await client.get(ROUTE, headers=headers[role])).status_code == 403
    for key in world.b.keys.values():
        other = await login(client, key)
        assert (await client.get(ROUTE, headers=other)).status_code == 403
    assert (await client.get(ROUTE)).status_code == 401
    assert await listed(client, headers["admin"]) == [saved]


HOSTILE_NAMES = [
    "",
    "a" * 101,
    "nul\u0000inside",
    "line\nbreak",
    "\u001b[2Jclear",
    "lone \ud800 surrogate",
    "rtl\u202eoverride",
    " padded ",
    12,
    None,
    ["list"],
]


async def test_bad_sets_are_refused_clearly_and_nothing_is_saved(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    fams = list((await bank_families(world_db[0])).values())
    admin = await login(client, world.a.keys["admin"])
    assert (await save(client, admin, "taken", fams[0])).status_code == 201
    before = await listed(client, admin)

    duplicate = await save(client, admin, "taken", fams[1])
    assert duplicate.status_code == 409 and "exists already" in duplicate.json()["detail"]

    strangers = [uuid.uuid4(), uuid.uuid4()]
    unknown = await save(client, admin, "unknown", [fams[2][0], *strangers])
    assert unknown.status_code == 422
    assert "2 of 3 item ids are not in the bank" in unknown.json()["detail"]

    as_json = {**admin, "content-type": "application/json"}
    for name in HOSTILE_NAMES:
        body = json.dumps({"name": name, "item_ids": [str(fams[3][0])]})  # escapes, as sent
        response = await client.post(ROUTE, content=body, headers=as_json)
        assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")

    raw_bodies = [
        '{"name": "nan", "item_ids": ["ITEM"], "rule": {"x": NaN}}',
        '{"name": "inf", "item_ids": ["ITEM"], "rule": {"x": [Infinity]}}',
        '{"name": "empty", "item_ids": []}',
        '{"name": "not-ids", "item_ids": ["x"]}',
        '{"name": "extra", "item_ids": ["ITEM"], "members": 1}',
        '{"name": "rule", "item_ids": ["ITEM"], "rule": [1]}',
        "not json",
    ]
    for raw in raw_bodies:
        response = await client.post(
            ROUTE,
            content=raw.replace("ITEM", str(fams[3][0])),
            headers=as_json,
        )
        assert response.status_code == 422, (raw, response.status_code, response.text)
    assert await listed(client, admin) == before


async def test_a_session_on_an_item_set_serves_only_its_active_members(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, app = api
    db_url = world_db[0]
    fams = await bank_families(db_url)
    augmented = [f for f, items in fams.items() if len(items) > 1][:5]
    alone = [f for f, items in fams.items() if len(items) == 1][:4]
    members = [i for f in augmented for i in fams[f]] + [fams[f][0] for f in alone]
    admin = await login(client, world.a.keys["admin"])
    assert (await save(client, admin, "selective", members)).status_code == 201
    # after saving: one whole family flagged, every item but one of another, an open item
    flagged = fams[augmented[0]] + fams[augmented[1]][:-1] + [fams[alone[0]][0]]
    await flag(db_url, flagged)
    servable_families = set(augmented[1:]) | set(alone[1:])

    transport = httpx.ASGITransport(app=app)
    async with AsyncProctorClient(BASE_URL, world.a.keys["evaluator"], transport=transport) as sdk:
        assert world.a.model_id is not None
        session = await sdk.create_session(model_id=world.a.model_id, item_set="selective")
        assert session.mode is SessionMode.ITEM_SET
        assert session.n_items == len(servable_families) == 7
        served = []
        async for item in sdk.items(session.id):
            served.append(uuid.UUID(item.item_id))
            await sdk.submit_answer(session.id, item, "A")
        assert (await sdk.get_session(session.id)).completed == 7

        with pytest.raises(ConflictError, match="'selective' has no active items left"):
            await sdk.create_session(model_id=world.a.model_id, item_set="selective")

    assert len(served) == len(set(served)) == 7
    assert set(served) <= set(members)
    assert not set(served) & set(flagged)
    async with database_session(db_url) as db:
        family_of = dict(
            (await db.execute(select(Item.id, Item.family_id).where(Item.id.in_(served))))
            .tuples()
            .all()
        )
        assert set(family_of.values()) == servable_families
        # augmented families had one active member left: that one, and only it, was served
        assert {i for i in served if family_of[i] == augmented[1]} == {fams[augmented[1]][-1]}
        # exposure recorded as for any session: every family delivered, by this session
        exposures = (
            await db.execute(
                select(Exposure.family_id, Exposure.delivered_at).where(
                    Exposure.org_id == world.a.id, Exposure.session_id == uuid.UUID(session.id)
                )
            )
        ).all()
        assert {e.family_id for e in exposures} == servable_families
        assert all(e.delivered_at is not None for e in exposures)
        mode = await db.scalar(
            select(EvalSession.mode).where(EvalSession.id == uuid.UUID(session.id))
        )
        assert mode == "item_set"

    # the organisation's ordinary sessions never serve those families again
    evaluator = await login(client, world.a.keys["evaluator"])
    fixed = await open_session(client, evaluator, world.a.model_id, n_items=len(fams))
    async with database_session(db_url) as db:
        sample = await db.scalar(
            select(EvalSession.sample_id).where(EvalSession.id == uuid.UUID(fixed["id"]))
        )
        drawn = set(
            (
                await db.execute(select(SampleItem.family_id).where(SampleItem.sample_id == sample))
            ).scalars()
        )
    assert drawn and not drawn & servable_families


async def test_who_may_open_an_item_set_session(api: Api, world_db: tuple[str, World]) -> None:
    client, world, _ = api
    fams = list((await bank_families(world_db[0])).values())
    admin = await login(client, world.a.keys["admin"])
    assert (await save(client, admin, "small", [f[0] for f in fams[:6]])).status_code == 201
    headers = {role: await login(client, world.a.keys[role]) for role in ("evaluator", "vendor")}
    model = str(world.a.model_id)

    async def create(role: str, **body: Any) -> httpx.Response:
        return await client.post(
            "/v1/sessions", json={"model_id": model, **body}, headers=headers[role]
        )

    # vendors are refused before the name is looked up: a set's existence is not revealed
    for name in ("small", "no such set"):
        vendor = await create("vendor", item_set=name)
        assert vendor.status_code == 403, vendor.text
    assert (await create("evaluator", item_set="no such set")).status_code == 404
    mixed = await create("evaluator", item_set="small", mode="fixed")
    assert mixed.status_code == 422 and "go together" in mixed.text
    assert (await create("evaluator", mode="item_set")).status_code == 422
    assert (await create("evaluator", item_set="")).status_code == 422
    explicit = await create("evaluator", item_set="small", mode="item_set", n_items=2)
    assert explicit.status_code == 201, explicit.text
    assert explicit.json()["mode"] == "item_set" and explicit.json()["n_items"] == 2
    other_org = await login(client, world.b.keys["evaluator"])
    theirs = await client.post(
        "/v1/sessions",
        json={"model_id": str(world.b.model_id), "item_set": "small"},
        headers=other_org,
    )
    assert theirs.status_code == 201 and theirs.json()["n_items"] == 6


def test_the_sdk_sends_the_item_set_and_its_mode() -> None:
    model = uuid.uuid4()
    named = create_session_call(model_id=model, n_items=None, mode="fixed", item_set="sel")
    assert named.json == {"model_id": str(model), "mode": "item_set", "item_set": "sel"}
    plain = create_session_call(model_id=model, n_items=3, mode=SessionMode.ADAPTIVE)
    assert plain.json == {"model_id": str(model), "mode": "adaptive", "n_items": 3}
    # any other mode is sent as asked, for the server to refuse
    mixed = create_session_call(model_id=model, n_items=None, mode="replay", item_set="sel")
    assert mixed.json is not None and mixed.json["mode"] == "replay"
