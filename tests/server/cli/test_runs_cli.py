"""``proctor runs`` as a user runs it against the real app served over HTTP, which drives
the run in process against the fake LLM provider on 127.0.0.1: start and follow a run to
its end, list it, and the refusals of the server as one ``error:`` line."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.clients.test_sdk_harness import model_of, sdk_settings, seeded, serving
from tests.support.api import World
from tests.support.cli import Run, proctor
from tests.support.fake_llm import FakeLlm, running_fake_llm


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    return await seeded(fresh_db_url)


@pytest.fixture
def served(world_db: tuple[str, World]) -> Iterator[tuple[str, World, FakeLlm]]:
    db_url, world = world_db
    settings = sdk_settings(
        db_url, egress_allow=["127.0.0.1"], runs_in_process=True, run_poll_s=0.2
    )
    with running_fake_llm() as llm, serving(settings) as url:
        yield url, world, llm


def runs(url: str, world: World, *args: str, role: str = "evaluator") -> Run:
    run = proctor("runs", *args, "--server", url, "--api-key", world.a.keys[role])
    assert "Traceback" not in run.stderr
    return run


def test_a_run_is_started_followed_to_its_end_and_listed(
    served: tuple[str, World, FakeLlm],
) -> None:
    url, world, llm = served
    model = model_of(world)
    refused = runs(url, world, "start", model)
    assert refused.returncode == 1 and "404" in refused.stderr  # no endpoint yet
    endpoint = {"base_url": llm.base_url, "model": "model-strong"}
    key = world.a.keys["evaluator"]
    with httpx.Client(base_url=url) as http:
        token = http.post("/v1/auth/token", json={"api_key": key}).json()["access_token"]
        put = http.put(
            f"/v1/models/{model}/endpoint",
            json=endpoint,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert put.status_code == 200, put.text
    started = runs(
        url, world, "start", model, "--sessions", "2", "--n-items", "2", "--wait", "--json"
    )
    assert started.returncode == 0, started.stderr
    run = json.loads(started.stdout)
    assert (run["state"], run["items_done"], run["items_total"]) == ("finished", 4, 4)
    assert "finished: 4/4 items" in started.stderr  # the progress lines
    listed = runs(url, world, "list", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [run["id"]]
    shown = runs(url, world, "show", run["id"])
    assert shown.returncode == 0 and "finished (4/4 items)" in shown.stdout
    again = runs(url, world, "pause", run["id"])
    assert again.returncode == 1 and "409" in again.stderr
    vendor_sized = runs(url, world, "start", model, "--n-items", "2", role="vendor")
    assert vendor_sized.returncode == 1 and "403" in vendor_sized.stderr
