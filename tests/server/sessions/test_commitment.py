"""Sample commitments through the real API: the creator gets the commitment before any item
is delivered; the reveal stays closed until the session is scored, is refused (404) to
other organisations, and once open the SDK's ``verify_commitment`` accepts it with the
items the vendor was given and refuses any tampering."""

from __future__ import annotations

import dataclasses
import re
import uuid
from typing import Any

import httpx
from sqlalchemy import select

from bank.models import Item as BankItem
from bank.models import Sample, SampleItem
from bank.sampling.commitment import commitment
from bank.sampling.source import SourceKind
from clients.sdk import (
    AsyncProctorClient,
    CommitmentReveal,
    Item,
    SampleSource,
    verify_commitment,
)
from tests.support.api import World, login, running_api, seed_world
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import judged_settings, wait_until_scored

HEX64 = re.compile(r"[0-9a-f]{64}")
N_ITEMS = 6


async def _reveal(client: httpx.AsyncClient, key: str, session_id: str) -> httpx.Response:
    return await client.get(
        f"/v1/sessions/{session_id}/commitment", headers=await login(client, key)
    )


async def _run_to_scored(
    app: Any, client: httpx.AsyncClient, url: str, world: World
) -> tuple[str, str, list[Item]]:
    """Open a session of org A with the SDK, check what shows before delivery and half way,
    answer the rest and wait for the scoring: the session id, the commitment given at
    creation and every item delivered."""
    assert world.a.model_id is not None
    transport = httpx.ASGITransport(app=app)
    async with AsyncProctorClient(
        "http://proctor.test", world.a.keys["evaluator"], transport=transport
    ) as sdk:
        session = await sdk.create_session(model_id=world.a.model_id, n_items=N_ITEMS)
        assert session.commitment is not None and HEX64.fullmatch(session.commitment)
        assert (session.pending, session.completed, session.allocated) == (0, 0, N_ITEMS)
        assert (await sdk.get_session(session.id)).commitment == session.commitment
        listed = {s.id: s.commitment for s in await sdk.list_sessions()}
        assert listed[session.id] == session.commitment
        closed = await sdk.get_commitment(session.id)
        assert closed == CommitmentReveal(commitment=session.commitment, revealed=False)
        delivered: list[Item] = []
        while (item := await sdk.next_item(session.id)) is not None:
            delivered.append(item)
            await sdk.submit_answer(session.id, item, "The answer is (A).")
            if len(delivered) == 2:  # half way: still closed, to the org and to auditors
                for key in (world.a.keys["vendor"], world.a.keys["auditor"]):
                    body = (await _reveal(client, key, session.id)).json()
                    assert body == {
                        "commitment": session.commitment,
                        "revealed": False,
                        "seed": None,
                        "salt": None,
                        "source": None,
                        "item_ids": None,
                    }
        assert len(delivered) == N_ITEMS
    await wait_until_scored(url, uuid.UUID(session.id), within_s=120)
    return session.id, session.commitment, delivered


