"""The console's sessions pages over HTTP against the running app: the list's filters and
pages, organisations kept apart, the live stream (updated counts after an answer, ``end``
after an abort or a logout, verdict figures withheld from evaluators), aborting and
revoking tokens from a form (admins only, CSRF checked), hostile names escaped."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.api.runtime import Runtime
from server.console import live
from server.console.dependencies import COOKIE
from server.console.pages import sessions as page
from tests.support.api import World, login, open_session
from tests.support.console import console_login, csrf_token

Api = tuple[httpx.AsyncClient, World, FastAPI]
HOSTILE = "<script>alert(1)</script>\"'"
ROW = re.compile(r'href="/console/sessions/([0-9a-f-]{36})"')


async def console_as(client: httpx.AsyncClient, key: str) -> str:
    """Log ``client`` in to the console with ``key`` (after logging out of the cookie jar);
    returns the login's cookie secret."""
    client.cookies.clear()
    assert (await console_login(client, key)).status_code == 303
    secret = client.cookies.get(COOKIE)
    assert secret
    return secret


def listed(html: str) -> list[str]:
    return ROW.findall(html)


async def answer_next(client: httpx.AsyncClient, headers: dict[str, str], sid: str) -> None:
    """Take the next item of session ``sid`` and answer it, through the JSON API."""
    item = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
    assert item.status_code == 200, item.text
    body = {"position": item.json()["position"], "item_id": item.json()["item_id"], "answer": "A"}
    posted = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)
    assert posted.status_code == 201, posted.text


async def api_abort(client: httpx.AsyncClient, world: World, sid: str) -> None:
    admin = await login(client, world.a.keys["admin"])
    aborted = await client.post(f"/v1/admin/sessions/{sid}/abort", headers=admin)
    assert aborted.status_code == 200, aborted.text


async def never() -> bool:
    return False


def events_of(app: FastAPI, secret: str, sid: str) -> AsyncIterator[str]:
    runtime: Runtime = app.state.runtime
    return page.session_events(
        runtime, secret=secret, session_id=uuid.UUID(sid), disconnected=never
    )


async def next_message(events: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(events), timeout=20)


def data_of(chunk: str) -> dict[str, Any]:
    assert chunk.startswith("data: ") and chunk.endswith("\n\n"), chunk
    found: dict[str, Any] = json.loads(chunk.removeprefix("data: "))
    return found


async def follow(events: AsyncIterator[str], *, until: tuple[str, Any]) -> dict[str, Any]:
    """The figures of ``events`` merged, message after message, until ``until`` holds."""
    name, value = until
    seen: dict[str, Any] = {}
    while seen.get(name) != value:
        chunk = await next_message(events)
        if chunk.startswith("data: "):
            seen.update(data_of(chunk))
    return seen


@pytest.fixture(autouse=True)
def quick_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "TICK_S", 0.02)


