"""An adaptive session end to end through the runner: the local model server answers, the
local judge server scores the open items, and the server picks each next item from the
scores so far until its stopping rule fires."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from clients.llm.chat import ChatClient, ChatEndpoint, RetryPolicy
from clients.runner.runner import RunConfig, Runner
from clients.runner.transcript import Transcript, read_lines
from clients.sdk import AsyncProctorClient
from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from fakellm.profiles import BUILTIN_PROFILES
from server.database import create_engine, unit_of_work
from server.sessions.models import AdaptiveRun
from tests.support.api import World, running_api, seed_world, test_settings
from tests.support.fake_llm import running_fake_llm
from tests.support.sessions import table_counts, wait_until

MODEL_LATENCY_MS = 60.0


@pytest.fixture
async def world(fresh_db_url: str) -> tuple[str, World]:
    return fresh_db_url, await seed_world(fresh_db_url, per_cell=15)


@pytest.mark.parametrize("policy", ["neyman", "model-assisted"])
async def test_the_runner_drives_an_adaptive_session_until_its_rule_stops_it(
    world: tuple[str, World], tmp_path: Path, policy: str
) -> None:
    db_url, w = world
    assert w.a.model_id is not None
    # The model is slower than scoring, as real models are: the server picks each next item
    # from what is scored so far, so a model answering faster than the judge scores would
    # run to the budget before a check sees enough scores.
    slow = replace(BUILTIN_PROFILES["model-strong"], latency_ms=MODEL_LATENCY_MS)
    key = ServerConfig(
        answer_key=await AnswerKey.load_database(db_url),
        profiles={**BUILTIN_PROFILES, slow.name: slow},
    )
    with running_fake_llm(key) as llm:
        settings = test_settings(
            db_url,
            judges=[{"name": "judge-v1", "base_url": llm.base_url, "model": "judge"}],
            scoring_in_process=True,
            scoring_poll_s=0.2,
        )
        async with running_api(settings) as (app, _):
            transport = httpx.ASGITransport(app=app)
            async with (
                AsyncProctorClient(
                    "http://proctor.test", w.a.keys["evaluator"], transport=transport
                ) as client,
                ChatClient(
                    ChatEndpoint(base_url=llm.base_url, model="model-strong"),
                    retry=RetryPolicy(max_attempts=2, base_delay_s=0.01),
                ) as model,
            ):
                config = RunConfig(
                    model_id=str(w.a.model_id),
                    sessions=1,
                    n_items=100,
                    mode="adaptive",
                    adaptive={"policy": policy, "bound": "normal", "target_halfwidth": 14},
                )
                with Transcript(tmp_path / "t.jsonl") as transcript:
                    summary = await Runner(client, model, config, transcript).run()
                (outcome,) = summary.outcomes
                assert outcome.error is None, outcome.error

                async def scored() -> bool:
                    counts = await table_counts(db_url, uuid.UUID(outcome.session_id))
                    return bool(counts["state"] == "scored")

                await wait_until(scored, within_s=90, what="the adaptive session scored")
                session = await client.get_session(outcome.session_id)
    assert session.mode == "adaptive" and session.adaptive is not None
    assert session.adaptive["policy"] == policy
    assert session.adaptive["stop_reason"] == "precise"
    n = session.n_items
    assert n < 100 and session.completed == n == outcome.answered
    assert session.adaptive["n_scored"] == n
    assert 0 <= session.adaptive["estimate"] <= 100
    # The rule stopped at a check whose half-width was on target; answers delivered before
    # that check are scored after it, so the final half-width (over every score) may differ.
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            run = await db.get(AdaptiveRun, uuid.UUID(outcome.session_id))
    finally:
        await engine.dispose()
    assert run is not None and run.halfwidth is not None and run.halfwidth * 100 <= 14
    assert session.adaptive["halfwidth"] is not None
    items = [line for line in read_lines(tmp_path / "t.jsonl") if line["event"] == "item"]
    assert [line["position"] for line in items] == list(range(n))
