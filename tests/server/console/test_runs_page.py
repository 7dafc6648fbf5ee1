"""The console's runs: "Evaluate" on a model's page starts a run the server drives (on the
real fake LLM server), the Runs page lists it with its progress and ends showing it
finished; pause, resume and cancel from the page; auditors see runs without the forms;
another organisation's runs are not listed; a refused start names its reason."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from fakellm.app import ServerConfig
from tests.support.api import World, running_api, test_settings
from tests.support.console import console_login, csrf_token
from tests.support.fake_llm import FakeLlm, running_fake_llm

ITEMS = 2
RUN_ROW = re.compile(r'<tr data-run="([0-9a-f-]{36})">')


@pytest.fixture
async def client(
    world_db: tuple[str, World],
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FakeLlm]]:
    db_url, world = world_db
    settings = test_settings(
        db_url,
        egress_allow=["127.0.0.1"],
        default_session_items=ITEMS,
        runs_in_process=True,
        run_poll_s=0.2,
    )
    with running_fake_llm(ServerConfig()) as llm:
        async with running_api(settings) as (_, http):
            yield http, world, llm


async def as_role(http: httpx.AsyncClient, world: World, role: str, path: str) -> str:
    http.cookies.clear()
    assert (await console_login(http, world.a.keys[role])).status_code == 303
    return csrf_token((await http.get(path)).text)


async def test_evaluate_starts_a_run_that_the_runs_page_follows_to_its_end(
    client: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    http, world, llm = client
    model_page = f"/console/models/{world.a.model_id}"
    token = await as_role(http, world, "evaluator", model_page)
    assert "Evaluate" not in (await http.get(model_page)).text  # no endpoint yet
    endpoint = {"csrf_token": token, "base_url": llm.base_url, "model": "model-strong"}
    assert (await http.post(model_page + "/endpoint", data=endpoint)).status_code == 303
    form = {"csrf_token": token, "sessions": "2", "n_items": str(ITEMS)}
    started = await http.post(model_page + "/runs", data=form)
    assert started.status_code == 303, started.text
    listed = await http.get(started.headers["location"])
    assert "Run started" in listed.text
    (run_id,) = RUN_ROW.findall(listed.text)
    deadline = time.monotonic() + 60
    while 'data-field="state">finished<' not in (page := await http.get("/console/runs")).text:
        assert time.monotonic() < deadline, page.text[-2000:]
        await asyncio.sleep(0.2)
    row = page.text.split(f'<tr data-run="{run_id}">', 1)[1].split("</tr>", 1)[0]
    assert f"{2 * ITEMS} / {2 * ITEMS}" in row
    assert "data-refresh" not in page.text  # nothing live left to follow
    assert run_id[:8] in (await http.get(model_page)).text  # the model's runs

    await as_role(http, world, "auditor", "/console/runs")
    seen = await http.get("/console/runs")
    assert run_id in seen.text and 'action="/console/runs/' not in seen.text
    http.cookies.clear()
    assert (await console_login(http, world.b.keys["evaluator"])).status_code == 303
    assert run_id not in (await http.get("/console/runs")).text


async def test_pause_resume_cancel_and_a_refused_start(
    client: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    http, world, _ = client
    model_page = f"/console/models/{world.a.model_id}"
    token = await as_role(http, world, "admin", model_page)
    # an endpoint nothing answers quickly: the run stays live while the page acts on it
    with running_fake_llm(ServerConfig(latency_ms=400)) as slow:
        endpoint = {"csrf_token": token, "base_url": slow.base_url, "model": "model-strong"}
        assert (await http.post(model_page + "/endpoint", data=endpoint)).status_code == 303
        capped = {"csrf_token": token, "sessions": "1", "cost_cap": "5"}
        refused = await http.post(model_page + "/runs", data=capped)
        assert refused.status_code == 422 and "price" in refused.text
        bad = await http.post(model_page + "/runs", data={"csrf_token": token, "sessions": "x"})
        assert bad.status_code == 422 and "sessions: " in bad.text
        started = await http.post(model_page + "/runs", data={"csrf_token": token, "n_items": "6"})
        assert started.status_code == 303
        (run_id,) = RUN_ROW.findall((await http.get("/console/runs")).text)
        moves = (
            ("pause", {"paused"}),
            ("resume", {"queued", "running"}),
            ("cancel", {"cancelled"}),
        )
        for action, states in moves:
            moved = await http.post(f"/console/runs/{run_id}/{action}", data={"csrf_token": token})
            assert moved.status_code == 303, (action, moved.text)
            page = (await http.get("/console/runs")).text
            assert any(f'data-field="state">{state}<' in page for state in states), action
        again = await http.post(f"/console/runs/{run_id}/resume", data={"csrf_token": token})
        assert again.status_code == 409


def sse_messages(lines: list[str]) -> list[dict[str, str]]:
    """The data of each message of a stream's lines, in order."""
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


async def test_a_run_s_page_follows_it_live_to_its_end(
    client: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    http, world, _ = client
    model_page = f"/console/models/{world.a.model_id}"
    token = await as_role(http, world, "evaluator", model_page)
    with running_fake_llm(ServerConfig(latency_ms=300)) as slow:  # the run outlives a tick
        endpoint = {"csrf_token": token, "base_url": slow.base_url, "model": "model-strong"}
        assert (await http.post(model_page + "/endpoint", data=endpoint)).status_code == 303
        form = {"csrf_token": token, "sessions": "2", "n_items": "3"}
        assert (await http.post(model_page + "/runs", data=form)).status_code == 303
        (run_id,) = RUN_ROW.findall((await http.get("/console/runs")).text)
        shown = await http.get(f"/console/runs/{run_id}")
        assert shown.status_code == 200
        assert f'data-live="/console/runs/{run_id}/events"' in shown.text
        assert 'data-field="s1.done"' in shown.text and "/pause" in shown.text
        async with http.stream("GET", f"/console/runs/{run_id}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in asyncio_timeout_lines(response)]
    assert "event: end" in lines
    messages = sse_messages(lines)
    first, last = messages[0], {k: v for m in messages for k, v in m.items()}
    assert {"state", "items", "pace", "eta", "tokens", "cost", "failures", "s0.done"} <= set(first)
    assert not any("point" in key or "correct" in key for key in first)  # counts only
    assert len(messages) >= 2  # it moved while the stream was open
    assert last["state"] == "finished" and last["items"] == "6 / 6"
    assert last["s0.done"] == last["s1.done"] == "3 / 3"
    ended = await http.get(f"/console/runs/{run_id}")
    assert "data-live=" not in ended.text and 'data-field="state">finished<' in ended.text

    await as_role(http, world, "auditor", "/console/runs")
    audited = await http.get(f"/console/runs/{run_id}")
    assert audited.status_code == 200 and 'action="/console/runs/' not in audited.text
    http.cookies.clear()
    assert (await console_login(http, world.b.keys["evaluator"])).status_code == 303
    for path in (f"/console/runs/{run_id}", f"/console/runs/{run_id}/events"):
        assert (await http.get(path)).status_code == 404, path


async def asyncio_timeout_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The response's lines, failing if the stream stays open past a minute."""
    async with asyncio.timeout(60):
        async for line in response.aiter_lines():
            yield line
