"""Benchmark: item delivery (next + answer) under 200 concurrent vendors, against baselines.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_delivery.py [--vendors 200] [--items 150] [--workers 2]
        [--duration 20] [--warmup 5] [--client-procs 2] [--deliver-items 120]
        [--paced-share 0.5] [--profile DIR] [--json results.json]
        [--baseline-tree PATH] [--micro-audit ROWS]

It starts its own durable PostgreSQL (fsync, synchronous_commit, full_page_writes on) and
Redis from the installed Debian binaries (``tests.support.services``), migrates, seeds a synthetic
bank big enough for every session, one organisation with one evaluator key and a
registered model, then runs ``proctor serve --workers N`` on 127.0.0.1 with quotas and
rate limits raised (``PROCTOR_MAX_CONCURRENT_SESSIONS``, ``..._PER_PERIOD``,
``PROCTOR_RATE_LIMIT_PER_MINUTE``). Every simulated vendor has its own bearer token
(leases are per token ``jti``) and its own session of ``--items`` items. The vendors run
as asyncio tasks (uvloop), one keep-alive connection each, spread over ``--client-procs``
processes (default 2). ``--client raw`` (default) is a minimal HTTP/1.1 client on
``httptools``, ~50 us of CPU per request; ``--client httpx`` uses ``httpx.AsyncClient``,
which measured ~4 ms of CPU per request here: on a 2-core machine the httpx clients took
more CPU than the server and halved its throughput, so they were the bottleneck. Each
phase reports the CPU of every client process: if one nears 1.0 core, add processes.
Each phase has ``--warmup`` seconds before the
``--duration`` seconds measured, and only requests that *complete* inside the measured
window count.

Phases, in this order, all with the same number of vendors and concurrency:

1. ``whoami``  -- ``GET /v1/whoami`` in a loop: the "hello JSON" baseline. Same
   authentication (JWT verify, revocation check, Redis rate limit) and the same audit row
   (group-committed) as every route, no session work.
2. ``next``    -- ``GET /v1/sessions/{id}/next`` in a loop. The first call delivers an item;
   every later call returns the same pending item: next's *read path*, without delivery.
3. ``deliver`` -- ``next`` in a loop on separate sessions whose pending window is their
   size (``--deliver-items``): every call delivers a fresh item (lease, counters, item,
   exposure marked), none is answered.
4. ``cycle``   -- ``next`` then ``POST /v1/sessions/{id}/answers``, each answer accepted:
   the real delivery loop, saturated. ``cycles/s`` = answers/s.
5. ``paced``   -- the same cycles, started on a fixed schedule (random phase per vendor)
   at ``--paced-share`` (default half) of the ``cycle`` phase's rate: open loop, latency
   measured from the scheduled start, so the p99 includes any queue.
6. ``pgbench`` -- after the HTTP phases, with the server stopped: ``pgbench -M prepared
   -c <vendors> -j 2 -T <duration>`` running a custom script with the SQL statements one
   answer submission executed in the general path (revocation EXISTS query, lease
   ``UPDATE ... RETURNING``, the ``sample_items`` + ``exposures`` SELECT, ``INSERT INTO
   answers``, the counter ``UPDATE``, all in one committed transaction; then the
   ``audit_log`` INSERT in its own committed transaction). Each pgbench client drives its
   own dedicated session (created through the API, then given a deterministic id);
   answers go to increasing positions, so every transaction commits real rows.

Figures (the delivery targets):

* req/s per phase and p50/p99 latency (ms) per request kind;
* A = answer req/s in the cycle phase / pgbench tps (target >= 0.3, stretch 0.5). The
  cycle phase also serves an equal number of ``next`` requests, which pgbench does not;
* B = delivering next req/s (deliver phase) / whoami req/s (target >= 0.7); the pending
  retry and the cycle's next are reported beside it;
* p99 of next and answer in the paced phase (target <= 100 ms);
* CPU shares per component in each measured window (server workers, PostgreSQL, Redis,
  clients, pgbench, others) from /proc, so the bottleneck can be read off; a client
  process near 100 % of a core means the *client* limits the figures;
* with ``--profile DIR``: py-spy's collapsed stacks of the workers per phase and their
  top frames (self % / total % of the busy samples).

The machine's cores are shared by clients, server, PostgreSQL and Redis: on a small
machine the figures measure the whole system, not the server alone.

Before and after in one run: ``--baseline-tree PATH`` (a checkout of another commit, e.g.
``git worktree add /tmp/before <commit>``; nothing installed, the same venv) runs the HTTP
phases first against a server started from PATH (``PYTHONPATH=PATH``, on the same
database, with sessions of its own), then against this tree, and prints both with the
ratios this/baseline. ``--micro-audit ROWS`` also times ``ROWS`` audit rows written through
each tree's ``AuditWriter`` (200 concurrent writers, group commit; ``--micro-rounds``
rounds, the trees alternating, median reported) and the hashing alone
(``server.audit.chaining.chained_values``, microseconds per row). Without a
``redis-server`` binary the server runs on in-memory rate-limit counters (noted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import httpx

from tests.support.bank_keys import TEST_BANK_KEYS, install_test_keyring

JWT_SECRET = "bench-secret-" + "x7Qp2Lm9Zr4Tn8Vb" * 3
TARGET_A = 0.3
STRETCH_A = 0.5
TARGET_B = 0.7
TARGET_P99_MS = 100.0
PGB_ID_PREFIX = "00000000-0000-4000-8000-"
"""pgbench sessions get ids ``PGB_ID_PREFIX || lpad(client_id, 12, '0')``."""
ANSWER_ROUTE = "/v1/sessions/{session_id}/answers"


# --------------------------------------------------------------------------- #
# CPU accounting from /proc
# --------------------------------------------------------------------------- #

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime+stime ticks) for every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                data = f.read()
        except OSError:
            continue
        rest = data[data.rfind(")") + 2 :].split()
        # utime + stime, plus cutime + cstime: children that exited and were reaped (e.g.
        # PostgreSQL backends of closed connections) still count.
        table[int(entry)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))
    return table


def tree_ticks(table: dict[int, tuple[int, int]], roots: list[int]) -> int:
    """CPU ticks of ``roots`` and all their live descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen, stack, total = set(), list(roots), 0
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        total += table[pid][1]
        stack.extend(children.get(pid, []))
    return total


