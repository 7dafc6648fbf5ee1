"""A run the server drives scores as the same sessions driven by ``proctor run``: two
models on the same stand-in model (whose reply to a question is a fixed function of the
model and the question), each covering the whole of a small bank in three sessions (so both
answer the same items once), one driven by the server, one by ``proctor run``; their
leaderboard rows (S, per-discipline scores, answers counted) are equal, on the embedded
default and on PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from tests.clients.test_sdk_harness import serving
from tests.support.api import World, seed_world, test_settings
from tests.support.cli import proctor
from tests.support.fake_llm import FakeLlm, running_fake_llm

SESSIONS, ITEMS = 3, 4
STAND_IN = "model-mid"  # right on some items, wrong on others: S is neither 0 nor 100


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    """12 multiple-choice items (2 disciplines of 6, no variants): three sessions of four
    cover the bank, and every verdict is objective (no judge in the way)."""
    world = await seed_world(
        fresh_db_url,
        per_cell=6,
        augment=False,
        qtypes=("multiple_choice",),
        disciplines=2,
        subdisciplines=1,
    )
    return fresh_db_url, world


@pytest.fixture
async def served(world_db: tuple[str, World]) -> AsyncIterator[tuple[str, World, FakeLlm]]:
    db_url, world = world_db
    key = await AnswerKey.load_database(db_url)
    settings = test_settings(
        db_url, egress_allow=["127.0.0.1"], runs_in_process=True, run_poll_s=0.2
    )
    with running_fake_llm(ServerConfig(answer_key=key)) as llm, serving(settings) as url:
        yield url, world, llm


def bearer(http: httpx.Client, key: str) -> dict[str, str]:
    token = http.post("/v1/auth/token", json={"api_key": key}).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def wait_scored(http: httpx.Client, headers: dict[str, str], model_id: str) -> list[str]:
    """The model's session ids once all ``SESSIONS`` are scored (within 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        listed = http.get("/v1/sessions", headers=headers).json()
        scored = [s["id"] for s in listed if s["model_id"] == model_id and s["state"] == "scored"]
        if len(scored) == SESSIONS:
            return scored
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)


def row_of(board: dict[str, Any], model_id: str) -> dict[str, Any]:
    (row,) = [r for r in board["models"] if r["model_id"] == model_id]
    return dict(row)


def test_a_run_scores_as_the_same_sessions_driven_by_proctor_run(
    served: tuple[str, World, FakeLlm],
) -> None:
    url, world, llm = served
    by_run, by_cli = str(world.a.model_id), str(world.b.model_id)
    with httpx.Client(base_url=url, timeout=30) as http:
        evaluator = bearer(http, world.a.keys["evaluator"])
        endpoint = {"base_url": llm.base_url, "model": STAND_IN}
        put = http.put(f"/v1/models/{by_run}/endpoint", json=endpoint, headers=evaluator)
        assert put.status_code == 200, put.text
        body = {"model_id": by_run, "sessions": SESSIONS, "n_items": ITEMS}
        started = http.post("/v1/runs", json=body, headers=evaluator)
        assert started.status_code == 201, started.text

        cli = proctor(
            "run", "--server", url, "--api-key", world.b.keys["evaluator"], "--model-id", by_cli,
            "--endpoint", llm.base_url, "--model", STAND_IN, "--sessions", str(SESSIONS),
            "--n-items", str(ITEMS), "--concurrency", "3",
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr[-3000:]
        assert json.loads(cli.stdout)["finished"] == SESSIONS

        admin = bearer(http, world.a.keys["admin"])
        for model_id in (by_run, by_cli):
            wait_scored(http, admin, model_id)
        run = http.get(f"/v1/runs/{started.json()['id']}", headers=evaluator).json()
        assert (run["state"], run["items_done"]) == ("finished", SESSIONS * ITEMS)
        board = http.get("/v1/leaderboard", headers=admin).json()
    driven, ran = row_of(board, by_run), row_of(board, by_cli)
    assert driven["sessions"] == ran["sessions"] == SESSIONS
    # S of the whole bank: the mean of three equal sessions, however the bank was split
    assert 0 < driven["absolute"]["mean"] < 100
    assert driven["absolute"]["mean"] == pytest.approx(ran["absolute"]["mean"], abs=1e-9)
    assert driven["disciplines"] == ran["disciplines"]  # pooled over the same items
    assert sum(d["items"] for d in driven["disciplines"].values()) == SESSIONS * ITEMS
    assert llm.stats()["requests"] == 2 * SESSIONS * ITEMS  # each item asked once per model
