"""A planted endpoint key goes in once and is found nowhere after: not in any response
(the endpoint's own routes, the model list, the audit log, the metrics, a check against a
model that echoes it back), not in a log line, not in any stored row (read raw, as a dump
reads it)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from server.database import unit_of_work
from server.models import metadata
from tests.server.observability.scrape import METRICS_TOKEN, bearer
from tests.support.api import World, login, running_api, test_settings
from tests.support.http_target import Target

PLANTED = "sk-LEAKCHECK-0b5e9f3a61d2c7"


@pytest.fixture
async def app_calling_localhost(
    world_db: tuple[str, World],
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FastAPI]]:
    db_url, world = world_db
    settings = test_settings(db_url, egress_allow=["127.0.0.1"], metrics_token=METRICS_TOKEN)
    async with running_api(settings) as (app, client):
        yield client, world, app


async def stored_text(app: FastAPI) -> str:
    """Every row of every table, as stored (sealed columns unopened): what a dump holds."""
    dumped: list[str] = []
    async with unit_of_work(app.state.runtime.engine) as db:
        for table in metadata.sorted_tables:
            rows = (await db.execute(text(f'SELECT * FROM "{table.name}"'))).all()
            dumped += [repr(tuple(row)) for row in rows]
    return "\n".join(dumped)


async def test_a_planted_key_is_in_no_response_log_or_stored_row(
    app_calling_localhost: tuple[httpx.AsyncClient, World, FastAPI],
    target: Target,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    client, world, app = app_calling_localhost
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {PLANTED}"}}).encode()
    target.reply = (
        f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(echo)}\r\nConnection: close\r\n\r\n"
    ).encode() + echo
    vendor = await login(client, world.a.keys["vendor"])
    admin = await login(client, world.a.keys["admin"])
    auditor = await login(client, world.a.keys["auditor"])
    url = f"/v1/models/{world.a.model_id}/endpoint"
    body = {
        "base_url": f"http://127.0.0.1:{target.port}/v1",
        "model": "echo",
        "secret_headers": {"Authorization": f"Bearer {PLANTED}", "X-Org": PLANTED[::-1]},
    }
    responses = [await client.put(url, json=body, headers=vendor)]
    assert responses[0].status_code == 200, responses[0].text
    responses += [await client.get(url, headers=who) for who in (vendor, admin, auditor)]
    responses.append(await client.post(url + "/check", headers=vendor))
    assert responses[-1].json()["failure"] == "rejected"
    assert target.connections >= 1  # the key really went out, to the model
    responses += [
        await client.get("/v1/models", headers=admin),
        await client.get("/v1/admin/audit", headers=admin),
        await client.get("/metrics", headers=bearer(METRICS_TOKEN)),
    ]
    # a refused change that repeats the key in a bad header value
    bad = {**body, "secret_headers": {"X-Key": PLANTED + "\n"}}
    responses.append(await client.put(url, json=bad, headers=vendor))
    assert responses[-1].status_code == 422
    assert all(r.status_code < 500 for r in responses)
    seen = {
        "responses": "\n".join(r.text + repr(r.headers) for r in responses),
        "logs": caplog.text + "".join(capsys.readouterr()),
        "stored rows": await stored_text(app),
    }
    for secret in (PLANTED, PLANTED[::-1]):
        leaked = [where for where, what in seen.items() if secret in what]
        where = [r.request.url.path for r in responses if secret in r.text + repr(r.headers)]
        assert leaked == [], f"the planted key is in the {leaked} ({where})"
