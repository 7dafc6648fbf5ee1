"""``/v1/models/{id}/endpoint``: who may set and read it, what a body may hold, secrets that
go in and never come out (sealed at rest), and the check call through the egress guard to
a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from bank.resealing import sealed_columns
from bank.sealing import PREFIX
from server.database import unit_of_work
from server.models import metadata
from tests.support.api import World, login, running_api, test_settings
from tests.support.http_target import Target

PLANTED = "sk-PLANTED-7d41c0ffee9a2b"
"""A key that must never come back out of the server."""


def endpoint_body(base_url: str = "https://models.example.com/v1", **extra: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": "served-model", **extra}


def completion_reply(content: str = "OK") -> bytes:
    body = json.dumps(
        {
            "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 1},
        }
    ).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


@pytest.fixture
async def open_egress(
    world_db: tuple[str, World],
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FastAPI]]:
    """The app with the egress guard allowing 127.0.0.1 (as an operator would allow a
    host of their own)."""
    db_url, world = world_db
    settings = test_settings(db_url, egress_allow=["127.0.0.1"])
    async with running_api(settings) as (app, client):
        yield client, world, app


def url_of(world: World, org: str = "a") -> str:
    return f"/v1/models/{getattr(world, org).model_id}/endpoint"


async def test_a_vendor_sets_its_models_endpoint_and_reads_back_no_secret(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    body = endpoint_body(
        secret_headers={"Authorization": f"Bearer {PLANTED}"},
        paradigm="cot",
        stop=["###"],
        usd_per_mtok_in=1.5,
        usd_per_mtok_out=6.0,
    )
    put = await client.put(url_of(world), json=body, headers=vendor)
    assert put.status_code == 200, put.text
    got = await client.get(url_of(world), headers=vendor)
    for response in (put, got):
        assert PLANTED not in response.text
        shown = response.json()
        assert shown["secret_headers"] == ["Authorization"]
        assert (shown["paradigm"], shown["stop"], shown["api"]) == ("cot", ["###"], "chat")
    model = await client.get(f"/v1/models/{world.a.model_id}", headers=vendor)
    assert (model.json()["usd_per_mtok_in"], model.json()["usd_per_mtok_out"]) == (1.5, 6.0)


async def test_secret_headers_are_kept_when_left_out_and_removed_by_an_empty_object(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    evaluator = await login(client, world.a.keys["evaluator"])
    first = endpoint_body(secret_headers={"X-Api-Key": PLANTED})
    assert (await client.put(url_of(world), json=first, headers=evaluator)).status_code == 200
    kept = await client.put(url_of(world), json=endpoint_body(model="other"), headers=evaluator)
    assert (kept.json()["model"], kept.json()["secret_headers"]) == ("other", ["X-Api-Key"])
    cleared = await client.put(
        url_of(world), json=endpoint_body(secret_headers={}), headers=evaluator
    )
    assert cleared.json()["secret_headers"] == []


async def test_another_organisations_model_has_no_endpoint_to_see_or_set(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    admin = await login(client, world.a.keys["admin"])
    assert (await client.put(url_of(world), json=endpoint_body(), headers=admin)).status_code == 200
    other = await login(client, world.b.keys["vendor"])
    for method in ("GET", "PUT", "DELETE"):
        sent = endpoint_body() if method == "PUT" else None
        response = await client.request(method, url_of(world), json=sent, headers=other)
        assert response.status_code == 404, (method, response.text)
    check = await client.post(url_of(world) + "/check", headers=other)
    assert check.status_code == 404
    # admins act on any organisation's model; the endpoint is still there after b's tries
    assert (await client.get(url_of(world), headers=admin)).status_code == 200


async def test_removing_the_endpoint_leaves_nothing_to_read(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    assert (await client.get(url_of(world), headers=vendor)).status_code == 404
    await client.put(url_of(world), json=endpoint_body(), headers=vendor)
    assert (await client.delete(url_of(world), headers=vendor)).status_code == 204
    gone = await client.get(url_of(world), headers=vendor)
    assert gone.status_code == 404
    assert gone.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"base_url": "ftp://models.example.com/v1"}, "http:// or https://"),
        ({"base_url": f"https://user:{PLANTED}@models.example.com/v1"}, "credentials"),
        ({"base_url": "https://models.example.com/v1?key=x"}, "query"),
        ({"base_url": "https://models.example.com:99999/v1"}, "port"),
        ({"base_url": "https:///v1"}, "no host"),
        ({"base_url": "https://modèles.example.com/v1"}, "ASCII"),
        # octal 127.0.0.1: httpx will not call it, so it is refused before it is stored
        ({"base_url": "http://0177.0.0.1/v1"}, "not a URL the server can call"),
        ({"secret_headers": {"Host": "evil.example"}}, "set by the server"),
        ({"secret_headers": {"Bad Name": "x"}}, "HTTP token"),
        ({"secret_headers": {"X-Key": PLANTED + "\r\nX-Injected: 1"}}, "line breaks"),
        ({"secret_headers": {"X-Key": "a", "x-key": "b"}}, "named twice"),
        ({"api": "completions"}, "needs a template"),
        ({"template": "chatml"}, "a template is for api 'completions'"),
        ({"adapter": "nonesuch"}, "unknown adapter"),
        ({"paradigm": "many-shot"}, "paradigm"),
        ({"concurrency": 0}, "concurrency"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ],
)
async def test_a_bad_body_is_refused_with_what_is_wrong_and_no_secret_echoed(
    api: tuple[httpx.AsyncClient, World, FastAPI], change: dict[str, Any], says: str
) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    response = await client.put(url_of(world), json={**endpoint_body(), **change}, headers=vendor)
    assert response.status_code == 422, response.text
    assert says in response.text
    assert PLANTED not in response.text
    assert (await client.get(url_of(world), headers=vendor)).status_code == 404  # nothing set


async def test_secret_headers_are_sealed_at_rest_under_the_bank_keyring(
    api: tuple[httpx.AsyncClient, World, FastAPI],
) -> None:
    client, world, app = api
    vendor = await login(client, world.a.keys["vendor"])
    body = endpoint_body(secret_headers={"X-Api-Key": PLANTED})
    assert (await client.put(url_of(world), json=body, headers=vendor)).status_code == 200
    async with unit_of_work(app.state.runtime.engine) as db:
        stored = await db.scalar(text("SELECT secret_headers FROM model_endpoints"))
    assert stored is not None and stored.startswith(PREFIX)
    assert PLANTED not in stored
    # the keyring's rotation (proctor bank reseal) finds the column by its type
    assert "model_endpoints.secret_headers" in {c.name for c in sealed_columns(metadata)}


async def test_the_check_calls_the_endpoint_with_its_secret_and_shows_the_reply(
    open_egress: tuple[httpx.AsyncClient, World, FastAPI], target: Target
) -> None:
    client, world, _ = open_egress
    target.reply = completion_reply("OK, here.")
    vendor = await login(client, world.a.keys["vendor"])
    body = endpoint_body(
        f"http://127.0.0.1:{target.port}/v1", secret_headers={"X-Api-Key": PLANTED}
    )
    await client.put(url_of(world), json=body, headers=vendor)
    check = await client.post(url_of(world) + "/check", headers=vendor)
    assert check.status_code == 200, check.text
    assert check.json()["ok"] is True, check.text
    assert check.json()["reply"] == "OK, here."
    (request,) = target.requests
    assert request.startswith(b"POST /v1/chat/completions ")
    lines = request.decode().split("\r\n")[1:]
    sent = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    assert sent["x-api-key"] == PLANTED


async def test_the_check_refuses_a_loopback_endpoint_by_default_and_sends_nothing(
    api: tuple[httpx.AsyncClient, World, FastAPI], target: Target
) -> None:
    client, world, _ = api
    vendor = await login(client, world.a.keys["vendor"])
    # decimal and hex forms of 127.0.0.1, IPv6 loopback and its IPv4-mapped form, a name
    for host in (
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "localhost",
    ):
        body = endpoint_body(f"http://{host}:{target.port}/v1")
        assert (await client.put(url_of(world), json=body, headers=vendor)).status_code == 200
        check = await client.post(url_of(world) + "/check", headers=vendor)
        assert check.status_code == 200, check.text
        outcome = check.json()
        assert (outcome["ok"], outcome["failure"]) == (False, "egress_refused"), (host, outcome)
    assert target.connections == 0


async def test_a_refusing_model_is_reported_with_its_echo_of_the_key_redacted(
    open_egress: tuple[httpx.AsyncClient, World, FastAPI], target: Target
) -> None:
    client, world, _ = open_egress
    echo = json.dumps({"error": {"message": f"invalid key {PLANTED}"}}).encode()
    target.reply = (
        f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(echo)}\r\nConnection: close\r\n\r\n"
    ).encode() + echo
    vendor = await login(client, world.a.keys["vendor"])
    body = endpoint_body(
        f"http://127.0.0.1:{target.port}/v1", secret_headers={"X-Api-Key": PLANTED}
    )
    await client.put(url_of(world), json=body, headers=vendor)
    check = await client.post(url_of(world) + "/check", headers=vendor)
    outcome = check.json()
    assert (outcome["ok"], outcome["failure"]) == (False, "rejected")
    assert "invalid key [redacted]" in outcome["detail"]
    assert PLANTED not in check.text
