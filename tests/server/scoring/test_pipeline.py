"""The scoring pipeline end to end: answers through the API, the in-process worker, the
real local judge server, verdicts in the database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from fakellm.app import ServerConfig
from judge.prompts import PROMPT_VERSION
from server.config import DEFAULT_JUDGE_MAX_TOKENS
from server.database import create_engine, unit_of_work
from server.scoring import service
from server.scoring.models import ScoringJob
from server.scoring.worker import ScoringWorker
from server.sessions.models import Answer
from tests.support.api import World, login, running_api, test_settings
from tests.support.fake_llm import FakeLlm, running_fake_llm
from tests.support.sessions import (
    drive_session,
    table_counts,
    verdicts,
    wait_until,
)

JUDGE = "judge-v1"


def judge_settings(db_url: str, llm: FakeLlm, model: str = "judge", **extra: Any) -> Any:
    values: dict[str, Any] = {
        "judges": [{"name": JUDGE, "base_url": llm.base_url, "model": model}],
        "scoring_in_process": True,
        "scoring_poll_s": 0.5,
    }
    values.update(extra)
    return test_settings(db_url, **values)


async def scored(db_url: str, session_id: uuid.UUID) -> dict[str, Any] | None:
    """The table counts once the session is scored (read again after the state, because the
    first read is not one snapshot and the last verdicts may land while it runs)."""
    if (await table_counts(db_url, session_id))["state"] != "scored":
        return None
    return await table_counts(db_url, session_id)


async def test_a_completed_session_is_scored_automatically(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    async with running_api(judge_settings(db_url, llm)) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=24, think=True)
        counts = await wait_until(lambda: scored(db_url, driven.id), what="the session scored")
        headers = await login(client, world.a.keys["vendor"])
        progress = (await client.get(f"/v1/sessions/{driven.id}/scoring", headers=headers)).json()
    assert counts["answers"] == counts["verdicts"] == counts["distinct_verdicts"] == 24
    assert counts["jobs"] == {"done": 24}
    found = {v.position: v for v in await verdicts(db_url, driven.id)}
    assert {p: v.score for p, v in found.items()} == driven.expected
    methods = {driven.qtypes[p]: v.method for p, v in found.items()}
    assert methods.get("multiple_choice", "objective") == "objective"
    assert methods.get("true_false", "objective") == "objective"
    assert methods.get("short_answer", "judge") == "judge"
    assert {v.judge for v in found.values()} == {JUDGE}
    assert {v.prompt_version for v in found.values()} == {PROMPT_VERSION}
    assert progress["answers"] == progress["scored"] == 24
    assert progress["waiting"] == 0 and progress["needs_review"] == 0
    assert progress["points"] == sum(driven.expected.values())
    assert "correct" not in str(progress) and "verdicts" not in progress


async def test_reasoning_traces_are_stored_apart(world_db: tuple[str, World], llm: FakeLlm) -> None:
    db_url, world = world_db
    async with running_api(judge_settings(db_url, llm)) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=4, think=True)
    engine = create_engine(db_url)
    async with unit_of_work(engine) as db:
        answers = list(
            (await db.execute(select(Answer).where(Answer.session_id == driven.id))).scalars()
        )
    await engine.dispose()
    assert len(answers) == 4
    for answer in answers:
        assert "<think>" not in answer.answer and "Working it out" not in answer.answer
        assert answer.reasoning is not None and answer.reasoning.startswith("Working it out")


async def test_rerun_is_idempotent_and_a_new_judge_scores_again(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    settings = judge_settings(db_url, llm)
    async with running_api(settings) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=12)
        await wait_until(lambda: scored(db_url, driven.id), what="the session scored")
    engine = create_engine(db_url)
    now = datetime.now(UTC)
    async with unit_of_work(engine) as db:
        again = await service.enqueue_session(
            db,
            session_id=driven.id,
            judge=JUDGE,
            prompt_version=PROMPT_VERSION,
            review_again=False,
            now=now,
        )
        other = await service.enqueue_session(
            db,
            session_id=driven.id,
            judge="judge-v2",
            prompt_version=PROMPT_VERSION,
            review_again=False,
            now=now,
        )
    assert (again, other) == (0, 12)
    second = judge_settings(
        db_url,
        llm,
        judges=[
            {"name": JUDGE, "base_url": llm.base_url, "model": "judge"},
            {"name": "judge-v2", "base_url": llm.base_url, "model": "judge"},
        ],
    )
    worker = ScoringWorker(engine=engine, settings=second)
    stats = await worker.drain()
    await worker.aclose()
    await engine.dispose()
    assert stats.recorded == 12 and stats.duplicates == 0
    by_judge: dict[str, dict[int, int | None]] = {}
    for verdict in await verdicts(db_url, driven.id):
        by_judge.setdefault(verdict.judge, {})[verdict.position] = verdict.score
    assert by_judge[JUDGE] == by_judge["judge-v2"] == driven.expected


async def test_unreadable_judge_leaves_answers_for_review_not_zero(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = world_db
    async with running_api(judge_settings(db_url, llm, model="judge-garbled")) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=16)
        await wait_until(lambda: scored(db_url, driven.id), what="the session scored")
        headers = await login(client, world.a.keys["vendor"])
        progress = (await client.get(f"/v1/sessions/{driven.id}/scoring", headers=headers)).json()
    found = await verdicts(db_url, driven.id)
    judged = [v for v in found if v.method == "judge"]
    assert judged, "the sample should hold open items"
    assert all(v.needs_review and v.score is None and v.calls == 2 for v in judged)
    assert all(not v.needs_review for v in found if v.method != "judge")
    assert progress["needs_review"] == len(judged)
    assert progress["scored"] == len(found) - len(judged)

    engine = create_engine(db_url)
    async with unit_of_work(engine) as db:
        queued = await service.enqueue_session(
            db,
            session_id=driven.id,
            judge=JUDGE,
            prompt_version=PROMPT_VERSION,
            review_again=True,
            now=datetime.now(UTC),
        )
    worker = ScoringWorker(engine=engine, settings=judge_settings(db_url, llm))
    await worker.drain()
    await worker.aclose()
    await engine.dispose()
    assert queued == len(judged)
    rescored = {v.position: v.score for v in await verdicts(db_url, driven.id)}
    assert rescored == driven.expected


async def test_a_judge_that_rejects_every_call_sends_answers_to_review_at_once(
    world_db: tuple[str, World], llm: FakeLlm, caplog: pytest.LogCaptureFixture
) -> None:
    """A permanent 400 (say, the judge's context is too small for our prompt) is not
    retried with back-off for a quarter of an hour: the answer goes to review on the first
    attempt with the reason, the log names the judge, the ``rejected`` call outcome moves
    (the judge-error alert's input) and the verdict counts the call it made."""
    db_url, world = world_db
    rejected_before = _judge_calls(JUDGE, "rejected")
    settings = judge_settings(db_url, llm, model="judge-rejecting")
    with caplog.at_level(logging.ERROR, logger="server.scoring.worker"):
        async with running_api(settings) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=16)
            await wait_until(lambda: scored(db_url, driven.id), what="the session scored")
    judged = [v for v in await verdicts(db_url, driven.id) if v.method == "judge"]
    assert judged, "the sample should hold open items"
    assert all(v.needs_review and v.score is None and v.calls == 1 for v in judged)
    assert all(f"judge {JUDGE} rejected the call" in (v.detail or "") for v in judged)
    jobs = await _jobs(db_url, driven.id)
    assert all(
        j.attempts == 1
        for j in jobs
        if j.judge == JUDGE and j.position in {v.position for v in judged}
    )
    assert _judge_calls(JUDGE, "rejected") - rejected_before == len(judged)
    named = [r for r in caplog.records if JUDGE in r.getMessage() and "rejected" in r.getMessage()]
    assert len(named) == len(judged)


async def test_a_rambling_judge_is_cut_at_its_max_tokens(world_db: tuple[str, World]) -> None:
    """A judge that would generate until its context is full is sent ``max_tokens``
    (1,024 unless its ``PROCTOR_JUDGES`` entry says otherwise) and stops there; its reply,
    which holds no rating, sends the answer to review."""
    db_url, world = world_db
    with running_fake_llm() as endless:
        settings = judge_settings(db_url, endless, model="judge-endless")
        assert settings.judges[0].max_tokens == DEFAULT_JUDGE_MAX_TOKENS
        async with running_api(settings) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=16)
            await wait_until(lambda: scored(db_url, driven.id), what="the session scored")
    judged = [v for v in await verdicts(db_url, driven.id) if v.method == "judge"]
    assert judged and all(v.needs_review for v in judged)
    assert all(v.calls >= 1 for v in judged)
    # each call stopped at the cap (without it, the filler runs to the fake's 32,768)
    assert all(0 < v.completion_tokens <= v.calls * DEFAULT_JUDGE_MAX_TOKENS for v in judged)


