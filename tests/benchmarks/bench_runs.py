"""Benchmark: runs the server drives, by ``proctor run-worker`` processes.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_runs.py [--sessions 8] [--items 25] [--workers 1,2,4]
        [--slow-sessions 200] [--slow-items 6] [--slow-latency-ms 500]

It starts its own PostgreSQL and Redis (``tests.support.services``), migrates, seeds a bank
big enough for every session of every phase (one organisation: no item is served twice),
``proctor serve`` (one process) and the fake LLM provider as a process of its own
(``proctor fake-llm serve``), then:

1. **Zero-latency model**, for each worker count W of ``--workers``: W ``proctor
   run-worker`` processes, one run of ``--sessions`` sessions of ``--items`` items;
   answers per second from the run's start to its end, and the CPU seconds per answer of
   the workers and of the server.
2. **The same load by ``proctor run``** (the client-side runner, ``--concurrency`` as the
   number of sessions) on the same server: its CPU per answer and the server's, so the
   ratio of (server + workers) to (server + ``proctor run``) per answer is read off in
   one run of the script.
3. **A 500 ms model with 200 items in flight**: one worker with 200 slots, a run of
   ``--slow-sessions`` sessions of ``--slow-items`` items (each session has one item in
   flight at a time): answers per second, against the bound of ``slots / latency``.

The machine's two cores are shared by PostgreSQL, Redis, the server, the workers and the
fake provider: the figures are the whole system's.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from tests.support import services
from tests.support.api import JWT_SECRET, World, login, seed_world
from tests.support.bank_keys import TEST_BANK_KEYS, install_test_keyring
from tests.support.cpu_time import process_cpu_s
from tests.support.fake_llm import FakeLlmProcess, start_fake_llm_process
from tests.support.paths import REPO_ROOT
from tests.support.serving import serving


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--items", type=int, default=25)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--slow-sessions", type=int, default=200)
    parser.add_argument("--slow-items", type=int, default=6)
    parser.add_argument("--slow-latency-ms", type=float, default=500.0)
    return parser.parse_args()


def environment(db_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_REDIS_URL=redis_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_EGRESS_ALLOW='["127.0.0.1"]',
        PROCTOR_RATE_LIMIT_PER_MINUTE="10000000",
        PROCTOR_RATE_LIMIT_ORG_PER_MINUTE="10000000",
        PROCTOR_MAX_CONCURRENT_SESSIONS="1000",
        PROCTOR_MAX_SESSIONS_PER_PERIOD="100000",
        PROCTOR_LOG_LEVEL="WARNING",
        **extra,
    )
    return env


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "server", "run-worker"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


async def set_endpoint(
    client: httpx.AsyncClient, world: World, headers: Any, base_url: str, concurrency: int
) -> None:
    body = {"base_url": base_url, "model": "model-strong", "concurrency": concurrency}
    put = await client.put(f"/v1/models/{world.a.model_id}/endpoint", json=body, headers=headers)
    put.raise_for_status()


@dataclass
class Timing:
    wall_s: float
    answers: int
    opened_s: float
    """Seconds until every session of the run was open."""
    answers_when_opened: int

    @property
    def rate(self) -> float:
        return self.answers / self.wall_s

    @property
    def steady_rate(self) -> float:
        """Answers per second once every session was open."""
        after = self.wall_s - self.opened_s
        return (self.answers - self.answers_when_opened) / after if after > 0 else math.nan


async def timed_run(
    client: httpx.AsyncClient, world: World, headers: Any, sessions: int, items: int
) -> Timing:
    """Start a run and wait for its end."""
    body = {"model_id": str(world.a.model_id), "sessions": sessions, "n_items": items}
    started = time.monotonic()
    run = (await client.post("/v1/runs", json=body, headers=headers)).json()
    opened: tuple[float, int] | None = None
    while run["state"] not in ("finished", "failed", "cancelled"):
        await asyncio.sleep(0.1)
        run = (await client.get(f"/v1/runs/{run['id']}", headers=headers)).json()
        if opened is None and all(p["session_id"] for p in run["progress"]):
            opened = (time.monotonic() - started, int(run["items_done"]))
    if run["state"] != "finished":
        raise RuntimeError(f"run ended {run['state']}: {run['stop_reason']}")
    wall = time.monotonic() - started
    opened = opened or (wall, int(run["items_done"]))
    return Timing(wall, int(run["items_done"]), opened[0], opened[1])


def cpu(procs: list[subprocess.Popen[bytes]]) -> float:
    return sum(process_cpu_s(proc.pid) for proc in procs)


async def phases(args: argparse.Namespace, workdir: Path) -> None:
    worker_counts = [int(w) for w in args.workers.split(",")]
    fast_runs = len(worker_counts) + 1
    needed = args.sessions * args.items * fast_runs + args.slow_sessions * args.slow_items
    with ExitStack() as stack:
        pg = stack.enter_context(services.postgres_server())
        redis = stack.enter_context(services.redis_server())
        pg.create_database("bench_runs")
        db_url = pg.url("bench_runs")
        from server.database import upgrade

        upgrade(db_url)
        per_cell = needed // 16 + 10
        world = await seed_world(
            db_url, per_cell=per_cell, augment=False, qtypes=("short_answer",),
            disciplines=4, subdisciplines=4,
        )  # fmt: skip
        env = environment(db_url, redis.url)
        url, server = stack.enter_context(serving(env, workdir / "serve.log"))
        fast = start_fake_llm_process(
            [sys.executable, "-m", "fakellm", "serve", "--latency-ms", "0"], workdir
        )
        stack.callback(fast.stop)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            headers = await login(client, world.a.keys["evaluator"])
            await set_endpoint(client, world, headers, fast.base_url, concurrency=256)
            print(f"1. zero-latency model: {args.sessions} sessions x {args.items} items a run")
            phases_cpu: dict[int, tuple[tuple[float, float], int]] = {}
            for count in worker_counts:
                worker_env = {**env, "PROCTOR_RUN_API_URL": url, "PROCTOR_RUN_POLL_S": "0.2"}
                workers = [
                    start_worker(worker_env, workdir / f"worker-{count}-{i}.log")
                    for i in range(count)
                ]
                await asyncio.sleep(3)  # started and listening
                before = (cpu(workers), process_cpu_s(server.pid))
                timing = await timed_run(client, world, headers, args.sessions, args.items)
                used = (cpu(workers) - before[0], process_cpu_s(server.pid) - before[1])
                stop(workers)
                answers = timing.answers
                print(
                    f"   {count} worker(s): {timing.rate:7.1f} answers/s "
                    f"({answers} in {timing.wall_s:.1f} s); CPU per answer: workers "
                    f"{1000 * used[0] / answers:.2f} ms, server {1000 * used[1] / answers:.2f} ms"
                )
                phases_cpu[count] = (used, answers)
            # blocking: nothing else runs meanwhile
            client_side(args, env, url, world, server, fast, phases_cpu, workdir)
            await slow_phase(args, env, url, world, client, headers, workdir)


def client_side(
    args: argparse.Namespace,
    env: dict[str, str],
    url: str,
    world: World,
    server: subprocess.Popen[bytes],
    fast: FakeLlmProcess,
    runs: dict[int, tuple[tuple[float, float], int]],
    workdir: Path,
) -> None:
    """The same load driven by ``proctor run``: CPU per answer of the client and server."""
    command = [
        sys.executable, "-m", "server", "run", "--server", url,
        "--api-key", world.a.keys["evaluator"], "--model-id", str(world.a.model_id),
        "--endpoint", fast.base_url, "--model", "model-strong",
        "--sessions", str(args.sessions), "--concurrency", str(args.sessions),
        "--n-items", str(args.items), "--transcript", str(workdir / "run.jsonl"),
    ]  # fmt: skip
    before = process_cpu_s(server.pid)
    started = time.monotonic()
    with (workdir / "proctor-run.log").open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)  # its own CPU, to the end
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(
            f"proctor run failed: {(workdir / 'proctor-run.log').read_text()[-2000:]}"
        )
    client_cpu = usage.ru_utime + usage.ru_stime
    wall = time.monotonic() - started
    server_cpu = process_cpu_s(server.pid) - before
    answers = args.sessions * args.items
    client_per, server_per = client_cpu / answers, server_cpu / answers
    print(
        f"2. proctor run, same load: {answers / wall:7.1f} answers/s; CPU per answer: client "
        f"{1000 * client_per:.2f} ms (its start-up included), server {1000 * server_per:.2f} ms"
    )
    for count, ((workers_cpu, run_server_cpu), run_answers) in runs.items():
        workers_per, runs_server_per = workers_cpu / run_answers, run_server_cpu / run_answers
        ratio = (workers_per + runs_server_per) / (client_per + server_per)
        print(
            f"   {count} worker(s): (server + workers) / (server + proctor run) per answer "
            f"{ratio:.2f}; workers / proctor run {workers_per / client_per:.2f}"
        )


async def slow_phase(
    args: argparse.Namespace,
    env: dict[str, str],
    url: str,
    world: World,
    client: httpx.AsyncClient,
    headers: Any,
    workdir: Path,
) -> None:
    slots = args.slow_sessions
    slow = start_fake_llm_process(
        [sys.executable, "-m", "fakellm", "serve", "--latency-ms", str(args.slow_latency_ms)],
        workdir,
    )
    try:
        await set_endpoint(client, world, headers, slow.base_url, concurrency=slots)
        worker_env = {
            **env,
            "PROCTOR_RUN_API_URL": url,
            "PROCTOR_RUN_SLOTS_PER_WORKER": str(slots),
            "PROCTOR_RUN_POLL_S": "0.2",
        }
        worker = start_worker(worker_env, workdir / "worker-slow.log")
        await asyncio.sleep(3)
        timing = await timed_run(client, world, headers, slots, args.slow_items)
        stop([worker])
    finally:
        slow.stop()
    bound = slots / (args.slow_latency_ms / 1000)
    print(
        f"3. {args.slow_latency_ms:.0f} ms model, {slots} sessions (one item in flight each): "
        f"{timing.rate:7.1f} answers/s ({timing.answers} in {timing.wall_s:.1f} s); every "
        f"session open after {timing.opened_s:.1f} s, then {timing.steady_rate:.1f} answers/s "
        f"(the bound {slots}/{args.slow_latency_ms / 1000:.1f} s is {bound:.0f}/s)"
    )


def main() -> None:
    args = parse_args()
    install_test_keyring()  # the seeded bank's references are sealed
    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
        asyncio.run(phases(args, Path(tmp)))


if __name__ == "__main__":
    main()
