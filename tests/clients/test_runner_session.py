"""The runner in process against the real API and the local model server: every paradigm,
a raw-completion endpoint behind a chat template, a reasoning model, a model that fails
mid-session (the session stays resumable), and what real inference servers do to items
(a context too small for the prompt, replies cut at ``max_tokens``, empty replies)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from clients.llm.chat import ChatClient, ChatEndpoint, RetryPolicy
from clients.runner.adapters import get_adapter
from clients.runner.runner import RunConfig, Runner, summary_json
from clients.runner.transcript import Transcript, read_lines
from clients.sdk import AsyncProctorClient
from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from server.sessions.models import Answer
from tests.support.api import World, running_api, seed_world, test_settings
from tests.support.database import database_session
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


async def test_an_item_past_the_models_context_is_answered_empty_and_the_session_ends(
    world: tuple[str, World], tmp_path: Path
) -> None:
    """A model whose context no prompt fits, refused as llama.cpp's server refuses (500
    "exceeds the available context size"): no retry, every item answered empty with
    ``finish_reason: error`` and the refusal in the transcript, and the session ends, so
    the organisation's slot comes back (it used to stay active for its 7-day deadline)."""
    db_url, w = world
    key = ServerConfig(answer_key=await AnswerKey.load_database(db_url))
    summary, items, extra = await drive(
        db_url, w, tmp_path, key, sessions=1, n_items=4, profile="model-tiny-context"
    )
    (outcome,) = summary.outcomes
    assert outcome.error is None and outcome.failed_items == 4, outcome
    assert extra["session"].state in ("answered", "scored") and extra["session"].completed == 4
    assert extra["stats"]["requests"] == 4  # one call per item: an overflow is not retried
    assert all(i["finish_reason"] == "error" and i["answer"] == "" for i in items)
    assert all("ChatContextOverflow" in i["failure"] and "context" in i["failure"] for i in items)
    rows = await answers_of(db_url, outcome.session_id)
    assert [r.finish_reason for r in rows] == ["error"] * 4


async def test_cut_and_empty_replies_are_marked_and_counted(
    world: tuple[str, World], tmp_path: Path
) -> None:
    """A reply cut at ``max_tokens`` is submitted with ``finish_reason: length`` (on the
    answer and in the transcript) and an empty reply is counted as empty; the summary
    gives both counts, and the model's own latency is stored as reported."""
    db_url, w = world
    key = ServerConfig(answer_key=await AnswerKey.load_database(db_url))
    cut, cut_items, _ = await drive(
        db_url, w, tmp_path, key, sessions=1, n_items=3, profile="model-rambler", max_tokens=8
    )
    (outcome,) = cut.outcomes
    assert (outcome.truncated, outcome.empty, outcome.failed_items) == (3, 0, 0)
    assert all(i["finish_reason"] == "length" and len(i["answer"]) <= 8 * 4 for i in cut_items)
    rows = await answers_of(db_url, outcome.session_id)
    assert [r.finish_reason for r in rows] == ["length"] * 3
    assert all(r.reported_latency_s is not None and r.reported_latency_s >= 0 for r in rows)
    assert summary_json(cut)["truncated"] == 3

    (tmp_path / "silent").mkdir()  # a transcript of its own: a new run, not a resumed one
    silent, silent_items, _ = await drive(
        db_url, w, tmp_path / "silent", key, sessions=1, n_items=3, profile="model-silent"
    )
    (quiet,) = silent.outcomes
    assert (quiet.truncated, quiet.empty) == (0, 3) and quiet.error is None
    assert all(i["empty"] and i["finish_reason"] == "stop" for i in silent_items)
    assert summary_json(silent)["empty"] == 3


async def answers_of(db_url: str, session_id: str) -> list[Any]:
    """The session's answer rows, by position."""
    async with database_session(db_url) as db:
        rows = await db.execute(
            select(Answer)
            .where(Answer.session_id == uuid.UUID(session_id))
            .order_by(Answer.position)
        )
        return list(rows.scalars())