def machine_ticks() -> tuple[int, int]:
    """(busy, total) ticks of the whole machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


@dataclass
class CpuProbe:
    """Snapshots CPU use of named process trees between ``start()`` and ``stop()``."""

    groups: dict[str, list[int]]
    _t0: float = 0.0
    _ticks0: dict[str, int] = field(default_factory=dict)
    _machine0: tuple[int, int] = (0, 0)

    def _sample(self) -> dict[str, int]:
        table = proc_table()
        return {name: tree_ticks(table, pids) for name, pids in self.groups.items()}

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._ticks0 = self._sample()
        self._machine0 = machine_ticks()

    def stop(self) -> dict[str, float]:
        """Cores used by each group (1.0 = one core busy) and the machine's busy share."""
        elapsed = time.monotonic() - self._t0
        ticks = self._sample()
        busy, total = machine_ticks()
        result = {
            name: (ticks[name] - self._ticks0.get(name, 0)) / CLK_TCK / elapsed
            for name in self.groups
        }
        share = (busy - self._machine0[0]) / max(1, total - self._machine0[1])
        ours = sum(result.values())
        result["others"] = max(0.0, share * (os.cpu_count() or 1) - ours)
        result["machine_busy_share"] = share
        return result


# --------------------------------------------------------------------------- #
# Client processes
# --------------------------------------------------------------------------- #


@dataclass
class Vendor:
    token: str
    session_id: str


