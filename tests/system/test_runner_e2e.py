"""``proctor run`` end to end, as a deployment runs it: ``proctor serve`` and ``proctor judge
worker`` processes on PostgreSQL and Redis, the local model and judge server, the runner as
a subprocess; then a crash in the middle of a session and the resumed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from tests.server.scoring.test_exactly_once import REPO, worker_process
from tests.support import services
from tests.support.api import JWT_SECRET, World, live_server, login, seed_world
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.database import new_postgres_database
from tests.support.fake_llm import FakeLlm, running_fake_llm

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
JUDGE = "judge-v1"


@pytest.fixture
async def pg_world(
    postgres_server: services.PostgresServer, postgres_template: str
) -> tuple[str, World]:
    """A fresh seeded PostgreSQL database (room for several sessions per organisation)."""
    db_url = await new_postgres_database(postgres_server, postgres_template)
    return db_url, await seed_world(db_url, per_cell=15)


@pytest.fixture
def llm(pg_world: tuple[str, World]) -> Iterator[FakeLlm]:
    """Models answering from the bank's own key, and the judge."""
    db_url, _ = pg_world
    with running_fake_llm(ServerConfig(answer_key=AnswerKey.from_database(db_url))) as server:
        yield server


def server_env(db_url: str, redis_url: str, llm: FakeLlm) -> dict[str, str]:
    return {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_REDIS_URL": redis_url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_BANK_KEYS": TEST_BANK_KEYS,  # the judge worker reads the sealed references
        "PROCTOR_JUDGES": json.dumps([{"name": JUDGE, "base_url": llm.base_url, "model": "judge"}]),
        "PROCTOR_SCORING_POLL_S": "0.5",
        "PROCTOR_LEASE_IDLE_S": "2",
        "PROCTOR_LEADERBOARD_RESAMPLES": "500",
        # The server runs as a process of its own, so every request comes from 127.0.0.1,
        # whose per-address key-exchange counter lives in the session's shared Redis: the
        # system tests just before this one may have spent a minute's worth (a tenth of
        # this figure) already.
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000",
    }


def runner_cmd(
    server: str,
    key: str,
    model_id: uuid.UUID,
    llm: FakeLlm,
    model: str,
    transcript: Path,
    *extra: str,
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "server",
        "run",
        "--server",
        server,
        "--api-key",
        key,
        "--model-id",
        str(model_id),
        "--endpoint",
        llm.base_url,
        "--model",
        model,
        "--transcript",
        str(transcript),
        *extra,
    ]


def run_cli(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=300
    )


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}


def transcript_items(path: Path) -> list[dict[str, Any]]:
    lines = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    return [line for line in lines if line["event"] == "item"]


async def register(client: httpx.AsyncClient, key: str, name: str) -> uuid.UUID:
    headers = await login(client, key)
    response = await client.post(
        "/v1/models", json={"name": name, "api_snapshot": "v1"}, headers=headers
    )
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["id"])


def scored_board(server: str, admin_key: str, session_ids: list[str]) -> dict[str, Any]:
    """The leaderboard once every session in ``session_ids`` is scored (within 90 s)."""
    with httpx.Client(base_url=server) as client:
        token = client.post("/v1/auth/token", json={"api_key": admin_key}).json()
        headers = {"Authorization": f"Bearer {token['access_token']}"}
        deadline = time.monotonic() + 90
        pending = set(session_ids)
        while pending:
            for sid in list(pending):
                if client.get(f"/v1/sessions/{sid}", headers=headers).json()["state"] == "scored":
                    pending.discard(sid)
            if pending and time.monotonic() > deadline:
                raise AssertionError(f"not scored within 90 s: {sorted(pending)}")
            time.sleep(0.3)
        board: dict[str, Any] = client.get("/v1/leaderboard", headers=headers).json()
        return board


