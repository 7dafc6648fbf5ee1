"""The endpoint section of a model's console page over HTTP: an organisation's evaluator saves an
endpoint with a secret (sealed, never shown again, not even in a refused form), checks it
against a real HTTP server on 127.0.0.1 and removes it; auditors see it without the
form; another organisation's model is 404; hostile values are refused field by field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.api import World, running_api, test_settings
from tests.support.console import console_login, csrf_token
from tests.support.http_target import Target

SECRET = "sk-console-PLANTED-91ab7c"


@pytest.fixture
async def client(world_db: tuple[str, World]) -> AsyncIterator[tuple[httpx.AsyncClient, World]]:
    db_url, world = world_db
    async with running_api(test_settings(db_url, egress_allow=["127.0.0.1"])) as (_, client):
        yield client, world


def page_of(world: World, org: str = "a") -> str:
    return f"/console/models/{getattr(world, org).model_id}"


async def logged_in(client: httpx.AsyncClient, world: World, role: str) -> str:
    """Log in as org-a's ``role``; the CSRF token of the model's page."""
    client.cookies.clear()
    assert (await console_login(client, world.a.keys[role])).status_code == 303
    return csrf_token((await client.get(page_of(world))).text)


def ok_reply() -> bytes:
    body = json.dumps({"choices": [{"message": {"content": "OK"}, "finish_reason": "stop"}]})
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return f"{head}\r\nConnection: close\r\n\r\n{body}".encode()


async def test_an_endpoint_is_saved_checked_and_removed_without_showing_its_secret(
    client: tuple[httpx.AsyncClient, World], target: Target
) -> None:
    http, world = client
    token = await logged_in(http, world, "evaluator")
    assert "No endpoint" in (await http.get(page_of(world))).text
    form = {
        "csrf_token": token,
        "base_url": f"http://127.0.0.1:{target.port}/v1",
        "model": "served",
        "paradigm": "cot",
        "stop": "###\n\n</s>",
        "usd_per_mtok_in": "0.25",
        "secret_name": "X-Api-Key",
        "secret_value": SECRET,
    }
    saved = await http.post(page_of(world) + "/endpoint", data=form)
    assert saved.status_code == 303, saved.text
    shown = await http.get(saved.headers["location"])
    assert "Endpoint saved." in shown.text and "X-Api-Key" in shown.text
    assert f"127.0.0.1:{target.port}/v1" in shown.text and "###\n&lt;/s&gt;" in shown.text
    assert SECRET not in shown.text

    target.reply = ok_reply()
    checked = await http.post(page_of(world) + "/endpoint/check", data={"csrf_token": token})
    assert checked.status_code == 200 and "The endpoint answered" in checked.text
    assert f"X-Api-Key: {SECRET}" in target.requests[0].decode()
    assert SECRET not in checked.text

    removed = await http.post(page_of(world) + "/endpoint/delete", data={"csrf_token": token})
    assert removed.status_code == 303
    assert "No endpoint" in (await http.get(removed.headers["location"])).text


async def test_a_refused_form_names_each_field_and_never_shows_the_secret_back(
    client: tuple[httpx.AsyncClient, World],
) -> None:
    http, world = client
    token = await logged_in(http, world, "admin")
    bad = {
        "csrf_token": token,
        "base_url": "ftp://models.example.com/v1",
        "model": "m",
        "concurrency": "lots",
        "secret_value": SECRET,
    }
    refused = await http.post(page_of(world) + "/endpoint", data=bad)
    assert refused.status_code == 422
    assert "base_url: " in refused.text and "concurrency: " in refused.text
    assert 'value="ftp://models.example.com/v1"' in refused.text  # kept for correcting
    assert SECRET not in refused.text
    nul = await http.post(page_of(world) + "/endpoint", data={**bad, "model": "m\x00"})
    assert nul.status_code == 422 and "model: contains a NUL character" in nul.text
    # nothing was stored by either
    assert "No endpoint" in (await http.get(page_of(world))).text


async def test_readers_see_the_endpoint_without_the_form_and_others_see_nothing(
    client: tuple[httpx.AsyncClient, World],
) -> None:
    http, world = client
    token = await logged_in(http, world, "admin")
    form = {"csrf_token": token, "base_url": "https://api.example.com/v1", "model": "m-1"}
    assert (await http.post(page_of(world) + "/endpoint", data=form)).status_code == 303
    await logged_in(http, world, "auditor")
    seen = await http.get(page_of(world))
    assert "https://api.example.com/v1" in seen.text
    assert 'action="/console/models/' not in seen.text  # no form to save, check or remove
    http.cookies.clear()
    assert (await console_login(http, world.b.keys["evaluator"])).status_code == 303
    other = csrf_token((await http.get("/console/models")).text)
    assert (await http.get(page_of(world))).status_code == 404
    post = await http.post(page_of(world) + "/endpoint", data={**form, "csrf_token": other})
    assert post.status_code == 404