class RawConnection:
    """A minimal HTTP/1.1 keep-alive client on one asyncio connection, parsing responses
    with ``httptools`` (uvicorn's C parser): a fraction of httpx's CPU per request, so
    that on a small machine the clients leave the cores to the server."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._body: list[bytes] = []
        self._complete = False

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    async def request(
        self, method: str, path: str, token: str, body: bytes = b""
    ) -> tuple[int, bytes]:
        import httptools

        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {token}\r\n"
        )
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        parser = httptools.HttpResponseParser(self)
        self._body, self._complete = [], False
        assert self.reader is not None
        try:
            while not self._complete:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("server closed the connection")
                parser.feed_data(data)
        except BaseException:
            self.close()
            raise
        return parser.get_status_code(), b"".join(self._body)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def client_process(
    phase: str,
    vendors: list[tuple[str, str]],
    base_url: str,
    window: tuple[float, float, float],
    conn: Any,
    client_kind: str = "raw",
    pace_s: float = 0.0,
) -> None:
    """Entry point of one client process: run ``phase`` for ``vendors``, send results."""
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    result = runner(_client_async(phase, vendors, base_url, window, client_kind, pace_s))
    conn.send(result)
    conn.close()


async def _client_async(
    phase: str,
    vendors: list[tuple[str, str]],
    base_url: str,
    window: tuple[float, float, float],
    client_kind: str,
    pace_s: float = 0.0,
) -> dict[str, Any]:
    """``window`` = (start, measure_from, measure_until) on the ``time.time()`` clock;
    ``pace_s``: in the ``paced`` phase, each vendor starts one cycle every ``pace_s``
    seconds (open loop: on a schedule, whatever the previous cycle's latency)."""
    start, measure_from, until = window
    latencies: dict[str, list[float]] = {
        "whoami": [],
        "next": [],
        "deliver": [],
        "answer": [],
    }
    errors: Counter[str] = Counter()
    late: Counter[str] = Counter()
    exhausted = 0
    cpu: dict[str, float] = {}
    limits = httpx.Limits(max_connections=len(vendors), max_keepalive_connections=len(vendors))
    timeout = httpx.Timeout(60.0)
    hostport = base_url.split("//", 1)[1]
    host, port = hostport.rsplit(":", 1)

    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as shared:

        def requester(token: str) -> Any:
            """``call(method, path, json_body) -> (status, parsed JSON or None)``."""
            if client_kind == "httpx":
                headers = {"Authorization": f"Bearer {token}"}

                async def via_httpx(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                    r = await shared.request(method, path, json=body, headers=headers)
                    return r.status_code, (r.json() if r.content else None)

                return via_httpx
            raw = RawConnection(host, int(port))

            async def via_raw(method: str, path: str, body: Any = None) -> tuple[int, Any]:
                data = json.dumps(body).encode() if body is not None else b""
                status, content = await raw.request(method, path, token, data)
                return status, (json.loads(content) if content else None)

            return via_raw

        def record(kind: str, t0: float, t1: float, status: int, ok: tuple[int, ...]) -> None:
            if measure_from <= t1 <= until:
                if status in ok:
                    latencies[kind].append((t1 - t0) * 1000)
                else:
                    errors[f"{kind} {status}"] += 1

        async def whoami(token: str, _sid: str) -> None:
            call = requester(token)
            while time.time() < until:
                t0 = time.time()
                status, _ = await call("GET", "/v1/whoami")
                record("whoami", t0, time.time(), status, (200,))

        async def next_only(token: str, sid: str) -> None:
            nonlocal exhausted
            call = requester(token)
            while time.time() < until:
                t0 = time.time()
                status, _ = await call("GET", f"/v1/sessions/{sid}/next")
                if status == 204:
                    exhausted += 1
                    return
                record("next", t0, time.time(), status, (200,))

        async def cycle(token: str, sid: str) -> None:
            nonlocal exhausted
            call = requester(token)
            while time.time() < until:
                t0 = time.time()
                status, item = await call("GET", f"/v1/sessions/{sid}/next")
                t1 = time.time()
                if status == 204:
                    exhausted += 1
                    return
                record("next", t0, t1, status, (200,))
                if status != 200:
                    await asyncio.sleep(0.05)
                    continue
                body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
                t2 = time.time()
                status, _ = await call("POST", f"/v1/sessions/{sid}/answers", body)
                record("answer", t2, time.time(), status, (201,))

        async def deliver(token: str, sid: str) -> None:
            """Every ``next`` delivers a fresh item (the session's pending window is its
            size), never answered: the delivery path alone."""
            nonlocal exhausted
            call = requester(token)
            while time.time() < until:
                t0 = time.time()
                status, _ = await call("GET", f"/v1/sessions/{sid}/next")
                if status == 204:
                    exhausted += 1
                    return
                record("deliver", t0, time.time(), status, (200,))
                if status != 200:
                    await asyncio.sleep(0.05)

        async def paced(token: str, sid: str) -> None:
            """Cycles started on a fixed schedule (random phase per vendor); a cycle that
            starts late is counted (``late``), and latency is measured from the scheduled
            start so that a queue in front of the server is not hidden."""
            nonlocal exhausted
            call = requester(token)
            due = time.time() + random.uniform(0, pace_s)
            while due < until:
                await asyncio.sleep(max(0.0, due - time.time()))
                if time.time() - due > pace_s:
                    late["cycles"] += 1
                t0 = due
                status, item = await call("GET", f"/v1/sessions/{sid}/next")
                t1 = time.time()
                due += pace_s
                if status == 204:
                    exhausted += 1
                    return
                record("next", t0, t1, status, (200,))
                if status != 200:
                    continue
                body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
                t2 = time.time()
                status, _ = await call("POST", f"/v1/sessions/{sid}/answers", body)
                record("answer", t2, time.time(), status, (201,))

        async def cpu_meter() -> None:
            await asyncio.sleep(max(0.0, measure_from - time.time()))
            c0, w0 = time.process_time(), time.time()
            await asyncio.sleep(max(0.0, until - time.time()))
            cpu["cores"] = (time.process_time() - c0) / max(1e-9, time.time() - w0)

        loops = {
            "whoami": whoami,
            "next": next_only,
            "cycle": cycle,
            "deliver": deliver,
            "paced": paced,
        }
        loop = loops[phase]
        await asyncio.sleep(max(0.0, start - time.time()))
        tasks = [asyncio.create_task(loop(token, sid)) for token, sid in vendors]
        meter = asyncio.create_task(cpu_meter())
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        await meter
    failures = Counter(type(o).__name__ for o in outcomes if isinstance(o, BaseException))
    return {
        "latencies": latencies,
        "errors": dict(errors),
        "failures": dict(failures),
        "exhausted": exhausted,
        "late": late["cycles"],
        "cpu_cores": cpu.get("cores", 0.0),
    }


# --------------------------------------------------------------------------- #
# Services, seeding, setup through the API
# --------------------------------------------------------------------------- #


def pg_settings(args: argparse.Namespace) -> dict[str, str]:
    connections = max(250, 45 * args.workers + 30, args.vendors + 30)
    settings = {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "shared_buffers": "256MB",
        "max_connections": str(connections),
        "max_wal_size": "4GB",
    }
    for extra in args.pg_setting:
        name, _, value = extra.partition("=")
        settings[name.strip()] = value.strip()
    return settings


async def seed(url: str, n_items_total: int) -> dict[str, Any]:
    """A synthetic bank of at least ``n_items_total`` families, one organisation with an
    evaluator key and one registered model."""
    from sqlalchemy import func, select

    from bank.models import Item
    from server.auth.service import create_api_key
    from server.database import create_engine, unit_of_work
    from server.registry.models import RegisteredModel
    from tests.support.factories import make_bank, make_org

    engine = create_engine(url)
    try:
        cells = 10 * 2 * 5
        per_cell = math.ceil(n_items_total / cells)
        started = time.perf_counter()
        async with unit_of_work(engine) as db:
            await make_bank(
                db,
                disciplines=10,
                qtypes=["multiple_choice", "short_answer"],
                subdisciplines=5,
                per_cell=per_cell,
                augment=False,
            )
        async with unit_of_work(engine) as db:
            families = await db.scalar(select(func.count(func.distinct(Item.family_id))))
            org = await make_org(db, "bench-org")
            key_row, key = await create_api_key(db, org_id=org.id, role="evaluator")
            model = RegisteredModel(org_id=org.id, name="bench-model", api_snapshot="v1")
            db.add(model)
            await db.flush()
            info = {
                "org_id": str(org.id),
                "key": key,
                "key_id": str(key_row.id),
                "model_id": str(model.id),
                "families": int(families or 0),
                "seed_s": time.perf_counter() - started,
            }
        async with engine.connect() as connection:
            await connection.execute(select(1))
        return info
    finally:
        await engine.dispose()


async def analyze(url: str) -> None:
    from server.database import create_engine

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.exec_driver_sql("ANALYZE")
    await engine.dispose()


async def login(client: httpx.AsyncClient, key: str) -> str:
    r = await client.post("/v1/auth/token", json={"api_key": key})
    r.raise_for_status()
    token: str = r.json()["access_token"]
    return token


async def open_sessions(
    base_url: str, key: str, model_id: str, counts: list[tuple[int, int]]
) -> list[list[dict[str, Any]]]:
    """For each (how many, n_items) in ``counts``: that many sessions, each with its own
    fresh token. Returns [[{"token", "session_id", "n_items"}]] per entry."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        creator = {"Authorization": f"Bearer {await login(client, key)}"}
        semaphore = asyncio.Semaphore(8)

        async def one(n_items: int) -> dict[str, Any]:
            async with semaphore:
                token = await login(client, key)
                r = await client.post(
                    "/v1/sessions", json={"model_id": model_id, "n_items": n_items}, headers=creator
                )
                if r.status_code != 201:
                    raise RuntimeError(f"session creation failed: {r.status_code} {r.text}")
                body = r.json()
                return {"token": token, "session_id": body["id"], "n_items": body["n_items"]}

        out = []
        for how_many, n_items in counts:
            out.append(list(await asyncio.gather(*(one(n_items) for _ in range(how_many)))))
        return out


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_server(
    env_extra: dict[str, str], workers: int, workdir: Path, tree: Path | None = None
) -> Server:
    """``proctor serve`` from this checkout, or from ``tree`` (``PYTHONPATH=tree``)."""
    from tests.support.ports import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(env_extra)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    port = free_port()
    log = workdir / "serve.log"
    cmd = [sys.executable, "-m", "server", "serve", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", str(workers)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            cmd,
            env=env,
            cwd=str(tree or Path(__file__).resolve().parents[2]),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"proctor serve exited:\n{log.read_text()[-3000:]}")
        try:
            # whoami answers 401 without a token: every worker's lifespan has run once
            # the app answers at all (uvicorn only accepts after startup).
            httpx.get(server.url + "/v1/whoami", timeout=2.0)
            return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"proctor serve did not start:\n{log.read_text()[-3000:]}")


# --------------------------------------------------------------------------- #
# Phases
# --------------------------------------------------------------------------- #


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_phase(
    phase: str,
    vendors: list[Vendor],
    base_url: str,
    args: argparse.Namespace,
    cpu_groups: dict[str, list[int]],
    pace_s: float = 0.0,
    profile_to: Path | None = None,
) -> dict[str, Any]:
    """Run ``phase`` in ``args.client_procs`` processes; aggregate their results. With
    ``profile_to``, py-spy samples the server's workers over the measured window and the
    collapsed stacks are written there."""
    ctx = mp.get_context("spawn")
    n_procs = max(1, min(args.client_procs, len(vendors)))
    slices = [vendors[i::n_procs] for i in range(n_procs)]
    procs, pipes = [], []
    # Spawned interpreters need a few seconds to import; start measuring after that.
    start = time.time() + 3.0 + 0.5 * n_procs
    measure_from = start + args.warmup
    until = measure_from + args.duration
    for part in slices:
        receiver, sender = ctx.Pipe(duplex=False)
        p = ctx.Process(
            target=client_process,
            args=(
                phase,
                [(v.token, v.session_id) for v in part],
                base_url,
                (start, measure_from, until),
                sender,
                args.client,
                pace_s,
            ),
            daemon=True,
        )
        p.start()
        sender.close()
        procs.append(p)
        pipes.append(receiver)
    probe = CpuProbe({**cpu_groups, "clients": [p.pid for p in procs if p.pid]})
    time.sleep(max(0.0, measure_from - time.time()))
    probe.start()
    spy = start_profiler(cpu_groups["server"][0], args.duration, profile_to) if profile_to else None
    time.sleep(max(0.0, until - time.time()))
    cpu = probe.stop()
    if spy is not None:
        spy.wait(60)
    results = []
    for p, pipe in zip(procs, pipes, strict=True):
        if not pipe.poll(120):
            raise RuntimeError(f"client process {p.pid} sent no result")
        results.append(pipe.recv())
        p.join(30)
    latencies: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for r in results:
        for kind, values in r["latencies"].items():
            latencies.setdefault(kind, []).extend(values)
        errors.update(r["errors"])
        failures.update(r["failures"])
    out: dict[str, Any] = {
        "phase": phase,
        "duration_s": args.duration,
        "requests": {},
        "errors": dict(errors),
        "task_failures": dict(failures),
        "exhausted_sessions": sum(r["exhausted"] for r in results),
        "late_cycles": sum(r["late"] for r in results),
        "client_process_cores": [round(r["cpu_cores"], 3) for r in results],
        "cpu_cores": {k: round(v, 3) for k, v in cpu.items()},
    }
    for kind, values in latencies.items():
        if not values:
            continue
        out["requests"][kind] = {
            "n": len(values),
            "per_s": len(values) / args.duration,
            "p50_ms": percentile(values, 0.50),
            "p99_ms": percentile(values, 0.99),
            "mean_ms": statistics.fmean(values),
        }
    return out


def start_profiler(pid: int, duration: float, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` and its children (the workers) for ``duration`` seconds,
    collapsed stacks (``--format raw``) into ``out``."""
    spy = Path(sys.executable).with_name("py-spy")
    cmd = [str(spy), "record", "--pid", str(pid), "--subprocesses", "--nonblocking"]
    cmd += ["--rate", "200", "--duration", str(int(duration)), "--format", "raw"]
    cmd += ["--output", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def top_frames(collapsed: Path, n: int = 25) -> list[tuple[str, float, float]]:
    """The ``n`` functions with the most samples in ``collapsed`` (py-spy's raw format,
    ``frame;frame;... count``): (function, self %, total %), by total; idle samples
    (the event loop waiting) are counted in the total."""
    self_n: Counter[str] = Counter()
    total_n: Counter[str] = Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        samples += k
        frames = [_frame_name(f) for f in _PROCESS_FRAMES.sub("", stack).split(";") if f]
        if not frames:
            continue
        self_n[frames[-1]] += k
        for name in set(frames):
            total_n[name] += k
    if not samples:
        return []
    return [
        (name, 100 * self_n[name] / samples, 100 * total / samples)
        for name, total in total_n.most_common(n)
    ]


_PROCESS_FRAMES = re.compile(r'^(?:process \d+:"[^"]*";)+')
"""py-spy's leading ``process PID:"command line"`` frames (a command line may hold ``;``)."""


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)``."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1].rstrip(")")
    return f"{name} ({file})" if file else name


async def widen_pending_window(url: str, sessions: list[dict[str, Any]]) -> None:
    """Give the ``deliver`` phase's sessions a pending window of their whole size, so
    every ``next`` delivers a fresh item."""
    from sqlalchemy import text

    from server.database import create_engine, unit_of_work

    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as db:
            await db.execute(
                text("UPDATE eval_sessions SET pending_window = n_items WHERE id = ANY(:ids)"),
                {"ids": [uuid.UUID(s["session_id"]) for s in sessions]},
            )
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- #
# pgbench
# --------------------------------------------------------------------------- #

PGBENCH_SCRIPT = """\
-- One answer submission, as the server runs it (see server/sessions/service.py and
-- server/auth/service.py): one transaction for the request, then the audit row in its own.
BEGIN;
SELECT (EXISTS (SELECT 1 FROM revoked_tokens WHERE revoked_tokens.jti = ('pgb-' || :client_id::text))) OR (EXISTS (SELECT 1 FROM api_keys WHERE api_keys.id = :keyid::uuid AND api_keys.revoked_at IS NOT NULL)) AS anon_1;
UPDATE eval_sessions SET lease_jti=('pgb-' || :client_id::text), lease_expires_at=now() + interval '60 seconds' WHERE eval_sessions.id = ('{prefix}' || lpad(:client_id::text, 12, '0'))::uuid AND eval_sessions.org_id = :orgid::uuid AND (eval_sessions.lease_jti IS NULL OR eval_sessions.lease_jti = ('pgb-' || :client_id::text) OR eval_sessions.lease_expires_at < now()) RETURNING eval_sessions.id AS sid, eval_sessions.org_id, eval_sessions.model_id, eval_sessions.sample_id AS sample, eval_sessions.mode, eval_sessions.state, eval_sessions.n_items AS nitems, eval_sessions.n_delivered, eval_sessions.n_completed AS pos, eval_sessions.pending_window, eval_sessions.deadline_at, eval_sessions.created_by, eval_sessions.created_at, eval_sessions.ended_at, eval_sessions.lease_jti, eval_sessions.lease_expires_at
\\gset
SELECT sample_items.item_id AS item, exposures.delivered_at AS delivered FROM sample_items JOIN exposures ON exposures.org_id = :orgid::uuid AND exposures.family_id = sample_items.family_id WHERE sample_items.sample_id = :sample::uuid AND sample_items.position = :pos::int % :nitems::int
\\gset
INSERT INTO answers (session_id, position, item_id, answer, reasoning, submitted_by, delivered_at, submitted_at) VALUES (:sid::uuid, :pos::int, :item::uuid, 'A', NULL, ('pgb-' || :client_id::text), coalesce(:delivered::timestamptz, now()), now());
UPDATE eval_sessions SET n_completed=:pos::int + 1 WHERE eval_sessions.id = :sid::uuid;
COMMIT;
BEGIN;
INSERT INTO audit_log (at, subject, org_id, session_id, method, route, status, client) VALUES (now(), :keyid::text, :orgid::uuid, :sid::uuid, 'POST', '{route}', 201, '127.0.0.1');
COMMIT;
"""  # noqa: E501


async def prepare_pgbench_sessions(url: str, sessions: list[dict[str, Any]]) -> None:
    """Give pgbench's sessions deterministic ids (client i drives session i), mark every
    item delivered (as the HTTP run would have), and free their leases."""
    from sqlalchemy import text

    from server.database import create_engine, unit_of_work

    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as db:
            for i, s in enumerate(sessions):
                new = f"{PGB_ID_PREFIX}{i:012d}"
                params = {"old": s["session_id"], "new": new}
                await db.execute(text("UPDATE eval_sessions SET id = :new WHERE id = :old"), params)
                await db.execute(
                    text(
                        "UPDATE exposures SET session_id = :new, delivered_at = now() "
                        "WHERE session_id = :old"
                    ),
                    params,
                )
                await db.execute(
                    text(
                        "UPDATE eval_sessions SET state = 'active', n_delivered = n_items "
                        "WHERE id = :new"
                    ),
                    params,
                )
    finally:
        await engine.dispose()


def run_pgbench(
    pg: Any,
    dbname: str,
    info: dict[str, Any],
    clients: int,
    args: argparse.Namespace,
    workdir: Path,
    cpu_groups: dict[str, list[int]],
) -> dict[str, Any]:
    script = workdir / "submit.sql"
    script.write_text(PGBENCH_SCRIPT.format(prefix=PGB_ID_PREFIX, route=ANSWER_ROUTE))
    os.chmod(workdir, 0o755)
    os.chmod(script, 0o644)
    cmd = [
        str(pg.bindir / "pgbench"),
        "-n",
        "-M",
        "prepared",
        "-f",
        str(script),
        "-c",
        str(clients),
        "-j",
        str(args.pgbench_threads),
        "-T",
        str(args.duration),
        "-D",
        f"keyid={info['key_id']}",
        "-D",
        f"orgid={info['org_id']}",
        "-h",
        pg.host,
        "-p",
        str(pg.port),
        "-U",
        pg.user,
        dbname,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    process = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    probe = CpuProbe({**cpu_groups, "pgbench": [process.pid]})
    time.sleep(min(2.0, args.duration / 4))  # connections established
    probe.start()
    time.sleep(max(0.0, args.duration - min(2.0, args.duration / 4) - 0.5))
    cpu = probe.stop()
    stdout, stderr = process.communicate(timeout=args.duration + 120)
    if process.returncode != 0:
        raise RuntimeError(f"pgbench failed ({process.returncode}):\n{stdout}\n{stderr[-3000:]}")
    tps = lat = None
    failed = 0
    for line in stdout.splitlines():
        if line.startswith("tps ="):
            tps = float(line.split("=")[1].split()[0])
        elif line.startswith("latency average"):
            lat = float(line.split("=")[1].split()[0])
        elif line.startswith("number of failed transactions"):
            failed = int(line.split(":")[1].split()[0])
    if tps is None:
        raise RuntimeError(f"could not read pgbench output:\n{stdout}\n{stderr[-2000:]}")
    return {
        "tps": tps,
        "latency_avg_ms": lat,
        "failed": failed,
        "clients": clients,
        "threads": args.pgbench_threads,
        "cpu_cores": {k: round(v, 3) for k, v in cpu.items()},
        "stderr_tail": stderr.strip().splitlines()[-5:],
    }


async def count_rows(url: str) -> dict[str, int]:
    from sqlalchemy import text

    from server.database import create_engine

    engine = create_engine(url)
    try:
        async with engine.connect() as c:
            count = "SELECT count(*) FROM answers WHERE session_id::text {} LIKE :prefix"
            prefix = {"prefix": PGB_ID_PREFIX + "%"}
            answers_http = (await c.execute(text(count.format("NOT")), prefix)).scalar_one()
            answers_pgb = (await c.execute(text(count.format("")), prefix)).scalar_one()
            audit = (await c.execute(text("SELECT count(*) FROM audit_log"))).scalar_one()
        return {"answers_http": answers_http, "answers_pgbench": answers_pgb, "audit_rows": audit}
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- #
# Report
# --------------------------------------------------------------------------- #


def print_report(results: dict[str, Any]) -> None:
    cfg = results["config"]
    print()
    print(
        f"Proctor delivery benchmark: {cfg['vendors']} vendors, {cfg['workers']} server workers, "
        f"{cfg['client_procs']} {cfg['client']} client processes, {cfg['duration']} s measured "
        f"(+{cfg['warmup']} s warm-up) per phase, {os.cpu_count()} CPUs"
    )
    print()
    header = f"{'phase':<8} {'request':<8} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'errors':>8}"
    print(header)
    print("-" * len(header))
    for phase in ("whoami", "next", "deliver", "cycle", "paced"):
        r = results["phases"].get(phase)
        if not r:
            continue
        for kind, s in r["requests"].items():
            errs = sum(n for k, n in r["errors"].items() if k.startswith(kind))
            print(
                f"{phase:<8} {kind:<8} {s['per_s']:>9.1f} {s['p50_ms']:>9.1f} "
                f"{s['p99_ms']:>9.1f} {errs:>8}"
            )
    pgb = results.get("pgbench")
    if pgb:
        print(
            f"{'pgbench':<8} {'submit':<8} {pgb['tps']:>9.1f} {'':>9} {'':>9} "
            f"{pgb['failed']:>8}   (avg latency {pgb['latency_avg_ms']} ms)"
        )
    cycle = results["phases"].get("cycle", {}).get("requests", {})
    if "answer" in cycle:
        print(f"\ncycles/s (next + answer): {cycle['answer']['per_s']:.1f}")
    print("\nCPU (cores busy during the measured window; machine share = all CPUs):")
    for phase, r in list(results["phases"].items()) + ([("pgbench", pgb)] if pgb else []):
        cpu = r["cpu_cores"]
        parts = [f"{k} {v:.2f}" for k, v in cpu.items() if k != "machine_busy_share"]
        print(
            f"  {phase:<8} "
            + ", ".join(parts)
            + f", machine busy {100 * cpu['machine_busy_share']:.0f}%"
        )
        if "client_process_cores" in r:
            print(f"  {'':<8} per client process: {r['client_process_cores']}")
    print("\nRatios:")
    for name, ratio in results["ratios"].items():
        if ratio["value"] is None:
            continue
        verdict = "OK" if ratio["value"] >= ratio["target"] else "BELOW TARGET"
        print(
            f"  {name}: {ratio['value']:.3f} (target >= {ratio['target']})  {verdict}"
            f"   [{ratio['what']}]"
        )
    latency = results.get("latency_target")
    if latency:
        verdict = "OK" if latency["value"] <= latency["target"] else "ABOVE TARGET"
        print(
            f"  p99 paced: {latency['value']:.1f} ms (target <= {latency['target']:g} ms)  "
            f"{verdict}   [{latency['what']}]"
        )
    for phase, r in results["phases"].items():
        if r.get("top_frames"):
            print(f"\nprofile of the server workers, phase {phase} (self % / total %):")
            for name, self_pct, total_pct in r["top_frames"]:
                print(f"  {self_pct:5.1f} {total_pct:5.1f}  {name}")
    for note in results["notes"]:
        print(f"note: {note}")


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


MICRO_AUDIT_SCRIPT = """
import asyncio, json, sys, tempfile, time
from pathlib import Path
from bank.database import utcnow
from server.audit.writer import AuditWriter
from server.database import create_engine

WRITERS = 200


def row(i):
    return {"at": utcnow(), "subject": f"bench-{i}", "org_id": None, "session_id": None,
            "method": "GET", "route": "/bench/micro-audit", "status": 200,
            "client": "127.0.0.1", "repeats": 1}


async def main(url, n):
    import server.audit.writer as module
    chaining = hasattr(module, "chained_values")  # (an editable install finds any module)
    options = {}
    if chaining:  # sign checkpoints as the server does
        from server.ledger.signing import new_private_text, parse_private
        options = {"signing_key": parse_private(new_private_text(), source="bench")}
    engine = create_engine(url, pool_size=2, max_overflow=2)
    writer = AuditWriter(engine, Path(tempfile.mkdtemp()), **options)
    writer.start()
    per = n // WRITERS

    async def one(k):
        for i in range(per):
            await writer.write(row(k * per + i))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(WRITERS)))
    elapsed = time.perf_counter() - t0
    await writer.stop()
    await engine.dispose()
    out = {"rows": per * WRITERS, "rows_per_s": per * WRITERS / elapsed}
    if chaining:
        from server.audit.chaining import chained_values
        from server.ledger.chain import ChainHead

        rows = [row(i) for i in range(n)]
        t0 = time.perf_counter()
        chained_values(rows, ChainHead("w-bench", 0, None, "0" * 64))
        out["hash_us_per_row"] = 1e6 * (time.perf_counter() - t0) / n
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def upgrade_from(tree: Path, url: str) -> None:
    """Migrate ``url`` with the migrations of the checkout ``tree`` (its own schema)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PYTHONPATH"] = str(tree)
    script = "import sys; from server.database import upgrade; upgrade(sys.argv[1])"
    subprocess.run([sys.executable, "-c", script, url], cwd=str(tree), env=env, check=True)


def micro_audit(url: str, tree: Path | None, rows: int, workdir: Path) -> dict[str, Any]:
    """``rows`` audit rows through the ``AuditWriter`` of ``tree`` (None: this checkout),
    from 200 concurrent writers; and, where the tree chains, the hashing alone."""
    root = tree or Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PYTHONPATH"] = str(root)
    env["PROCTOR_BANK_KEYS"] = TEST_BANK_KEYS
    done = subprocess.run(
        [sys.executable, "-c", MICRO_AUDIT_SCRIPT, url, str(rows)],
        cwd=str(root),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"micro audit benchmark failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def micro_audit_rounds(
    databases: dict[str, tuple[str, dict[str, Any]]],
    trees: list[tuple[str, Path | None]],
    rows: int,
    rounds: int,
    workdir: Path,
) -> dict[str, dict[str, Any]]:
    """``micro_audit`` for every tree, ``rounds`` times with the trees alternating (a
    single pair of runs differed by 30 % for the same code), and the medians."""
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
    for _ in range(max(1, rounds)):
        for label, tree in trees:
            runs[label].append(micro_audit(databases[label][0], tree, rows, workdir))
    summary: dict[str, dict[str, Any]] = {}
    for label, figures in runs.items():
        summary[label] = {
            "rows_per_s": statistics.median(f["rows_per_s"] for f in figures),
            "rounds": [round(f["rows_per_s"]) for f in figures],
        }
        hashing = [f["hash_us_per_row"] for f in figures if "hash_us_per_row" in f]
        if hashing:
            summary[label]["hash_us_per_row"] = statistics.median(hashing)
    return summary


def print_comparison(results: dict[str, Any]) -> None:
    """Each tree's req/s and latencies per phase, and this tree's over the baseline's."""
    trees = results["trees"]
    micro = results.get("micro_audit", {})
    if micro:
        print("\nAudit rows through AuditWriter (200 concurrent writers, group commit):")
        for label, figures in micro.items():
            hashing = figures.get("hash_us_per_row")
            print(
                f"  {label:<10} {figures['rows_per_s']:>9.0f} rows/s (median of "
                f"{figures['rounds']})"
                + (f"   hashing alone {hashing:.1f} us/row" if hashing is not None else "")
            )
        if "baseline" in micro and "this tree" in micro:
            ratio = micro["this tree"]["rows_per_s"] / micro["baseline"]["rows_per_s"]
            print(f"  this tree / baseline: {ratio:.3f}")
    if "baseline" not in trees or "this tree" not in trees:
        return
    before, after = trees["baseline"]["phases"], trees["this tree"]["phases"]
    print(f"\nBaseline ({trees['baseline']['tree']}) vs this tree:")
    header = (
        f"{'phase':<8} {'request':<8} {'req/s before':>13} {'req/s now':>10} {'ratio':>6} "
        f"{'p50 before':>11} {'p50 now':>8} {'p99 before':>11} {'p99 now':>8}"
    )
    print(header)
    print("-" * len(header))
    for phase, r in after.items():
        for kind, now in r["requests"].items():
            then = before.get(phase, {}).get("requests", {}).get(kind)
            if then is None:
                continue
            print(
                f"{phase:<8} {kind:<8} {then['per_s']:>13.1f} {now['per_s']:>10.1f} "
                f"{now['per_s'] / then['per_s']:>6.3f} {then['p50_ms']:>11.1f} "
                f"{now['p50_ms']:>8.1f} {then['p99_ms']:>11.1f} {now['p99_ms']:>8.1f}"
            )


def run_tree(
    results: dict[str, Any],
    args: argparse.Namespace,
    phases: list[str],
    env: dict[str, str],
    workdir: Path,
    tree: Path | None,
    url: str,
    info: dict[str, Any],
    pgb_clients: int,
    n_deliver: int,
    cpu_services: dict[str, list[int]],
) -> list[dict[str, Any]]:
    """Start a server from ``tree`` (None: this checkout), open its sessions, run the HTTP
    phases into ``results["phases"]``, stop it; the sessions kept for pgbench."""
    server = start_server(env, args.workers, workdir, tree)
    try:
        started = time.perf_counter()
        vendor_rows, pgb_rows, deliver_rows = asyncio.run(
            open_sessions(
                server.url,
                info["key"],
                info["model_id"],
                [
                    (args.vendors, args.items),
                    (pgb_clients if "pgbench" in phases else 0, args.pgbench_items),
                    (n_deliver, args.deliver_items),
                ],
            )
        )
        short = [
            r
            for rows, asked in (
                (vendor_rows, args.items),
                (pgb_rows, args.pgbench_items),
                (deliver_rows, args.deliver_items),
            )
            for r in rows
            if r["n_items"] < asked
        ]
        print(
            f"opened {len(vendor_rows) + len(pgb_rows) + len(deliver_rows)} sessions in "
            f"{time.perf_counter() - started:.1f} s"
            + (f" ({len(short)} got fewer items than asked)" if short else ""),
            flush=True,
        )
        if deliver_rows:
            asyncio.run(widen_pending_window(url, deliver_rows))
        asyncio.run(analyze(url))
        vendors = [Vendor(r["token"], r["session_id"]) for r in vendor_rows]
        deliverers = [Vendor(r["token"], r["session_id"]) for r in deliver_rows]
        profile_dir = Path(args.profile) if args.profile else None
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
        cpu_groups = {"server": [server.process.pid], **cpu_services}
        for phase in ("whoami", "next", "deliver", "cycle", "paced"):
            if phase not in phases:
                continue
            pace_s = 0.0
            if phase == "paced":
                saturated = results["phases"]["cycle"]["requests"]["answer"]["per_s"]
                pace_s = len(vendors) / (args.paced_share * saturated)
                results["paced_rate"] = args.paced_share * saturated
            print(
                f"phase {phase}: {args.warmup:g} s warm-up + {args.duration:g} s"
                + (f" at {len(vendors) / pace_s:.1f} cycles/s" if pace_s else "")
                + " ...",
                flush=True,
            )
            results["phases"][phase] = run_phase(
                phase,
                deliverers if phase == "deliver" else vendors,
                server.url,
                args,
                cpu_groups,
                pace_s=pace_s,
                profile_to=profile_dir / f"{phase}.txt" if profile_dir else None,
            )
            if profile_dir is not None and (profile_dir / f"{phase}.txt").exists():
                results["phases"][phase]["top_frames"] = top_frames(profile_dir / f"{phase}.txt")
    finally:
        server.stop()
        if args.keep_log:
            print(server.log.read_text()[-5000:])
        log_text = server.log.read_text()
        if "Traceback" in log_text or "ERROR" in log_text:
            results["notes"].append(f"server log has errors; tail:\n{log_text[-2000:]}")
    return pgb_rows


def main() -> None:
    install_test_keyring()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vendors", type=int, default=200, help="concurrent simulated vendors")
    parser.add_argument("--items", type=int, default=150, help="items per vendor session (K)")
    parser.add_argument(
        "--deliver-items",
        type=int,
        default=120,
        help="items per session of the deliver phase (each next delivers one)",
    )
    parser.add_argument(
        "--paced-share",
        type=float,
        default=0.5,
        help="the paced phase's rate as a share of the cycle phase's (saturated) rate",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="py-spy the server's workers in each phase (collapsed stacks into DIR, top "
        "frames printed); the sampling costs the server some CPU",
    )
    parser.add_argument("--workers", type=int, default=2, help="proctor serve --workers")
    parser.add_argument("--duration", type=int, default=20, help="measured seconds/phase")
    parser.add_argument("--warmup", type=float, default=5.0, help="warm-up seconds/phase")
    parser.add_argument("--client-procs", type=int, default=2, help="client processes")
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="raw: minimal HTTP/1.1 keep-alive client on httptools (light); "
        "httpx: httpx.AsyncClient (about 5x the CPU per request)",
    )
    parser.add_argument(
        "--pgbench-clients", type=int, default=None, help="pgbench -c (default: --vendors)"
    )
    parser.add_argument("--pgbench-threads", type=int, default=2, help="pgbench -j")
    parser.add_argument(
        "--pgbench-items",
        type=int,
        default=20,
        help="items per pgbench session (lookups cycle through them)",
    )
    parser.add_argument(
        "--phases",
        default="whoami,next,deliver,cycle,paced,pgbench",
        help="comma-separated subset of whoami,next,deliver,cycle,paced,pgbench "
        "(paced needs cycle)",
    )
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        help="extra postgresql.conf line name=value (repeatable)",
    )
    parser.add_argument(
        "--baseline-tree",
        metavar="PATH",
        type=Path,
        help="also run the HTTP phases first against a server from this checkout "
        "(PYTHONPATH=PATH, same venv) and print both with the ratios",
    )
    parser.add_argument(
        "--micro-audit",
        metavar="ROWS",
        type=int,
        default=0,
        help="also time ROWS audit rows through each tree's AuditWriter, and the hashing",
    )
    parser.add_argument(
        "--micro-rounds",
        metavar="N",
        type=int,
        default=5,
        help="rounds of --micro-audit, the trees alternating; the median is reported",
    )
    parser.add_argument("--keep-log", action="store_true", help="print the server log tail")
    parser.add_argument(
        "--json", metavar="FILE", help="also write the results as JSON ('-': stdout)"
    )
    args = parser.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    pgb_clients = args.pgbench_clients or args.vendors

    from server.database import upgrade
    from tests.support.services import find_redis_server, postgres_server, redis_server

    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline_tree is not None:
        if not (args.baseline_tree / "server" / "app.py").is_file():
            parser.error(f"--baseline-tree {args.baseline_tree}: not a Proctor checkout")
        trees.insert(0, ("baseline", args.baseline_tree.resolve()))
    with_redis = find_redis_server() is not None

    results: dict[str, Any] = {
        "config": {
            "vendors": args.vendors,
            "items": args.items,
            "workers": args.workers,
            "duration": args.duration,
            "warmup": args.warmup,
            "client_procs": args.client_procs,
            "client": args.client,
            "pgbench_clients": pgb_clients,
            "pgbench_threads": args.pgbench_threads,
            "cpus": os.cpu_count(),
        },
        "phases": {},
        "trees": {},
        "notes": [] if with_redis else ["no redis-server: in-memory rate-limit counters"],
    }
    with (
        postgres_server(settings=pg_settings(args)) as pg,
        redis_server() if with_redis else contextlib.nullcontext() as redis,
        tempfile.TemporaryDirectory(prefix="bench-delivery-") as tmp,
    ):
        workdir = Path(tmp)
        n_deliver = args.vendors if "deliver" in phases else 0
        needed = (
            args.vendors * args.items
            + n_deliver * args.deliver_items
            + pgb_clients * args.pgbench_items
        )
        databases: dict[str, tuple[str, dict[str, Any]]] = {}
        for label, tree in trees:  # each tree on a database of its own schema
            name = "bench" if tree is None else "bench_baseline"
            pg.create_database(name)
            tree_url = pg.url(name)
            if tree is None:
                upgrade(tree_url)
            else:
                upgrade_from(tree, tree_url)
            tree_info = asyncio.run(seed(tree_url, math.ceil(needed * 1.2)))
            print(
                f"{label}: seeded {tree_info['families']} item families in "
                f"{tree_info['seed_s']:.1f} s (needed {needed})",
                flush=True,
            )
            asyncio.run(analyze(tree_url))
            databases[label] = (tree_url, tree_info)
        url, info = databases["this tree"]
        env = {
            "PROCTOR_DATABASE_URL": url,
            **({"PROCTOR_REDIS_URL": redis.url} if redis is not None else {}),
            "PROCTOR_JWT_SECRET": JWT_SECRET,
            "PROCTOR_BANK_KEYS": TEST_BANK_KEYS,
            "PROCTOR_MAX_CONCURRENT_SESSIONS": str(10 * (2 * args.vendors + pgb_clients)),
            "PROCTOR_MAX_SESSIONS_PER_PERIOD": str(100 * (2 * args.vendors + pgb_clients)),
            "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000000",
            "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "100000000",
            "PROCTOR_MAX_SESSION_ITEMS": str(
                max(5000, args.items, args.pgbench_items, args.deliver_items)
            ),
        }
        postmaster = int((pg.socket_dir / "data" / "postmaster.pid").read_text().split()[0])
        redis_pids = (
            [
                int(p)
                for p in subprocess.run(
                    ["pgrep", "-f", f"redis-server.*{redis.port}"], capture_output=True, text=True
                ).stdout.split()
            ]
            if shutil.which("pgrep") and redis is not None
            else []
        )
        if args.micro_audit:
            results["micro_audit"] = micro_audit_rounds(
                databases, trees, args.micro_audit, args.micro_rounds, workdir
            )
        for label, tree in trees:
            results["phases"] = {}
            results["trees"][label] = {"tree": str(tree or "."), "phases": results["phases"]}
            print(f"server from {label} ({tree or 'this checkout'})", flush=True)
            tree_url, tree_info = databases[label]
            pgb_rows = run_tree(
                results,
                args,
                phases,
                {**env, "PROCTOR_DATABASE_URL": tree_url},
                workdir,
                tree,
                tree_url,
                tree_info,
                pgb_clients,
                n_deliver,
                {"postgres": [postmaster], "redis": redis_pids},
            )
        if "pgbench" in phases:
            asyncio.run(prepare_pgbench_sessions(url, pgb_rows))
            print(
                f"pgbench: -c {pgb_clients} -j {args.pgbench_threads} -T {args.duration:g} ...",
                flush=True,
            )
            results["pgbench"] = run_pgbench(
                pg,
                "bench",
                info,
                pgb_clients,
                args,
                workdir,
                {"postgres": [postmaster]},
            )
        results["rows"] = asyncio.run(count_rows(url))

    ph = results["phases"]

    def rate(phase: str, kind: str) -> float | None:
        value: float | None = ph.get(phase, {}).get("requests", {}).get(kind, {}).get("per_s")
        return value

    answer_rate = rate("cycle", "answer")
    next_rate = rate("next", "next")
    deliver_rate = rate("deliver", "deliver")
    next_in_cycle = rate("cycle", "next")
    whoami_rate = rate("whoami", "whoami")
    tps = results.get("pgbench", {}).get("tps")
    paced = ph.get("paced", {}).get("requests", {})
    paced_p99 = max((paced[k]["p99_ms"] for k in ("next", "answer") if k in paced), default=None)
    results["ratios"] = {
        "A submit/pgbench": {
            "value": answer_rate / tps if answer_rate and tps else None,
            "target": TARGET_A,
            "what": f"answer req/s {answer_rate or 0:.1f} / pgbench tps {tps or 0:.1f} "
            f"(stretch {STRETCH_A})",
        },
        "B next-delivering/whoami": {
            "value": deliver_rate / whoami_rate if deliver_rate and whoami_rate else None,
            "target": TARGET_B,
            "what": f"deliver-phase next req/s {deliver_rate or 0:.1f} / whoami req/s "
            f"{whoami_rate or 0:.1f}",
        },
        "B' next-pending/whoami (info)": {
            "value": next_rate / whoami_rate if next_rate and whoami_rate else None,
            "target": TARGET_B,
            "what": f"next req/s {next_rate or 0:.1f} (pending item again) / whoami req/s",
        },
        "B'' cycle next/whoami (info)": {
            "value": next_in_cycle / whoami_rate if next_in_cycle and whoami_rate else None,
            "target": TARGET_B,
            "what": f"cycle-phase next req/s {next_in_cycle or 0:.1f} / whoami req/s "
            "(half of the cycle's requests)",
        },
    }
    if paced_p99 is not None:
        results["latency_target"] = {
            "value": paced_p99,
            "target": TARGET_P99_MS,
            "what": f"p99 of next and answer at {results.get('paced_rate', 0):.1f} cycles/s "
            f"({args.paced_share:g} x the cycle phase's {answer_rate or 0:.1f})",
        }
    for phase, r in ph.items():
        if r["exhausted_sessions"]:
            results["notes"].append(
                f"{phase}: {r['exhausted_sessions']} vendor sessions ran out of items; "
                "raise --items"
            )
        if r.get("late_cycles"):
            results["notes"].append(
                f"{phase}: {r['late_cycles']} cycles started more than one period late"
            )
        if r["errors"] or r["task_failures"]:
            results["notes"].append(f"{phase}: errors {r['errors']} failures {r['task_failures']}")
        busiest = max(r["client_process_cores"], default=0)
        if busiest > 0.85:
            results["notes"].append(
                f"{phase}: a client process used {busiest:.2f} cores: the client may be the "
                "bottleneck; try more --client-procs"
            )
    print_report(results)
    print_comparison(results)
    if args.json:
        text = json.dumps(results, indent=2, default=str)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
