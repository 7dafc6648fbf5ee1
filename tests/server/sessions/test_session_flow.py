"""A session taken from first item to last over HTTP, and the order and answer rules."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI

from tests.support.api import World, evaluator_session, login, open_session


async def test_full_session_in_order(api: tuple[httpx.AsyncClient, World, FastAPI]) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    evaluator = await login(client, world.a.keys["evaluator"])
    session = await open_session(client, evaluator, world.a.model_id, n_items=12)
    assert session["state"] == "created" and session["n_items"] == 12
    sid = session["id"]
    positions = []
    while True:
        got = await client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
        if got.status_code == 204:
            break
        assert got.status_code == 200, got.text
        item = got.json()
        assert set(item) <= {"position", "item_id", "question", "options", "qtype", "discipline"}
        again = await client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
        assert again.json() == item  # a retry gets the same pending item
        positions.append(item["position"])
        body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
        posted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=evaluator)
        assert posted.status_code == 201, posted.text
        second = await client.post(
            f"/v1/sessions/{sid}/answers", json={**body, "answer": "B"}, headers=evaluator
        )
        assert second.status_code == 409
        assert second.headers["content-type"] == "application/problem+json"
    assert positions == list(range(12))
    state = (await client.get(f"/v1/sessions/{sid}", headers=vendor)).json()
    # The scoring worker runs beside the test and may already have scored the session.
    assert state["state"] in {"answered", "scored"}
    assert (state["completed"], state["pending"], state["allocated"]) == (12, 0, 0)


async def test_answer_for_another_item_is_refused(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    headers, sid = await evaluator_session(client, world.a, n_items=3)
    early = {"position": 0, "item_id": str(uuid.uuid4()), "answer": "A"}
    refused = await client.post(f"/v1/sessions/{sid}/answers", json=early, headers=headers)
    assert refused.status_code == 409 and "call next first" in refused.json()["detail"]
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
    wrong = {"position": item["position"], "item_id": str(uuid.uuid4()), "answer": "A"}
    assert (
        await client.post(f"/v1/sessions/{sid}/answers", json=wrong, headers=headers)
    ).status_code == 409
    skip = {"position": 1, "item_id": item["item_id"], "answer": "A"}
    assert (
        await client.post(f"/v1/sessions/{sid}/answers", json=skip, headers=headers)
    ).status_code == 409
    malformed = await client.post(
        f"/v1/sessions/{sid}/answers", json={"position": "x"}, headers=headers
    )
    assert malformed.status_code == 422
    assert {tuple(e["loc"]) for e in malformed.json()["errors"]} >= {("body", "position")}
