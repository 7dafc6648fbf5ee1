"""``proctor judge worker`` as a real process: its metrics port, and SIGTERM.

The fake judge answers after a delay, so judge calls are in flight when SIGTERM arrives.
The worker must then claim nothing more, finish the jobs it is scoring, give the rest
back, and exit 0; a second worker scores what is left, and every answer ends with exactly
one verdict.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from fakellm.app import ServerConfig
from server.database import create_engine, unit_of_work
from server.scoring.models import ScoringJob, Verdict
from server.scoring.worker import ScoringWorker
from tests.support import services
from tests.support.api import JWT_SECRET, World, running_api, test_settings
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.fake_llm import FakeLlm, running_fake_llm
from tests.support.ports import free_port
from tests.support.sessions import drive_session, table_counts, wait_until

from .scrape import parse, total

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
JUDGE = "judge-v1"
REPO = Path(__file__).resolve().parents[3]
GRACE_S = 30
N_ITEMS = 24


def worker_env(db_url: str, redis_url: str, llm: FakeLlm) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_REDIS_URL=redis_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_JUDGES=json.dumps([{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}]),
        PROCTOR_JUDGE_CONCURRENCY="2",
        PROCTOR_SCORING_LEASE_S="120",  # a job given back is claimable at once, not later
        PROCTOR_SCORING_POLL_S="1",
        PROCTOR_SHUTDOWN_GRACE_S=str(GRACE_S),
        PROCTOR_LOG_FORMAT="json",
    )
    return env


@contextmanager
def worker_process(env: dict[str, str], log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "judge", "worker", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=20)


async def job_states(db_url: str, session_id: uuid.UUID) -> dict[str, int]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(ScoringJob.state, func.count())
                .where(ScoringJob.session_id == session_id)
                .group_by(ScoringJob.state)
            )
            return {state: count for state, count in rows.tuples()}
    finally:
        await engine.dispose()


async def judge_verdicts(db_url: str, session_id: uuid.UUID) -> int:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            n = await db.scalar(
                select(func.count())
                .select_from(Verdict)
                .where(Verdict.session_id == session_id, Verdict.method == "judge")
            )
        return n or 0
    finally:
        await engine.dispose()


async def job_attempts(db_url: str, session_id: uuid.UUID) -> list[tuple[str, int]]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(ScoringJob.state, ScoringJob.attempts).where(
                    ScoringJob.session_id == session_id
                )
            )
            return [(state, attempts) for state, attempts in rows.tuples()]
    finally:
        await engine.dispose()


def scrape_worker(port: int) -> dict[Any, float]:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200
    return parse(response.text)


async def test_sigterm_finishes_the_jobs_in_hand_and_exits_0(
    open_answers_db: tuple[str, World], redis_server: services.RedisServer, tmp_path: Path
) -> None:
    db_url, world = open_answers_db
    with running_fake_llm(ServerConfig(latency_ms=1500)) as llm:
        settings = test_settings(
            db_url,
            redis_server.url,
            scoring_in_process=False,
            judges=[{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}],
        )
        async with running_api(settings) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=N_ITEMS)
        env = worker_env(db_url, redis_server.url, llm)
        metrics_port = free_port()
        log = tmp_path / "worker-1.log"
        args = ("--metrics-port", str(metrics_port), "--metrics-host", "127.0.0.1")
        with worker_process(env, log, *args) as first:

            async def judging() -> dict[str, int] | None:
                states = await job_states(db_url, driven.id)
                judged = await judge_verdicts(db_url, driven.id)
                return states if states.get("leased") and judged >= 1 else None

            await wait_until(judging, within_s=60, what="judge calls in flight")
            samples = scrape_worker(metrics_port)
            first.send_signal(signal.SIGTERM)
            at_term = await job_states(db_url, driven.id)
            code = first.wait(timeout=GRACE_S + 15)
        after = await job_states(db_url, driven.id)
        assert code == 0, log.read_text()[-3000:]
        assert at_term.get("leased", 0) > 0
        assert "leased" not in after, after  # finished or given back, none left held
        assert after.get("done", 0) > at_term.get("done", 0)  # the calls in flight finished
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        assert any("finishing the scoring jobs in hand" in r["event"] for r in records)
        assert total(samples, "proctor_judge_calls_total", judge=JUDGE, outcome="ok") >= 1
        assert total(samples, "proctor_verdicts_total", method="judge") >= 1
        assert total(samples, "proctor_judge_tokens_total", judge=JUDGE, kind="prompt") > 0
        duration = "proctor_judge_call_duration_seconds_count"
        assert total(samples, duration, judge=JUDGE) >= 1

        with worker_process(env, tmp_path / "worker-2.log"):

            async def scored() -> dict[str, Any] | None:
                counts = await table_counts(db_url, driven.id)
                return counts if counts["state"] == "scored" else None

            await wait_until(scored, within_s=120, what="the rest scored by a second worker")
        counts = await table_counts(db_url, driven.id)
    assert counts["answers"] == N_ITEMS
    assert counts["verdicts"] == counts["distinct_verdicts"] == N_ITEMS, counts
    assert counts["jobs"] == {"done": N_ITEMS}, counts


async def test_stop_gives_claimed_jobs_back_uncounted(
    open_answers_db: tuple[str, World], redis_server: services.RedisServer
) -> None:
    """Jobs claimed but not started when ``stop`` comes go back to the queue at once, their
    claim not counted as an attempt; the ones being judged finish."""
    db_url, world = open_answers_db
    with running_fake_llm(ServerConfig(latency_ms=1000)) as llm:
        judges = [{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}]
        settings = test_settings(db_url, redis_server.url, scoring_in_process=False, judges=judges)
        async with running_api(settings) as (_, client):
            driven = await drive_session(
                client, db_url, world, n_items=N_ITEMS, correct=lambda position: False
            )
        engine = create_engine(db_url)
        worker = ScoringWorker(
            engine=engine, settings=settings.model_copy(update={"judge_concurrency": 1})
        )
        try:
            drain = asyncio.create_task(worker.drain())

            deadline = asyncio.get_running_loop().time() + 30
            while not worker._buffer:  # claimed, not started yet
                assert asyncio.get_running_loop().time() < deadline, "nothing claimed ahead"
                await asyncio.sleep(0.005)
            worker.stop()  # no await since the check: the buffer still holds those jobs
            stats = await drain
        finally:
            await worker.aclose()
            await engine.dispose()
    rows = await job_attempts(db_url, driven.id)
    states = [state for state, _ in rows]
    assert "leased" not in states
    assert states.count("done") == stats.recorded >= 1
    given_back = [attempts for state, attempts in rows if state == "queued"]
    assert given_back and all(attempts == 0 for attempts in given_back)
