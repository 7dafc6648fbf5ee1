"""Access rules over HTTP: rate limits, session-scoped tokens, revocation, bad keys, roles."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import httpx
import jwt
import pytest
from fastapi import FastAPI

from tests.support.api import (
    World,
    evaluator_session,
    login,
    open_session,
    running_api,
    unique_address,
)
from tests.support.api import test_settings as make_settings
from tests.support.services import RedisServer

Api = tuple[httpx.AsyncClient, World, FastAPI]


def assert_problem(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == status


def token_of(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def claims_of(headers: dict[str, str]) -> dict[str, object]:
    result: dict[str, object] = jwt.decode(token_of(headers), options={"verify_signature": False})
    return result


async def away_from_window_edge(window_s: int = 60, margin_s: float = 5.0) -> None:
    """Wait for the next fixed window if the current one ends within ``margin_s``, so a
    short run of requests is counted in one window."""
    remaining = window_s - time.time() % window_s
    if remaining < margin_s:
        await asyncio.sleep(remaining + 0.2)


# --------------------------------------------------------------------------- #
# Rate limits
# --------------------------------------------------------------------------- #


async def test_rate_limit_per_api_key(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    redis_url = None
    if backend == "postgres":  # shared Redis counters, as in production
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    settings = make_settings(db_url, redis_url, rate_limit_per_minute=5)
    async with running_api(settings, address=unique_address()) as (_, client):
        await away_from_window_edge()
        headers = await login(client, world.a.keys["vendor"])
        for _ in range(5):
            ok = await client.get("/v1/whoami", headers=headers)
            assert ok.status_code == 200, ok.text
        limited = await client.get("/v1/whoami", headers=headers)
        assert_problem(limited, 429)
        retry_after = int(limited.headers["Retry-After"])
        assert 1 <= retry_after <= 60
        # other routes count against the same key
        assert_problem(await client.get("/v1/models", headers=headers), 429)
        # the limit is per API key: a fresh token of the same key is limited too ...
        fresh = await login(client, world.a.keys["vendor"])
        assert_problem(await client.get("/v1/whoami", headers=fresh), 429)
        # ... while another key of the organisation has its own count
        other = await login(client, world.a.keys["evaluator"])
        assert (await client.get("/v1/whoami", headers=other)).status_code == 200


async def test_rate_limit_on_key_exchange(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    """Key exchanges per client address are limited to a tenth of the rate (at least 10)."""
    db_url, world = world_db
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    settings = make_settings(db_url, redis_url, rate_limit_per_minute=5)
    async with running_api(settings, address=unique_address()) as (_, client):
        await away_from_window_edge()
        statuses = []
        for _ in range(11):
            response = await client.post("/v1/auth/token", json={"api_key": world.a.keys["vendor"]})
            statuses.append(response.status_code)
            if response.status_code == 429:
                assert_problem(response, 429)
                assert 1 <= int(response.headers["Retry-After"]) <= 60
                break
        assert statuses == [200] * 10 + [429], statuses


# --------------------------------------------------------------------------- #
# Session-scoped tokens
# --------------------------------------------------------------------------- #


async def test_session_scoped_token(api: Api) -> None:
    client, world, _ = api
    evaluator, mine = await evaluator_session(client, world.a, n_items=3)
    other = (await open_session(client, evaluator, world.a.model_id, n_items=3))["id"]
    scoped = await login(client, world.a.keys["evaluator"], session_id=mine)
    assert claims_of(scoped)["sid"] == mine

    # its own session: read, take an item, answer
    read = await client.get(f"/v1/sessions/{mine}", headers=scoped)
    assert read.status_code == 200, read.text
    item = await client.get(f"/v1/sessions/{mine}/next", headers=scoped)
    assert item.status_code == 200, item.text
    body = {"position": item.json()["position"], "item_id": item.json()["item_id"], "answer": "A"}
    answered = await client.post(f"/v1/sessions/{mine}/answers", json=body, headers=scoped)
    assert answered.status_code == 201, answered.text

    # another session of the same organisation, and routes of no session
    for method, path in [
        ("GET", f"/v1/sessions/{other}"),
        ("GET", f"/v1/sessions/{other}/next"),
        ("POST", f"/v1/sessions/{other}/answers"),
        ("GET", "/v1/models"),
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
    ]:
        json_body = None
        if method == "POST":
            json_body = body if "answers" in path else {"model_id": str(world.a.model_id)}
        response = await client.request(method, path, headers=scoped, json=json_body)
        assert_problem(response, 403)

    # the other session was not touched by the refused requests
    state = (await client.get(f"/v1/sessions/{other}", headers=evaluator)).json()
    assert (state["pending"], state["completed"]) == (0, 0)


async def test_session_scoped_token_for_another_org_is_not_issued(api: Api) -> None:
    client, world, _ = api
    _, sid = await evaluator_session(client, world.b, n_items=3)
    for session_id in (sid, str(uuid.uuid4())):
        response = await client.post(
            "/v1/auth/token",
            json={"api_key": world.a.keys["evaluator"], "session_id": session_id},
        )
        assert_problem(response, 404)


# --------------------------------------------------------------------------- #
# Keys and revocation
# --------------------------------------------------------------------------- #


async def test_token_of_a_revoked_key_is_refused(api: Api) -> None:
    client, world, _ = api
    admin = await login(client, world.a.keys["admin"])
    vendor = await login(client, world.a.keys["vendor"])
    other_vendor = await login(client, world.b.keys["vendor"])
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 200
    key_id = claims_of(vendor)["sub"]
    revoked = await client.post("/v1/admin/tokens/revoke", json={"key_id": key_id}, headers=admin)
    assert revoked.status_code == 200, revoked.text
    assert_problem(await client.get("/v1/whoami", headers=vendor), 401)
    assert_problem(await client.get("/v1/models", headers=vendor), 401)
    # the key itself can no longer be exchanged
    exchange = await client.post("/v1/auth/token", json={"api_key": world.a.keys["vendor"]})
    assert_problem(exchange, 401)
    # other keys are unaffected
    assert (await client.get("/v1/whoami", headers=other_vendor)).status_code == 200


async def test_revoked_token_is_refused_and_others_of_its_key_are_not(api: Api) -> None:
    client, world, _ = api
    admin = await login(client, world.a.keys["admin"])
    first = await login(client, world.a.keys["vendor"])
    second = await login(client, world.a.keys["vendor"])
    revoked = await client.post(
        "/v1/admin/tokens/revoke", json={"jti": claims_of(first)["jti"]}, headers=admin
    )
    assert revoked.json() == {"revoked": True}
    again = await client.post(
        "/v1/admin/tokens/revoke", json={"jti": claims_of(first)["jti"]}, headers=admin
    )
    assert again.json() == {"revoked": False}
    assert_problem(await client.get("/v1/whoami", headers=first), 401)
    assert (await client.get("/v1/whoami", headers=second)).status_code == 200


async def test_only_admins_may_revoke(api: Api) -> None:
    client, world, _ = api
    target = await login(client, world.a.keys["vendor"])
    for role in ("evaluator", "vendor", "auditor"):
        headers = await login(client, world.a.keys[role])
        response = await client.post(
            "/v1/admin/tokens/revoke", json={"jti": claims_of(target)["jti"]}, headers=headers
        )
        assert_problem(response, 403)
    assert (await client.get("/v1/whoami", headers=target)).status_code == 200


@pytest.mark.parametrize(
    "bad_key",
    [
        pytest.param(
            lambda key: key[:-1] + ("A" if key[-1] != "A" else "B"), id="last-char-changed"
        ),
        pytest.param(lambda key: key[:-1], id="truncated"),
        pytest.param(
            lambda key: key.upper() if key != key.upper() else key.lower(), id="case-changed"
        ),
        pytest.param(lambda key: "pk_" + "0" * 40, id="made-up"),
        pytest.param(lambda key: "x", id="one-character"),
    ],
)
async def test_bad_api_key_is_refused(api: Api, bad_key: Callable[[str], str]) -> None:
    client, world, _ = api
    key = bad_key(world.a.keys["admin"])
    response = await client.post("/v1/auth/token", json={"api_key": key})
    assert_problem(response, 401)
    assert response.headers.get("www-authenticate") == "Bearer"
    assert len(key) < 8 or key not in response.text  # the key is never echoed back


# --------------------------------------------------------------------------- #
# Roles
# --------------------------------------------------------------------------- #


async def test_auditor_may_not_open_or_drive_sessions(api: Api) -> None:
    client, world, _ = api
    auditor = await login(client, world.a.keys["auditor"])
    evaluator = await login(client, world.a.keys["evaluator"])
    created = await client.post(
        "/v1/sessions", json={"model_id": str(world.a.model_id)}, headers=auditor
    )
    assert_problem(created, 403)
    sid = (await open_session(client, evaluator, world.a.model_id, n_items=3))["id"]
    assert_problem(await client.get(f"/v1/sessions/{sid}/next", headers=auditor), 403)
    answer = {"position": 0, "item_id": str(uuid.uuid4()), "answer": "A"}
    posted = await client.post(f"/v1/sessions/{sid}/answers", json=answer, headers=auditor)
    assert_problem(posted, 403)
    # but may read it, and the refused /next delivered nothing
    state = await client.get(f"/v1/sessions/{sid}", headers=auditor)
    assert state.status_code == 200, state.text
    assert state.json()["pending"] == 0


async def test_vendor_may_not_choose_n_items_but_evaluator_may(api: Api) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    evaluator = await login(client, world.a.keys["evaluator"])
    refused = await client.post(
        "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 5}, headers=vendor
    )
    assert_problem(refused, 403)
    allowed = await client.post(
        "/v1/sessions", json={"model_id": str(world.a.model_id), "n_items": 5}, headers=evaluator
    )
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["n_items"] == 5
    # the refused request opened nothing
    listed = (await client.get("/v1/sessions", headers=vendor)).json()
    assert [s["id"] for s in listed] == [allowed.json()["id"]]


async def test_whoami_reports_each_role(api: Api) -> None:
    client, world, _ = api
    for org in (world.a, world.b):
        for role, key in org.keys.items():
            response = await client.get("/v1/whoami", headers=await login(client, key))
            assert response.status_code == 200, response.text
            assert (response.json()["role"], response.json()["org_id"]) == (role, str(org.id))
