"""A full 1,000-item session over HTTP never shows an item's answer or explanation.

The bank is seeded here (4 disciplines × multiple choice + short answer × 3 sub-disciplines
× 50 = 1,200 families, augmented) with distinctive answers, options and explanations, so a
leak of any of them is a plain substring match. The session is driven next → answer until
204, reading the session after every answer, and every response body (and header) is scanned
for the answer and explanation of every item allocated to the session. Answers shorter than
8 characters (option letters, True/False) cannot be told apart from ordinary text and are
not looked for; every item still has its explanation looked for.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bank.importer import import_records
from bank.models import Item, SampleItem
from server.auth.service import create_api_key
from server.database import create_engine, unit_of_work
from server.registry.models import RegisteredModel
from server.sessions.models import EvalSession
from tests.support.api import login, open_session, running_api, test_settings
from tests.support.factories import make_org, raw_records

DISCIPLINES = 4
QTYPES = ("multiple_choice", "short_answer")
SUBDISCIPLINES = 3
PER_CELL = 50
N_ITEMS = 1000
MIN_SECRET_LENGTH = 8
ITEM_FIELDS = {"position", "item_id", "question", "options", "qtype", "discipline"}
SECRET_KEY = re.compile(r'"(answer|explanation)"\s*:')


def bank_records() -> list[dict[str, Any]]:
    """Canonical records whose answers, options and explanations are all unique."""
    records = []
    for d in range(DISCIPLINES):
        for qtype in QTYPES:
            for s in range(SUBDISCIPLINES):
                for i in range(PER_CELL):
                    tag = f"D{d}-{qtype}-S{s}-{i}"
                    record: dict[str, Any] = {
                        "discipline": f"d{d}",
                        "subdiscipline": f"S{s}",
                        "qtype": qtype,
                        "question": f"[{tag}] Consider case {uuid.uuid4().hex}: what holds?",
                        "explanation": f"EXPLANATION {uuid.uuid4().hex} for {tag}",
                        "source": "no-leak test",
                        "language": "en",
                    }
                    if qtype == "multiple_choice":
                        record["options"] = [f"choice {uuid.uuid4().hex}" for _ in range(4)]
                        record["answer"] = "ABCD"[i % 4]
                    else:
                        record["answer"] = f"ANSWER {uuid.uuid4().hex} for {tag}"
                    records.append(record)
    return records


async def seed(db_url: str) -> tuple[str, uuid.UUID]:
    """The bank, an organisation with an evaluator key and a model; returns (key, model)."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            report = await import_records(
                db, raw_records(bank_records()), augment=True, add_disciplines=True
            )
            assert report.originals_added == DISCIPLINES * len(QTYPES) * SUBDISCIPLINES * PER_CELL
        async with unit_of_work(engine) as db:
            org = await make_org(db, "no-leak")
            _, key = await create_api_key(db, org_id=org.id, role="evaluator")
            model = RegisteredModel(org_id=org.id, name="no-leak-model", api_snapshot="v1")
            db.add(model)
            await db.flush()
            return key, model.id
    finally:
        await engine.dispose()


async def allocated(db_url: str, session_id: str) -> list[Any]:
    """The session's sample, position by position, with each item's secrets and family."""
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            statement = (
                select(
                    SampleItem.position,
                    SampleItem.item_id,
                    SampleItem.family_id,
                    Item.family_id.label("item_family"),
                    Item.answer,
                    Item.explanation,
                )
                .join(Item, Item.id == SampleItem.item_id)
                .join(EvalSession, EvalSession.sample_id == SampleItem.sample_id)
                .where(EvalSession.id == uuid.UUID(session_id))
                .order_by(SampleItem.position)
            )
            return list((await connection.execute(statement)).all())
    finally:
        await engine.dispose()


def item_keys(value: Any) -> set[str]:
    """Every key of every object in a JSON value."""
    if isinstance(value, dict):
        return set(value).union(*(item_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(item_keys(v) for v in value))
    return set()


async def test_full_session_never_leaks_answers(
    fresh_db_url: str, backend: str, request: pytest.FixtureRequest
) -> None:
    started = time.monotonic()
    key, model_id = await seed(fresh_db_url)
    seeded = time.monotonic()
    redis_url = request.getfixturevalue("redis_server").url if backend == "postgres" else None
    async with running_api(test_settings(fresh_db_url, redis_url)) as (_, client):
        headers = await login(client, key)
        session = await open_session(client, headers, model_id)  # the default size
        assert session["n_items"] == N_ITEMS
        sid = session["id"]
        sample = await allocated(fresh_db_url, sid)
        assert len(sample) == N_ITEMS
        secrets = {
            text
            for row in sample
            for text in (row.answer, row.explanation)
            if text and len(text) >= MIN_SECRET_LENGTH
        }
        assert all(row.explanation in secrets for row in sample)

        scanned = 0
        hits: list[tuple[str, str]] = []

        def scan(what: str, response: httpx.Response) -> None:
            nonlocal scanned
            scanned += 1
            hay = response.text + "\n" + "\n".join(f"{k}: {v}" for k, v in response.headers.items())
            hits.extend((what, secret) for secret in secrets if secret in hay)

        positions: list[int] = []
        delivered: list[str] = []
        while True:
            got = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
            scan("next", got)
            if got.status_code == 204:
                break
            assert got.status_code == 200, got.text
            item = got.json()
            assert set(item) <= ITEM_FIELDS, item
            assert not item_keys(item) & {"answer", "explanation"}, item
            assert not SECRET_KEY.search(got.text), got.text
            positions.append(item["position"])
            delivered.append(item["item_id"])
            body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
            posted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
            scan("answer", posted)
            assert posted.status_code == 201, posted.text
            state = await client.get(f"/v1/sessions/{sid}", headers=headers)
            scan("session", state)
            assert state.status_code == 200, state.text
            assert len(positions) < N_ITEMS + 1, "more items delivered than allocated"

        final = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()

    assert not hits, f"{len(hits)} leaks, e.g. {hits[:5]}"
    assert positions == list(range(N_ITEMS))
    assert delivered == [str(row.item_id) for row in sample]
    assert [row.position for row in sample] == list(range(N_ITEMS))
    assert all(row.family_id == row.item_family for row in sample)
    assert len({row.family_id for row in sample}) == N_ITEMS
    # The scoring worker runs beside the test and may already have scored the session.
    assert final["state"] in {"answered", "scored"}
    assert (final["completed"], final["pending"], final["allocated"]) == (N_ITEMS, 0, 0)
    print(
        f"\nno-leak [{backend}]: {scanned} responses scanned for {len(secrets)} secrets of "
        f"{N_ITEMS} items; seed {seeded - started:.1f} s, "
        f"session {time.monotonic() - seeded:.1f} s"
    )
