"""``proctor run-worker`` processes on PostgreSQL + Redis, beside a real ``proctor serve``:
two workers share a run, one is killed with SIGKILL mid-run, the other takes its sessions
over once their leases run out and finishes the run. No acknowledged answer is lost, every
position is answered once, and the model is asked again only for the items the dead
worker had in flight."""

from __future__ import annotations

import asyncio
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

import httpx
import pytest
from sqlalchemy import func, select

from fakellm.app import ServerConfig
from server.sessions.models import Answer
from tests.support import services
from tests.support.api import JWT_SECRET, World, live_server, login, seed_world
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.database import database_session, new_postgres_database
from tests.support.fake_llm import running_fake_llm
from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

SESSIONS, ITEMS = 4, 8
LEASE_S = 3


def worker_env(db_url: str, redis_url: str, api_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_REDIS_URL=redis_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_RUN_API_URL=api_url,
        PROCTOR_EGRESS_ALLOW='["127.0.0.1"]',
        PROCTOR_RUN_LEASE_S=str(LEASE_S),
        PROCTOR_RUN_POLL_S="0.3",
        PROCTOR_RUN_SLOTS_PER_WORKER="2",
    )
    return env


@contextmanager
def run_worker(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "run-worker"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


async def answers_by_position(db_url: str, session_ids: list[str]) -> dict[str, list[int]]:
    async with database_session(db_url) as db:
        rows = await db.execute(
            select(Answer.session_id, Answer.position, func.count())
            .where(Answer.session_id.in_([uuid.UUID(s) for s in session_ids]))
            .group_by(Answer.session_id, Answer.position)
        )
        found: dict[str, list[int]] = {s: [] for s in session_ids}
        for session_id, position, count in rows.tuples():
            found[str(session_id)].extend([position] * count)
    return {s: sorted(p) for s, p in found.items()}


async def wait_until(client: httpx.AsyncClient, url: str, headers: Any, test: Any) -> Any:
    deadline = time.monotonic() + 120
    while True:
        body = (await client.get(url, headers=headers)).json()
        if test(body):
            return body
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.2)


async def test_a_killed_worker_s_sessions_are_finished_by_another(
    postgres_server: services.PostgresServer,
    postgres_template: str,
    redis_server: services.RedisServer,
    tmp_path: Path,
) -> None:
    db_url = await new_postgres_database(postgres_server, postgres_template)
    world: World = await seed_world(db_url)
    serve = {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_REDIS_URL": redis_server.url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_MAX_CONCURRENT_SESSIONS": "50",
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "1000000",
        "PROCTOR_LEASE_IDLE_S": "60",  # the slot's token keeps the session's lease
    }
    key = "sk-workers-0d9c41e7"
    with (
        running_fake_llm(ServerConfig(api_key=key, latency_ms=120)) as llm,
        live_server(serve, tmp_path) as server,
    ):
        env = worker_env(db_url, redis_server.url, server.url)
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            evaluator = await login(client, world.a.keys["evaluator"])
            endpoint = {
                "base_url": llm.base_url,
                "model": "model-strong",
                "concurrency": SESSIONS,
                "secret_headers": {"Authorization": f"Bearer {key}"},
            }
            url = f"/v1/models/{world.a.model_id}/endpoint"
            assert (await client.put(url, json=endpoint, headers=evaluator)).status_code == 200
            with (
                run_worker(env, tmp_path / "worker-1.log") as first,
                run_worker(env, tmp_path / "worker-2.log"),
            ):
                body = {"model_id": str(world.a.model_id), "sessions": SESSIONS, "n_items": ITEMS}
                started = await client.post("/v1/runs", json=body, headers=evaluator)
                assert started.status_code == 201, started.text
                run_url = f"/v1/runs/{started.json()['id']}"
                await wait_until(
                    client, run_url, evaluator, lambda r: r["items_done"] >= SESSIONS * 2
                )
                first.send_signal(signal.SIGKILL)
                first.wait(10)
                killed_at = time.monotonic()
                run = await wait_until(
                    client, run_url, evaluator, lambda r: r["state"] in ("finished", "failed")
                )
                took_over_within = time.monotonic() - killed_at
        asked = llm.stats()["requests"]
    print(
        f"finished {took_over_within:.1f} s after the kill; the model was asked {asked} times "
        f"for {SESSIONS * ITEMS} items"
    )
    assert run["state"] == "finished", run
    sessions = [p["session_id"] for p in run["progress"]]
    assert all(p["done"] == p["total"] == ITEMS for p in run["progress"]), run
    positions = await answers_by_position(db_url, sessions)
    assert all(found == list(range(ITEMS)) for found in positions.values()), positions
    # each slot has at most one call in flight: the dead worker's two were asked again
    assert SESSIONS * ITEMS <= asked <= SESSIONS * ITEMS + 2, asked
    assert took_over_within < LEASE_S + 60, took_over_within