async def test_a_scored_session_opens_its_commitment_and_the_sdk_verifies_it(
    fresh_db_url: str, llm: FakeLlm
) -> None:
    async with running_api(judged_settings(fresh_db_url, llm)) as (app, client):
        world = await seed_world(fresh_db_url, per_cell=3)
        session_id, promised, delivered = await _run_to_scored(app, client, fresh_db_url, world)
        other = await _reveal(client, world.b.keys["vendor"], session_id)
        assert other.status_code == 404, other.text
        for role in ("vendor", "auditor", "admin"):
            response = await _reveal(client, world.a.keys[role], session_id)
            assert response.status_code == 200, response.text
            assert response.json()["revealed"] is True
    reveal = CommitmentReveal.from_json(response.json())
    check = verify_commitment(reveal, delivered, expected_commitment=promised)
    assert check.ok and check.recomputed == promised, check.problems
    assert reveal.source is not None and reveal.source["kind"] == SourceKind.STRATIFIED
    assert reveal.item_ids == [item.item_id for item in delivered]
    async with database_session(fresh_db_url) as db:
        sample = (
            await db.execute(select(Sample).where(Sample.commitment == promised))
        ).scalar_one()
        drawn = await db.execute(
            select(SampleItem.position, SampleItem.drawn_position).where(
                SampleItem.sample_id == sample.id
            )
        )
        assert all(position == drawn_at for position, drawn_at in drawn.tuples())
    assert sample.drawn_at is not None and sample.drawn_at <= sample.created_at
    assert (reveal.seed, reveal.salt) == (sample.seed, sample.salt)
    assert sample.source == {"kind": "stratified", "disciplines": reveal.source["disciplines"]}
    server_side = commitment(
        seed=sample.seed,
        salt=reveal.salt or "",
        source=reveal.source.to_json(),
        item_ids=reveal.item_ids,
    )
    assert server_side == promised

    ids = list(reveal.item_ids)
    tampered = {
        "one id changed": dataclasses.replace(reveal, item_ids=[str(uuid.uuid4()), *ids[1:]]),
        "seed changed": dataclasses.replace(reveal, seed="0" * 32),
        "salt changed": dataclasses.replace(reveal, salt="1" * 32),
        "order swapped": dataclasses.replace(reveal, item_ids=[ids[1], ids[0], *ids[2:]]),
        "source changed": dataclasses.replace(reveal, source=SampleSource("anchor")),
    }
    for what, forged in tampered.items():
        failed = verify_commitment(forged, delivered, expected_commitment=promised)
        assert not failed.ok and failed.problems, what
    # a self-consistent reveal that is not the promise given at creation proves nothing
    assert not verify_commitment(reveal, delivered, expected_commitment="0" * 64).ok
    # an item the vendor got that is not in the sample, or not at its committed position
    stranger: list[Item | tuple[int, str]] = [
        *delivered[:-1],
        (delivered[-1].position, str(uuid.uuid4())),
    ]
    strange = verify_commitment(reveal, stranger, expected_commitment=promised)
    assert "not in the committed sample" in strange.problems[0]
    moved = [(0, delivered[1].item_id), (1, delivered[0].item_id)]
    assert not verify_commitment(reveal, moved, expected_commitment=promised).ok
    assert verify_commitment(reveal, moved, expected_commitment=promised, mode="adaptive").ok


async def test_a_session_of_another_organisation_is_not_found(
    fresh_db_url: str, llm: FakeLlm
) -> None:
    async with running_api(judged_settings(fresh_db_url, llm)) as (_, client):
        world = await seed_world(fresh_db_url, per_cell=3)
        assert world.a.model_id is not None
        headers = await login(client, world.a.keys["vendor"])
        created = await client.post(
            "/v1/sessions", json={"model_id": str(world.a.model_id)}, headers=headers
        )
        assert created.status_code == 201, created.text
        session_id = created.json()["id"]
        for key in (world.b.keys["vendor"], world.b.keys["evaluator"]):
            response = await _reveal(client, key, session_id)
            assert response.status_code == 404, response.text
            assert "commitment" not in response.json()
        unknown = await _reveal(client, world.a.keys["vendor"], str(uuid.uuid4()))
        assert unknown.status_code == 404
        own = (await _reveal(client, world.a.keys["vendor"], session_id)).json()
        assert own["commitment"] == created.json()["commitment"] and own["revealed"] is False


async def test_an_item_set_session_commits_to_its_set(fresh_db_url: str, llm: FakeLlm) -> None:
    """The source names the item set; the stored commitment recomputes from the stored
    seed, salt, source and items in drawn order."""
    async with running_api(judged_settings(fresh_db_url, llm)) as (_, client):
        world = await seed_world(fresh_db_url, per_cell=3)
        async with database_session(fresh_db_url) as db:
            items = list((await db.execute(select(BankItem.id).limit(4))).scalars())
        admin = await login(client, world.a.keys["admin"])
        saved = await client.post(
            "/v1/admin/bank/item-sets",
            json={"name": "four", "item_ids": [str(i) for i in items], "rule": {"k": "t"}},
            headers=admin,
        )
        assert saved.status_code == 201, saved.text
        created = await client.post(
            "/v1/sessions",
            json={"model_id": str(world.a.model_id), "item_set": "four"},
            headers=await login(client, world.a.keys["evaluator"]),
        )
        assert created.status_code == 201, created.text
    promised = created.json()["commitment"]
    async with database_session(fresh_db_url) as db:
        sample = (
            await db.execute(select(Sample).where(Sample.commitment == promised))
        ).scalar_one()
        drawn = list(
            (
                await db.execute(
                    select(SampleItem.item_id)
                    .where(SampleItem.sample_id == sample.id)
                    .order_by(SampleItem.drawn_position)
                )
            ).scalars()
        )
    assert sample.source == {"kind": "item_set", "item_set_id": saved.json()["id"]}
    assert sample.salt is not None and sample.drawn_at is not None
    assert (
        commitment(seed=sample.seed, salt=sample.salt, source=sample.source, item_ids=drawn)
        == promised
    )