async def test_list_filters_and_pages(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    client, world, _ = api
    assert world.a.model_id and world.b.model_id
    a_eval = await login(client, world.a.keys["evaluator"])
    b_eval = await login(client, world.b.keys["evaluator"])
    a_ids = [(await open_session(client, a_eval, world.a.model_id, n_items=2))["id"] for _ in "123"]
    b_ids = [(await open_session(client, b_eval, world.b.model_id, n_items=2))["id"] for _ in "12"]
    await api_abort(client, world, a_ids[0])
    await console_as(client, world.a.keys["auditor"])

    everything = await client.get("/console/sessions")
    assert everything.status_code == 200
    assert listed(everything.text) == [*b_ids[::-1], *a_ids[::-1]]  # newest first
    assert "org-a" in everything.text and "org-b" in everything.text

    async def ids(**params: str) -> list[str]:
        response = await client.get("/console/sessions", params=params)
        assert response.status_code == 200, response.text
        return listed(response.text)

    assert await ids(state="aborted") == [a_ids[0]]
    assert set(await ids(state="created")) == {*a_ids[1:], *b_ids}
    assert set(await ids(org=str(world.b.id))) == set(b_ids)
    assert set(await ids(model=str(world.a.model_id))) == set(a_ids)
    assert set(await ids(mode="fixed", org=str(world.a.id), state="created")) == set(a_ids[1:])
    assert await ids(mode="adaptive") == []
    today = datetime.now(UTC).date()
    assert len(await ids(created_from=today.isoformat(), created_until=today.isoformat())) == 5
    assert await ids(created_from=(today + timedelta(days=1)).isoformat()) == []
    assert await ids(created_until=(today - timedelta(days=1)).isoformat()) == []
    assert len(await ids(created_from="0001-01-01", created_until="9999-12-31")) == 5

    bad = await client.get("/console/sessions", params={"state": "nope", "created_from": HOSTILE})
    assert bad.status_code == 422
    assert "Check these filters: state, created from" in bad.text
    assert "<script>alert(1)" not in bad.text and "&lt;script&gt;" in bad.text
    assert listed(bad.text) == []

    monkeypatch.setattr(page, "PER_PAGE", 2)
    first = await client.get("/console/sessions")
    assert listed(first.text) == b_ids[::-1] and 'rel="next"' in first.text
    third = await client.get("/console/sessions", params={"page": "3"})
    assert listed(third.text) == [a_ids[0]] and 'rel="next"' not in third.text
    filtered = await client.get("/console/sessions", params={"org": str(world.a.id), "page": "2"})
    assert listed(filtered.text) == [a_ids[0]] and "org=" in filtered.text  # links keep filters


async def test_an_evaluator_sees_its_own_organisation_only(api: Api) -> None:
    client, world, _ = api
    assert world.a.model_id and world.b.model_id
    a_sid = (
        await open_session(
            client, await login(client, world.a.keys["evaluator"]), world.a.model_id, n_items=2
        )
    )["id"]
    b_headers = await login(client, world.b.keys["evaluator"])
    b_sid = (await open_session(client, b_headers, world.b.model_id, n_items=2))["id"]
    await answer_next(client, b_headers, b_sid)
    await console_as(client, world.b.keys["evaluator"])

    assert listed((await client.get("/console/sessions")).text) == [b_sid]
    other_org = await client.get("/console/sessions", params={"org": str(world.a.id)})
    assert listed(other_org.text) == [b_sid]  # the organisation filter is not theirs to use
    assert 'name="org"' not in other_org.text
    for path in (f"/console/sessions/{a_sid}", f"/console/sessions/{a_sid}/events"):
        assert (await client.get(path)).status_code == 404
    own = await client.get(f"/console/sessions/{b_sid}")
    assert own.status_code == 200
    assert f'data-live="/console/sessions/{b_sid}/events"' in own.text
    assert 'data-field="points">—<' in own.text  # verdict figures wait for the score
    assert 'data-field="n_completed">1<' in own.text
    assert "/abort" not in own.text and "/revoke-tokens" not in own.text


async def test_the_stream_follows_answers_and_hides_verdict_figures(api: Api) -> None:
    client, world, app = api
    assert world.a.model_id
    headers = await login(client, world.a.keys["evaluator"])
    sid = (await open_session(client, headers, world.a.model_id, n_items=3))["id"]
    admin = events_of(app, await console_as(client, world.a.keys["admin"]), sid)
    evaluator = events_of(app, await console_as(client, world.a.keys["evaluator"]), sid)
    try:
        first = data_of(await next_message(admin))
        assert (first["state"], first["n_completed"], first["percent"]) == ("created", 0, 0)
        assert first["points"] == 0  # admins see live points
        assert data_of(await next_message(evaluator))["points"] == "—"

        await answer_next(client, headers, sid)
        seen = await follow(admin, until=("n_completed", 1))
        assert seen["state"] == "active" and seen["answers"] == 1 and seen["percent"] == 33
        later = await follow(evaluator, until=("n_completed", 1))
        assert later.get("points", "—") == "—"  # no message gives an evaluator live points
    finally:
        await admin.aclose()  # type: ignore[attr-defined]
        await evaluator.aclose()  # type: ignore[attr-defined]


async def test_the_stream_ends_after_an_abort_and_after_a_logout(api: Api) -> None:
    client, world, app = api
    assert world.a.model_id
    headers = await login(client, world.a.keys["evaluator"])
    sid = (await open_session(client, headers, world.a.model_id, n_items=2))["id"]
    secret = await console_as(client, world.a.keys["admin"])
    events = events_of(app, secret, sid)
    assert data_of(await next_message(events))["state"] == "created"
    await api_abort(client, world, sid)
    assert data_of(await next_message(events))["state"] == "aborted"
    assert await next_message(events) == live.END
    with pytest.raises(StopAsyncIteration):
        await next_message(events)

    # a real stream of an ended session: its figures, then "end"
    async with client.stream("GET", f"/console/sessions/{sid}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in response.aiter_lines()]
    assert lines[0].startswith("data: ") and json.loads(lines[0][6:])["state"] == "aborted"
    assert "event: end" in lines

    other = (await open_session(client, headers, world.a.model_id, n_items=2))["id"]
    events = events_of(app, secret, other)
    assert data_of(await next_message(events))["state"] == "created"
    token = csrf_token((await client.get(f"/console/sessions/{other}")).text)
    assert (await client.post("/console/logout", data={"csrf_token": token})).status_code == 303
    assert await next_message(events) == live.END  # the login has ended: so has the stream


async def test_abort_from_the_form(api: Api) -> None:
    client, world, _ = api
    assert world.a.model_id
    headers = await login(client, world.a.keys["evaluator"])
    sid = (await open_session(client, headers, world.a.model_id, n_items=2))["id"]
    url = f"/console/sessions/{sid}/abort"

    await console_as(client, world.a.keys["auditor"])
    seen = await client.get(f"/console/sessions/{sid}")
    assert seen.status_code == 200 and url not in seen.text and "revoke-tokens" not in seen.text
    refused = await client.post(url, data={"csrf_token": csrf_token(seen.text)})
    assert refused.status_code == 403

    await console_as(client, world.a.keys["admin"])
    shown = await client.get(f"/console/sessions/{sid}")
    assert url in shown.text and "data-confirm=" in shown.text
    assert (await client.post(url, data={})).status_code == 403
    assert (await client.post(url, data={"csrf_token": "wrong"})).status_code == 403
    state = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()["state"]
    assert state == "created"

    done = await client.post(url, data={"csrf_token": csrf_token(shown.text)})
    assert done.status_code == 303
    assert done.headers["location"] == f"/console/sessions/{sid}?notice=aborted"
    assert (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()["state"] == "aborted"
    after = await client.get(done.headers["location"])
    assert "Session aborted" in after.text and url not in after.text
    assert "data-live=" not in after.text  # nothing moves any more
    again = await client.post(url, data={"csrf_token": csrf_token(shown.text)})
    assert again.status_code == 409 and "is aborted" in again.text


async def test_revoke_the_tokens_that_drove_a_session(api: Api) -> None:
    client, world, _ = api
    assert world.a.model_id
    opener = await login(client, world.a.keys["evaluator"])
    sid = (await open_session(client, opener, world.a.model_id, n_items=3))["id"]
    driver = await login(client, world.a.keys["evaluator"], session_id=sid)
    await answer_next(client, driver, sid)
    url = f"/console/sessions/{sid}/revoke-tokens"

    await console_as(client, world.a.keys["auditor"])
    token = csrf_token((await client.get(f"/console/sessions/{sid}")).text)
    assert (await client.post(url, data={"csrf_token": token})).status_code == 403
    await console_as(client, world.a.keys["admin"])
    token = csrf_token((await client.get(f"/console/sessions/{sid}")).text)
    assert (await client.post(url, data={})).status_code == 403
    assert (await client.get("/v1/whoami", headers=driver)).status_code == 200

    done = await client.post(url, data={"csrf_token": token})
    assert done.status_code == 303 and done.headers["location"].endswith("notice=tokens-revoked")
    assert (await client.get("/v1/whoami", headers=driver)).status_code == 401
    assert (await client.get("/v1/whoami", headers=opener)).status_code == 200  # never drove it
    # a fresh token drives on: the revoked one's lease holds nothing
    await answer_next(client, await login(client, world.a.keys["evaluator"]), sid)

    idle = (await open_session(client, opener, world.a.model_id, n_items=2))["id"]
    none = await client.post(f"/console/sessions/{idle}/revoke-tokens", data={"csrf_token": token})
    assert none.headers["location"].endswith("notice=no-tokens")
    assert "nothing was revoked" in (await client.get(none.headers["location"])).text


async def test_hostile_model_names_are_escaped(api: Api) -> None:
    client, world, _ = api
    headers = await login(client, world.a.keys["evaluator"])
    registered = await client.post(
        "/v1/models", json={"name": HOSTILE, "api_snapshot": HOSTILE}, headers=headers
    )
    assert registered.status_code == 201, registered.text
    sid = (await open_session(client, headers, registered.json()["id"], n_items=2))["id"]
    await console_as(client, world.a.keys["admin"])
    for path in ("/console/sessions", f"/console/sessions/{sid}"):
        html = (await client.get(path)).text
        assert "<script>alert(1)" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;" in html


async def test_an_adaptive_session_shows_its_estimate_to_platform_roles_only(api: Api) -> None:
    client, world, app = api
    headers = await login(client, world.a.keys["evaluator"])
    body = {"model_id": str(world.a.model_id), "n_items": 12, "mode": "adaptive"}
    opened = await client.post("/v1/sessions", json=body, headers=headers)
    assert opened.status_code == 201, opened.text
    sid = opened.json()["id"]
    await answer_next(client, headers, sid)
    await console_as(client, world.a.keys["auditor"])
    audited = await client.get(f"/console/sessions/{sid}")
    assert audited.status_code == 200 and "Adaptive estimate" in audited.text
    assert 'data-field="n_scored">—<' not in audited.text  # live for platform roles
    await console_as(client, world.a.keys["evaluator"])
    own = await client.get(f"/console/sessions/{sid}")
    assert own.status_code == 200 and "Adaptive estimate" in own.text
    for field in ("estimate", "halfwidth", "n_scored", "checks", "stop_reason"):
        assert f'data-field="{field}">—<' in own.text
    events = events_of(app, client.cookies[COOKIE], sid)
    first = data_of(await next_message(events))
    await events.aclose()  # type: ignore[attr-defined]
    assert {first[f] for f in ("estimate", "halfwidth", "n_scored", "points")} == {"—"}
