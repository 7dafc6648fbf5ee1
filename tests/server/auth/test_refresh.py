"""``POST /v1/auth/refresh``: a client renews its token mid-session without losing the lease."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.support.api import World, evaluator_session, login


async def test_a_renewed_token_keeps_driving_its_session_and_the_old_one_dies(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    _, sid = await evaluator_session(client, world.a, n_items=3)
    old = await login(client, world.a.keys["vendor"], sid)
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=old)).json()

    renewed = await client.post("/v1/auth/refresh", headers=old)
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["expires_in"] > 0
    new = {"Authorization": f"Bearer {renewed.json()['access_token']}"}

    # the lease moved: the new token continues at once with the same pending item
    again = await client.get(f"/v1/sessions/{sid}/next", headers=new)
    assert again.status_code == 200 and again.json() == item
    body = {"position": item["position"], "item_id": item["item_id"], "answer": "x"}
    assert (
        await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=new)
    ).status_code == 201
    # the scope is kept (still this session only) and the old token is revoked
    who = (await client.get("/v1/whoami", headers=new)).json()
    assert who["session_id"] == sid and who["role"] == "vendor"
    assert (await client.get("/v1/whoami", headers=old)).status_code == 401
    assert (await client.post("/v1/auth/refresh", headers=old)).status_code == 401
    # another token of the same key still has to wait for the lease
    other = await login(client, world.a.keys["vendor"], sid)
    refused = await client.get(f"/v1/sessions/{sid}/next", headers=other)
    assert refused.status_code == 403 and "session in use" in refused.json()["detail"]


async def test_a_lost_refresh_response_does_not_lock_the_client_out_of_its_session(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    _, sid = await evaluator_session(client, world.a, n_items=3)
    old = await login(client, world.a.keys["vendor"])
    item = (await client.get(f"/v1/sessions/{sid}/next", headers=old)).json()
    # the refresh happens on the server, but its response never reaches the client ...
    assert (await client.post("/v1/auth/refresh", headers=old)).status_code == 200
    # ... which exchanges its key again: the revoked token's lease does not hold it back
    fresh = await login(client, world.a.keys["vendor"])
    again = await client.get(f"/v1/sessions/{sid}/next", headers=fresh)
    assert again.status_code == 200 and again.json() == item
    # while a live lease still excludes every other token
    other = await login(client, world.a.keys["vendor"])
    refused = await client.get(f"/v1/sessions/{sid}/next", headers=other)
    assert refused.status_code == 403
