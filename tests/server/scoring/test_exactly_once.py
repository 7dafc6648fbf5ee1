"""Exactly-once scoring across failures: a worker process killed mid-job, and a Redis
restart. Real processes (``proctor judge worker``), real PostgreSQL and Redis, and the
real local judge server with latency so that jobs are in flight when things break."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from fakellm.app import ServerConfig
from server.database import create_engine, unit_of_work
from server.scoring.models import ScoringJob, Verdict
from tests.support import services
from tests.support.api import JWT_SECRET, World, running_api, test_settings
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.fake_llm import FakeLlm, running_fake_llm
from tests.support.ports import free_port
from tests.support.sessions import drive_session, table_counts, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
JUDGE = "judge-v1"
REPO = Path(__file__).resolve().parents[3]


def worker_env(db_url: str, redis_url: str, llm: FakeLlm, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_REDIS_URL=redis_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_JUDGES=json.dumps([{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}]),
        PROCTOR_JUDGE_CONCURRENCY="2",
        PROCTOR_SCORING_LEASE_S="3",
        PROCTOR_SCORING_POLL_S="1",
    )
    env.update(extra)
    return env


@contextmanager
def worker_process(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``proctor judge worker`` as a child process (killed at the end if still running)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "judge", "worker"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


async def job_states(db_url: str, session_id: uuid.UUID) -> dict[str, int]:
    engine = create_engine(db_url)
    async with unit_of_work(engine) as db:
        rows = await db.execute(
            select(ScoringJob.state, func.count())
            .where(ScoringJob.session_id == session_id)
            .group_by(ScoringJob.state)
        )
        states = {state: count for state, count in rows.tuples()}
    await engine.dispose()
    return states


async def judge_verdicts(db_url: str, session_id: uuid.UUID) -> int:
    engine = create_engine(db_url)
    async with unit_of_work(engine) as db:
        n = await db.scalar(
            select(func.count())
            .select_from(Verdict)
            .where(Verdict.session_id == session_id, Verdict.method == "judge")
        )
    await engine.dispose()
    return n or 0


def assert_exactly_once(counts: dict[str, Any], n: int) -> None:
    assert counts["state"] == "scored"
    assert counts["answers"] == n
    assert counts["verdicts"] == counts["distinct_verdicts"] == n, counts
    assert counts["jobs"] == {"done": n}, counts


async def test_a_worker_killed_mid_job_loses_and_duplicates_nothing(
    pg_world_db: tuple[str, World], redis_server: services.RedisServer, tmp_path: Path
) -> None:
    db_url, world = pg_world_db
    with running_fake_llm(ServerConfig(latency_ms=400)) as llm:
        settings = test_settings(
            db_url,
            redis_server.url,
            scoring_in_process=False,
            judges=[{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}],
        )
        async with running_api(settings) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=40)
        env = worker_env(db_url, redis_server.url, llm)
        with worker_process(env, tmp_path / "worker-1.log") as first:

            async def in_flight() -> dict[str, int] | None:
                states = await job_states(db_url, driven.id)
                judged = await judge_verdicts(db_url, driven.id)
                return states if states.get("leased") and judged >= 2 else None

            at_kill = await wait_until(in_flight, what="judge jobs in flight")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert at_kill.get("leased", 0) > 0 and at_kill.get("queued", 0) + at_kill["leased"] > 0
        assert (await table_counts(db_url, driven.id))["state"] == "answered"
        with worker_process(env, tmp_path / "worker-2.log"):
            counts = await wait_until(
                lambda: _scored(db_url, driven.id), within_s=60, what="the session scored"
            )
        calls = llm.stats()["requests"]
    assert_exactly_once(counts, 40)
    judged = await judge_verdicts(db_url, driven.id)
    assert calls >= judged, "every judge verdict was paid for at least once"


async def _scored(db_url: str, session_id: uuid.UUID) -> dict[str, Any] | None:
    """The table counts once the session is scored (read again after the state: the first
    read is not one snapshot)."""
    if (await table_counts(db_url, session_id))["state"] != "scored":
        return None
    return await table_counts(db_url, session_id)


@contextmanager
def restartable_redis(binary: Path, workdir: Path) -> Iterator[Any]:
    """A Redis server on a fixed port that the test can stop and start again."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.append(services.start_redis_on(binary, port, workdir))

    def stop() -> None:
        procs[-1].kill()
        procs[-1].wait(timeout=10)

    start()
    try:
        yield type(
            "Redis", (), {"url": f"redis://127.0.0.1:{port}/0", "start": start, "stop": stop}
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


async def test_a_redis_restart_loses_and_duplicates_nothing(
    pg_world_db: tuple[str, World], redis_binary: Path, tmp_path: Path
) -> None:
    db_url, world = pg_world_db
    with (
        running_fake_llm(ServerConfig(latency_ms=100)) as llm,
        restartable_redis(redis_binary, tmp_path) as redis,
    ):
        settings = test_settings(
            db_url,
            redis.url,
            scoring_in_process=False,
            judges=[{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}],
        )
        # A long poll interval: only wake-ups (arq) make scoring quick.
        env = worker_env(db_url, redis.url, llm, PROCTOR_SCORING_POLL_S="30")
        with worker_process(env, tmp_path / "worker.log"):
            async with running_api(settings) as (_, client):
                before = await drive_session(client, db_url, world, n_items=12)
                await wait_until(lambda: _scored(db_url, before.id), what="scoring before")
                redis.stop()
                during = await drive_session(client, db_url, world, n_items=12)
                redis.start()
                counts_during = await wait_until(
                    lambda: _scored(db_url, during.id),
                    within_s=60,
                    what="answers sent while Redis was down",
                )
                started = time.monotonic()
                after = await drive_session(client, db_url, world, n_items=12)
                counts_after = await wait_until(
                    lambda: _scored(db_url, after.id), within_s=25, what="scoring after the restart"
                )
                after_s = time.monotonic() - started
    assert_exactly_once(counts_during, 12)
    assert_exactly_once(counts_after, 12)
    assert after_s < 25, "wake-ups must work again after Redis comes back"
