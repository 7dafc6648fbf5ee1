"""On PostgreSQL a delivering ``next`` and an accepted answer each take one statement of
the request's transaction (``server.sessions.single_statement``); the SQLite path and every
refusal go the general way (the session tests cover those on both backends)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text

from server.database import unit_of_work
from tests.support.api import World, evaluator_session

Api = tuple[httpx.AsyncClient, World, FastAPI]


@contextmanager
def statements_of(app: FastAPI) -> Iterator[list[str]]:
    """The SQL statements the app's engine runs meanwhile (transaction control aside)."""
    seen: list[str] = []
    engine = app.state.runtime.engine.sync_engine

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def of_the_request(statements: list[str]) -> list[str]:
    """Leave out the audit writer's inserts (its own transaction, batched)."""
    return [s for s in statements if "audit_log" not in s]


@pytest.mark.parametrize("backend", ["postgres"])  # the single statements are PostgreSQL's
async def test_a_delivery_and_an_answer_take_one_statement_each(api: Api, backend: str) -> None:
    client, world, app = api
    headers, sid = await evaluator_session(client, world.a, n_items=3)
    assert (await client.get("/v1/whoami", headers=headers)).status_code == 200  # token known
    with statements_of(app) as seen:
        item = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
    assert item.status_code == 200, item.text
    assert len(of_the_request(seen)) == 1, seen
    body = {"position": 0, "item_id": item.json()["item_id"], "answer": "A"}
    with statements_of(app) as seen:
        accepted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
    assert accepted.status_code == 201, accepted.text
    outbox = [s for s in of_the_request(seen) if "scoring_jobs" in s]
    assert len(of_the_request(seen)) - len(outbox) == 1, seen
    async with unit_of_work(app.state.runtime.engine) as db:
        row = (
            await db.execute(
                text(
                    "SELECT s.state, s.n_delivered, s.n_completed, a.delivered_at IS NOT NULL,"
                    " e.delivered_at IS NOT NULL FROM eval_sessions s"
                    " JOIN answers a ON a.session_id = s.id AND a.position = 0"
                    " JOIN sample_items si ON si.sample_id = s.sample_id AND si.position = 0"
                    " JOIN exposures e ON e.org_id = s.org_id AND e.family_id = si.family_id"
                    " WHERE s.id = :sid"
                ),
                {"sid": sid},
            )
        ).one()
    assert tuple(row) == ("active", 1, 1, True, True)
    # the same answer again is refused by the general path, the first one stands
    again = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
    assert again.status_code == 409


async def test_the_last_answer_ends_the_session(api: Api) -> None:
    client, world, _ = api
    headers, sid = await evaluator_session(client, world.a, n_items=2)
    for position in range(2):
        item = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
        assert item.status_code == 200 and item.json()["position"] == position, item.text
        body = {"position": position, "item_id": item.json()["item_id"], "answer": "B"}
        accepted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
        assert accepted.status_code == 201, accepted.text
    assert (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).status_code == 204
    session = await client.get(f"/v1/sessions/{sid}", headers=headers)
    assert session.json()["state"] in {"answered", "scored", "scoring"}
    assert session.json()["ended_at"] is not None
