"""Runs the server drives, end to end on the embedded default and on PostgreSQL (in
process here; ``proctor run-worker`` processes in the worker tests): a model's endpoint
on the real fake LLM server, a run started over the API, driven to its end through the
app's own API, its progress as each role sees it, pause, resume, cancel and the cost cap."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fakellm.app import ServerConfig
from tests.support.api import World, login, running_api, test_settings
from tests.support.fake_llm import FakeLlm, running_fake_llm

N_ITEMS = 3
KEY = "sk-run-provider-7f3a09d1"


@pytest.fixture
def llm() -> AsyncIterator[FakeLlm]:
    with running_fake_llm(ServerConfig(api_key=KEY)) as served:
        yield served


@pytest.fixture
async def api(
    world_db: tuple[str, World], llm: FakeLlm
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FakeLlm]]:
    db_url, world = world_db
    settings = test_settings(
        db_url,
        egress_allow=["127.0.0.1"],
        default_session_items=N_ITEMS,
        run_poll_s=0.2,
        run_lease_s=5,
        runs_in_process=True,
    )
    async with running_api(settings) as (_, client):
        yield client, world, llm


async def set_endpoint(
    client: httpx.AsyncClient, world: World, llm: FakeLlm, headers: dict[str, str], **extra: Any
) -> None:
    body = {
        "base_url": llm.base_url,
        "model": "model-strong",
        "secret_headers": {"Authorization": f"Bearer {KEY}"},
        **extra,
    }
    put = await client.put(f"/v1/models/{world.a.model_id}/endpoint", json=body, headers=headers)
    assert put.status_code == 200, put.text


async def wait_for(
    client: httpx.AsyncClient, run_id: str, headers: dict[str, str], states: set[str]
) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        run = (await client.get(f"/v1/runs/{run_id}", headers=headers)).json()
        if run["state"] in states:
            return dict(run)
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.1)


async def test_a_run_drives_its_sessions_to_the_end(
    api: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    client, world, llm = api
    vendor = await login(client, world.a.keys["vendor"])
    await set_endpoint(client, world, llm, vendor, usd_per_mtok_in=1.0, usd_per_mtok_out=2.0)
    started = await client.post(
        "/v1/runs", json={"model_id": str(world.a.model_id), "sessions": 2}, headers=vendor
    )
    assert started.status_code == 201, started.text
    assert started.json()["state"] in ("queued", "running")
    run = await wait_for(client, started.json()["id"], vendor, {"finished", "failed"})
    assert run["state"] == "finished", run
    assert (run["items_done"], run["items_total"]) == (2 * N_ITEMS, 2 * N_ITEMS)
    assert run["prompt_tokens"] > 0 and run["completion_tokens"] > 0 and run["cost_usd"] > 0
    assert len({p["session_id"] for p in run["progress"]}) == 2
    assert all(p["done"] == p["total"] == N_ITEMS for p in run["progress"])
    assert llm.stats()["requests"] == 2 * N_ITEMS  # each item asked once
    for progress in run["progress"]:
        session = await client.get(f"/v1/sessions/{progress['session_id']}", headers=vendor)
        assert session.json()["state"] in ("answered", "scored")
    listed = (await client.get("/v1/runs", headers=vendor)).json()
    assert [r["id"] for r in listed] == [run["id"]]
    other = await login(client, world.b.keys["vendor"])
    assert (await client.get(f"/v1/runs/{run['id']}", headers=other)).status_code == 404
    assert (await client.get("/v1/runs", headers=other)).json() == []


async def test_a_run_needs_an_endpoint_and_the_rules_of_sessions(
    api: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    client, world, llm = api
    vendor = await login(client, world.a.keys["vendor"])
    body = {"model_id": str(world.a.model_id), "sessions": 1}
    assert (await client.post("/v1/runs", json=body, headers=vendor)).status_code == 404
    await set_endpoint(client, world, llm, vendor)
    sized = await client.post("/v1/runs", json={**body, "n_items": 2}, headers=vendor)
    assert sized.status_code == 403  # vendors take the server's session size
    adaptive = await client.post("/v1/runs", json={**body, "mode": "adaptive"}, headers=vendor)
    assert adaptive.status_code == 403
    capped = await client.post("/v1/runs", json={**body, "cost_cap_usd": 1.0}, headers=vendor)
    assert capped.status_code == 422 and "price" in capped.text


async def test_the_cost_cap_stops_the_run_before_it_is_passed(
    api: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    client, world, llm = api
    evaluator = await login(client, world.a.keys["evaluator"])
    await set_endpoint(
        client, world, llm, evaluator, max_tokens=64, usd_per_mtok_in=100.0, usd_per_mtok_out=100.0
    )
    # a call may cost up to (prompt bytes + overhead + 64) tokens at 100 USD per million
    cap = 0.2
    started = await client.post(
        "/v1/runs",
        json={"model_id": str(world.a.model_id), "sessions": 3, "n_items": 5, "cost_cap_usd": cap},
        headers=evaluator,
    )
    assert started.status_code == 201, started.text
    run = await wait_for(client, started.json()["id"], evaluator, {"finished", "failed"})
    assert run["state"] == "finished" and run["stop_reason"] == "cost cap reached", run
    assert 0 < run["cost_usd"] <= cap
    assert run["items_done"] < 15
    for progress in run["progress"]:
        if progress["session_id"] is not None:
            state = progress["state"]
            assert state in ("aborted", "answered", "scored"), run  # none left open


async def test_pause_resume_and_cancel(api: tuple[httpx.AsyncClient, World, FakeLlm]) -> None:
    client, world, _ = api
    evaluator = await login(client, world.a.keys["evaluator"])
    # slow enough that no run ends before it is paused
    with running_fake_llm(ServerConfig(api_key=KEY, latency_ms=150)) as slow:
        await set_endpoint(client, world, slow, evaluator)
        await pause_resume_and_cancel(client, world, evaluator)


async def pause_resume_and_cancel(
    client: httpx.AsyncClient, world: World, evaluator: dict[str, str]
) -> None:
    body = {"model_id": str(world.a.model_id), "sessions": 1, "n_items": 4}
    run = (await client.post("/v1/runs", json=body, headers=evaluator)).json()
    paused = await client.post(f"/v1/runs/{run['id']}/pause", headers=evaluator)
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert (await client.post(f"/v1/runs/{run['id']}/pause", headers=evaluator)).status_code == 409
    await asyncio.sleep(1.0)
    done_while_paused = (await client.get(f"/v1/runs/{run['id']}", headers=evaluator)).json()
    assert done_while_paused["state"] == "paused"
    resumed = await client.post(f"/v1/runs/{run['id']}/resume", headers=evaluator)
    assert resumed.status_code == 200 and resumed.json()["state"] == "queued"
    finished = await wait_for(client, run["id"], evaluator, {"finished", "failed"})
    assert finished["state"] == "finished" and finished["items_done"] == 4

    second = (await client.post("/v1/runs", json=body, headers=evaluator)).json()
    cancelled = await client.post(f"/v1/runs/{second['id']}/cancel", headers=evaluator)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = await client.post(f"/v1/runs/{second['id']}/resume", headers=evaluator)
    assert again.status_code == 409
    await asyncio.sleep(1.0)
    after = (await client.get(f"/v1/runs/{second['id']}", headers=evaluator)).json()
    assert after["state"] == "cancelled"
    assert all(p["state"] in (None, "aborted") for p in after["progress"]), after


async def test_every_run_and_endpoint_change_is_audited_under_its_key(
    api: tuple[httpx.AsyncClient, World, FakeLlm],
) -> None:
    client, world, llm = api
    evaluator = await login(client, world.a.keys["evaluator"])
    await set_endpoint(client, world, llm, evaluator)
    body = {"model_id": str(world.a.model_id), "n_items": 2}
    run = (await client.post("/v1/runs", json=body, headers=evaluator)).json()
    await client.post(f"/v1/runs/{run['id']}/pause", headers=evaluator)
    await client.post(f"/v1/runs/{run['id']}/cancel", headers=evaluator)
    admin = await login(client, world.a.keys["admin"])
    wanted = {
        ("PUT", "/v1/models/{model_id}/endpoint"),
        ("POST", "/v1/runs"),
        ("POST", "/v1/runs/{run_id}/pause"),
        ("POST", "/v1/runs/{run_id}/cancel"),
    }
    deadline = time.monotonic() + 10
    while True:
        rows = (await client.get("/v1/admin/audit?limit=1000", headers=admin)).json()
        seen = {(r["method"], r["route"]): r for r in rows if (r["method"], r["route"]) in wanted}
        if seen.keys() == wanted or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert seen.keys() == wanted
    subjects = {row["subject"] for row in seen.values()}
    assert len(subjects) == 1 and None not in subjects  # the evaluator's key


async def test_a_run_resumes_when_the_server_starts_again(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    settings = test_settings(
        db_url, egress_allow=["127.0.0.1"], runs_in_process=True, run_poll_s=0.2, run_lease_s=5
    )
    with running_fake_llm(ServerConfig(api_key=KEY, latency_ms=100)) as slow:
        async with running_api(settings) as (_, client):
            evaluator = await login(client, world.a.keys["evaluator"])
            await set_endpoint(client, world, slow, evaluator)
            body = {"model_id": str(world.a.model_id), "sessions": 2, "n_items": 6}
            run = (await client.post("/v1/runs", json=body, headers=evaluator)).json()
            await wait_for(client, run["id"], evaluator, {"running"})
            await asyncio.sleep(0.5)
        # the server stopped mid-run; its slots were given back as it stopped
        async with running_api(settings) as (_, client):
            evaluator = await login(client, world.a.keys["evaluator"])
            done = await wait_for(client, run["id"], evaluator, {"finished", "failed"})
        asked = slow.stats()["requests"]
    assert (done["state"], done["items_done"]) == ("finished", 12), done
    assert 12 <= asked <= 12 + 2  # at most the two calls in flight at the stop, again
