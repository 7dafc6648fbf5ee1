"""Organisation B cannot see or touch organisation A's sessions and models, and a token
scoped to one session cannot be used on another.

A refused request answers 404 (or 403) and its body names nothing of A that the caller did
not send itself: the problem body echoes the request path (``instance``) and the id asked
for (``detail``), so the id in the URL is excluded from the leak check; everything else of
A (its organisation id, model id and name, other session ids, the pending item's id and
question) must be absent.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.auth.permissions import PLATFORM_ROLES
from server.auth.service import create_api_key
from server.database import create_engine, unit_of_work
from server.errors import InvalidInput
from tests.support.api import ORG_ROLES, World, evaluator_session, login, open_session

REFUSED = (403, 404)


def leaks(response: httpx.Response, secrets: dict[str, str], sent: str = "") -> list[str]:
    """Which of ``secrets`` (name → value) the body contains, ignoring values in ``sent``."""
    text = response.text
    return [name for name, value in secrets.items() if value not in sent and value in text]


async def test_org_b_cannot_reach_org_a(api: tuple[httpx.AsyncClient, World, FastAPI]) -> None:
    client, world, _ = api
    assert world.a.model_id is not None and world.b.model_id is not None
    a_eval = await login(client, world.a.keys["evaluator"])
    a_admin = await login(client, world.a.keys["admin"])
    session = await open_session(client, a_eval, world.a.model_id, n_items=3)
    sid = session["id"]
    other = (await open_session(client, a_eval, world.a.model_id, n_items=3))["id"]
    pending = await client.get(f"/v1/sessions/{sid}/next", headers=a_eval)
    assert pending.status_code == 200
    item = pending.json()
    model_name = (await client.get(f"/v1/models/{world.a.model_id}", headers=a_admin)).json()[
        "name"
    ]
    secrets = {
        "A org id": str(world.a.id),
        "A model id": str(world.a.model_id),
        "A model name": model_name,
        "A session id": sid,
        "A other session id": other,
        "A item id": item["item_id"],
        "A question": item["question"],
    }

    b_org = str(world.b.id)
    assert set(world.b.keys) == set(ORG_ROLES)
    for role in ORG_ROLES:
        b = await login(client, world.b.keys[role])
        answer = {"position": item["position"], "item_id": item["item_id"], "answer": "B"}
        attempts: list[tuple[str, str, Any]] = [
            ("GET", f"/v1/sessions/{sid}", None),
            ("GET", f"/v1/sessions/{sid}/next", None),
            ("POST", f"/v1/sessions/{sid}/answers", answer),
            ("GET", f"/v1/sessions/{sid}/scoring", None),
            ("POST", f"/v1/sessions/{sid}/abort", None),
            ("POST", f"/v1/admin/sessions/{sid}/abort", None),
            ("GET", f"/v1/models/{world.a.model_id}", None),
            ("POST", "/v1/sessions", {"model_id": str(world.a.model_id)}),
        ]
        if role == "evaluator":
            attempts.append(
                ("POST", "/v1/sessions", {"model_id": str(world.a.model_id), "n_items": 3})
            )
        for method, url, body in attempts:
            response = await client.request(method, url, json=body, headers=b)
            where = f"{method} {url} as B {role}"
            assert response.status_code in REFUSED, (where, response.status_code, response.text)
            sent = url + (str(body) if body else "")
            assert leaks(response, secrets, sent) == [], (where, response.text)
            assert item["question"] not in response.text

        models = await client.get("/v1/models", headers=b)
        assert models.status_code == 200
        assert models.json(), "B sees its own model"
        assert {m["org_id"] for m in models.json()} == {b_org}
        assert leaks(models, secrets) == []
        sessions = await client.get("/v1/sessions", headers=b)
        assert sessions.status_code == 200
        assert all(s["org_id"] == b_org for s in sessions.json())
        assert leaks(sessions, secrets) == []

    # A's session was left exactly as it was: same pending item, A can still answer it
    state = (await client.get(f"/v1/sessions/{sid}", headers=a_eval)).json()
    assert (state["state"], state["pending"], state["completed"]) == ("active", 1, 0)
    again = await client.get(f"/v1/sessions/{sid}/next", headers=a_eval)
    assert again.json() == item
    body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
    posted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=a_eval)
    assert posted.status_code == 201, posted.text
    a_sessions = (await client.get("/v1/sessions", headers=a_eval)).json()
    assert {s["org_id"] for s in a_sessions} == {str(world.a.id)}


async def test_org_b_cannot_have_a_platform_role_key(world_db: tuple[str, World]) -> None:
    """Admin and auditor act on every organisation, so B (not the operator) gets neither."""
    db_url, world = world_db
    engine = create_engine(db_url)
    try:
        for role in sorted(PLATFORM_ROLES):
            with pytest.raises(InvalidInput, match="the operator organisation is 'org-a'"):
                async with unit_of_work(engine) as db:
                    await create_api_key(db, org_id=world.b.id, role=role)
    finally:
        await engine.dispose()


async def test_session_scoped_token_is_confined_to_its_session(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    assert world.a.model_id is not None
    a_eval, own = await evaluator_session(client, world.a, n_items=3)
    other = (await open_session(client, a_eval, world.a.model_id, n_items=3))["id"]
    scoped = await login(client, world.a.keys["evaluator"], session_id=own)

    assert (await client.get(f"/v1/sessions/{own}", headers=scoped)).status_code == 200
    for method, url in [
        ("GET", f"/v1/sessions/{other}"),
        ("GET", f"/v1/sessions/{other}/next"),
        ("POST", f"/v1/sessions/{other}/answers"),
        ("GET", "/v1/sessions"),
        ("GET", f"/v1/models/{world.a.model_id}"),
    ]:
        body = (
            {"position": 0, "item_id": str(uuid.uuid4()), "answer": "A"}
            if method == "POST"
            else None
        )
        response = await client.request(method, url, json=body, headers=scoped)
        assert response.status_code == 403, (method, url, response.text)
    # nothing happened to the other session
    state = (await client.get(f"/v1/sessions/{other}", headers=a_eval)).json()
    assert (state["state"], state["pending"]) == ("created", 0)
    # the scoped token still drives its own session
    assert (await client.get(f"/v1/sessions/{own}/next", headers=scoped)).status_code == 200


async def test_org_b_cannot_scope_a_token_to_org_a_session(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    _, sid = await evaluator_session(client, world.a, n_items=3)
    response = await client.post(
        "/v1/auth/token", json={"api_key": world.b.keys["evaluator"], "session_id": sid}
    )
    assert response.status_code == 404
    assert "access_token" not in response.text
    assert str(world.a.id) not in response.text