def _judge_calls(judge: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "proctor_judge_calls_total", {"judge": judge, "outcome": outcome}
    )
    return value or 0.0


async def _jobs(db_url: str, session_id: uuid.UUID) -> list[ScoringJob]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(select(ScoringJob).where(ScoringJob.session_id == session_id))
            return list(rows.scalars())
    finally:
        await engine.dispose()


async def test_a_long_retry_after_defers_the_job(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    with running_fake_llm(ServerConfig(error_rate=1.0, retry_after=600)) as limited:
        async with running_api(judge_settings(db_url, limited)) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=16)

            async def deferred() -> list[ScoringJob] | None:
                engine = create_engine(db_url)
                async with unit_of_work(engine) as db:
                    jobs = list(
                        (
                            await db.execute(
                                select(ScoringJob).where(ScoringJob.session_id == driven.id)
                            )
                        ).scalars()
                    )
                await engine.dispose()
                waiting = [j for j in jobs if j.state == "queued" and j.attempts > 0]
                done = [j for j in jobs if j.state == "done"]
                return jobs if waiting and len(waiting) + len(done) == 16 else None

            jobs = await wait_until(deferred, what="open answers deferred")
    later = datetime.now(UTC) + timedelta(seconds=500)
    for job in jobs:
        if job.state == "queued":
            assert job.not_before > later, "the job must wait as long as the provider asked"
            assert job.last_error and "deferred" in job.last_error
    counts = await table_counts(db_url, driven.id)
    assert counts["state"] == "answered"
    assert counts["verdicts"] == sum(1 for j in jobs if j.state == "done")


async def test_competing_workers_write_each_verdict_once(
    pg_world_db: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = pg_world_db
    settings = judge_settings(db_url, llm, scoring_in_process=False, judge_concurrency=2)
    async with running_api(settings) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=40)
    engines = [create_engine(db_url) for _ in range(3)]
    workers = [ScoringWorker(engine=e, settings=settings) for e in engines]
    results = await asyncio.gather(*(w.drain() for w in workers))
    for worker, engine in zip(workers, engines, strict=True):
        await worker.aclose()
        await engine.dispose()
    assert sum(r.recorded for r in results) == 40
    assert sum(r.duplicates for r in results) == 0
    assert sum(bool(r.recorded) for r in results) >= 2, "the work should have been shared"
    counts = await table_counts(db_url, driven.id)
    assert counts["verdicts"] == counts["distinct_verdicts"] == 40
    assert counts["state"] == "scored"
