"""The runner in process against the real API and the local model server: every paradigm,
a raw-completion endpoint behind a chat template, a reasoning model, and a model that
fails mid-session (the session stays resumable)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.llm.chat import ChatClient, ChatEndpoint, RetryPolicy
from clients.runner.adapters import get_adapter
from clients.runner.runner import RunConfig, Runner
from clients.runner.transcript import Transcript, read_lines
from clients.sdk import AsyncProctorClient
from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from tests.support.api import World, running_api, seed_world, test_settings
from tests.support.fake_llm import running_fake_llm


@pytest.fixture
async def world(fresh_db_url: str) -> tuple[str, World]:
    return fresh_db_url, await seed_world(fresh_db_url, per_cell=10)


async def drive(
    db_url: str, world: World, tmp_path: Path, llm_config: ServerConfig, **run: Any
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    assert world.a.model_id is not None
    profile = run.pop("profile", "model-strong")
    with running_fake_llm(llm_config) as llm:
        async with running_api(test_settings(db_url)) as (app, _):
            transport = httpx.ASGITransport(app=app)
            endpoint = ChatEndpoint(base_url=llm.base_url, model=profile)
            path = tmp_path / "t.jsonl"
            async with (
                AsyncProctorClient(
                    "http://proctor.test", world.a.keys["evaluator"], transport=transport
                ) as client,
                ChatClient(endpoint, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01)) as model,
            ):
                config = RunConfig(model_id=str(world.a.model_id), **run)
                with Transcript(path) as transcript:
                    summary = await Runner(client, model, config, transcript).run()
                session = (
                    await client.get_session(summary.outcomes[0].session_id)
                    if summary.outcomes[0].session_id
                    else None
                )
            stats = llm.stats()
    lines = [line for line in read_lines(path) if line["event"] == "item"]
    return summary, lines, {"stats": stats, "session": session}


@pytest.mark.parametrize("paradigm", ["zero-shot", "few-shot", "cot"])
async def test_each_paradigm_drives_a_session_to_the_end(
    world: tuple[str, World], tmp_path: Path, paradigm: str
) -> None:
    db_url, w = world
    key = ServerConfig(answer_key=await AnswerKey.load_database(db_url))
    summary, items, extra = await drive(
        db_url, w, tmp_path, key, sessions=1, n_items=6, paradigm=paradigm
    )
    (outcome,) = summary.outcomes
    assert (
        outcome.error is None and outcome.answered == 6 and outcome.state in ("answered", "scored")
    )
    assert extra["session"].completed == 6
    assert [i["position"] for i in items] == list(range(6))
    assert all(i["paradigm"] == paradigm and i["prompt_tokens"] > 0 for i in items)
    if paradigm == "few-shot":
        assert all(
            i["prompt"].count("Question:") == 4 or i["prompt"].count("问题：") == 4 for i in items
        )


async def test_a_raw_completion_endpoint_gets_the_chat_template_and_reasoning_is_split(
    world: tuple[str, World], tmp_path: Path
) -> None:
    db_url, w = world
    key = ServerConfig(answer_key=await AnswerKey.load_database(db_url))
    summary, items, extra = await drive(
        db_url,
        w,
        tmp_path,
        key,
        sessions=1,
        n_items=4,
        template="chatml",
        adapter=get_adapter("deepseek-r1"),
        profile="model-reasoner",
    )
    assert summary.outcomes[0].answered == 4
    by_model = extra["stats"]["by_model"]
    assert by_model.get("model-reasoner") == 4
    # the reasoner's trace came inline in the raw text; it was split off the answer
    assert all(i["reasoning"] and "<think>" not in i["answer"] for i in items)


async def test_a_failing_model_stops_the_session_resumably(
    world: tuple[str, World], tmp_path: Path
) -> None:
    db_url, w = world
    broken = ServerConfig(
        answer_key=await AnswerKey.load_database(db_url),
        error_rate=1.0,
        error_status=500,
        retry_after=0,
    )
    summary, items, extra = await drive(db_url, w, tmp_path, broken, sessions=1, n_items=4)
    (outcome,) = summary.outcomes
    assert outcome.error is not None and "ChatRetriesExhausted" in outcome.error
    assert items == [] and extra["session"].state == "active" and extra["session"].pending == 1
    ends = [line for line in read_lines(tmp_path / "t.jsonl") if line["event"] == "session_end"]
    assert ends[0]["error"] == outcome.error
    assert json.dumps(ends[0])  # JSON-clean