async def test_runner_drives_models_to_a_scored_leaderboard_and_resumes_after_a_crash(
    pg_world: tuple[str, World],
    llm: FakeLlm,
    redis_server: services.RedisServer,
    tmp_path: Path,
    run_sync: Any,
) -> None:
    db_url, world = pg_world
    env = server_env(db_url, redis_server.url, llm)
    with (
        live_server(env, tmp_path) as server,
        worker_process({**clean_env(), **env}, tmp_path / "worker.log"),
    ):
        async with httpx.AsyncClient(base_url=server.url) as client:
            strong = await register(client, world.a.keys["vendor"], "strong")
            weak = await register(client, world.b.keys["vendor"], "weak")
        evaluator_a, evaluator_b = world.a.keys["evaluator"], world.b.keys["evaluator"]

        # two models, two sessions each, through the CLI
        runs = {
            "strong": (evaluator_a, strong, "model-strong", tmp_path / "strong.jsonl"),
            "weak": (evaluator_b, weak, "model-weak", tmp_path / "weak.jsonl"),
        }
        results = {}
        for name, (key, model_id, profile, transcript) in runs.items():
            cmd = runner_cmd(
                server.url,
                key,
                model_id,
                llm,
                profile,
                transcript,
                "--sessions",
                "2",
                "--n-items",
                "12",
                "--concurrency",
                "2",
                "--paradigm",
                "cot",
            )
            done = await run_sync(run_cli, cmd)
            assert done.returncode == 0, done.stderr[-3000:]
            results[name] = json.loads(done.stdout)
        for name, result in results.items():
            assert result["finished"] == 2 and result["failed"] == 0, result
            items = transcript_items(runs[name][3])
            assert len(items) == 24
            assert all(
                i["prompt"].endswith("Please think step by step and provide the final answer.")
                or "一步一步" in i["prompt"]
                for i in items
            )
            assert all(
                i["prompt_tokens"] > 0 and i["end_to_end_s"] >= i["model_latency_s"] >= 0
                for i in items
            )

        sessions = [s["session_id"] for r in results.values() for s in r["sessions"]]
        board = await run_sync(scored_board, server.url, world.a.keys["admin"], sessions)
        names = [row["name"] for row in board["models"]]
        assert names == ["strong", "weak"]
        rows = {row["name"]: row for row in board["models"]}
        assert rows["strong"]["sessions"] == rows["weak"]["sessions"] == 2
        assert rows["strong"]["cost"]["prompt_tokens_per_item"] > 0  # usage reached the server

        # a crash in the middle of a session, then the same command again
        transcript = tmp_path / "crash.jsonl"
        crashy = await register_sync(server.url, world.a.keys["vendor"], "crashy")
        cmd = runner_cmd(
            server.url,
            evaluator_a,
            crashy,
            llm,
            "model-mid",
            transcript,
            "--sessions",
            "1",
            "--n-items",
            "30",
        )
        before, again = await run_sync(crash_then_rerun, cmd, transcript)
        assert before < 30
        assert again.returncode == 0, again.stderr[-3000:]
        summary = json.loads(again.stdout)
        (session,) = summary["sessions"]
        assert session["resumed"] is True and session["state"] in ("answered", "scored")
        assert session["answered_before"] + session["answered_now"] == 30
        async with httpx.AsyncClient(base_url=server.url) as client:
            headers = await login(client, evaluator_a)
            state = (
                await client.get(f"/v1/sessions/{session['session_id']}", headers=headers)
            ).json()
        assert state["completed"] == 30 and state["pending"] == 0
        # the transcript saw every answer once, except perhaps the one committed in the
        # instant before the kill (the server has it; the killed run could not write it)
        positions = [i["position"] for i in transcript_items(transcript)]
        assert len(positions) == len(set(positions)) and set(positions) <= set(range(30))
        assert len(positions) >= 29


def crash_then_rerun(
    cmd: list[str], transcript: Path
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Start the runner, SIGKILL it once 5 answers are in its transcript, run it again."""
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not transcript.exists() or len(transcript_items(transcript)) < 5:
        assert time.monotonic() < deadline and proc.poll() is None, "the runner did not get going"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    before = len(transcript_items(transcript))
    again = subprocess.run(
        cmd, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=300
    )
    return before, again


async def register_sync(server: str, key: str, name: str) -> uuid.UUID:
    async with httpx.AsyncClient(base_url=server) as client:
        return await register(client, key, name)
