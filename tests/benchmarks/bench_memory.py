"""Benchmark: peak RSS of each ``proctor serve`` worker with a 1,000,000-item bank.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    flock /tmp/bench.lock python tests/benchmarks/bench_memory.py [--items 1000000]
        [--baseline-items 5000] [--workers 2] [--vendors 8] [--session-items 40] [--rounds 2]

It starts its own durable PostgreSQL (fsync, synchronous_commit, full_page_writes on) and
Redis (``tests.support.services``) and builds two databases the same way:

* ``big``      -- ``--items`` items (1,000,000), built server-side in three statements
  (``INSERT ... SELECT generate_series``): the taxonomy's evaluated disciplines x 6
  question types x 50 sub-disciplines, items spread evenly over the strata, clear-text
  answers (read as legacy values), strata counters set as the importer keeps them;
* ``baseline`` -- the same with ``--baseline-items`` (5,000): the smallest bank the mix can
  run on (an empty bank cannot open a session), so the difference is what the bank's size
  costs.

Each database gets an evaluator organisation with ``--vendors`` keys and a registered model,
and the operator's organisation with an admin key. Then, for each database in turn, it runs
``proctor serve --workers N`` on 127.0.0.1 and drives the same mix for ``--rounds`` rounds:

* every vendor opens a session of ``--session-items`` items and runs it to the end (``next``
  then ``answer``), with ``GET /v1/sessions``, ``GET /v1/leaderboard`` and ``whoami`` between;
* the admin reads the console (overview, bank, bank items and a search, bank health, models,
  leaderboard, sessions) and ``GET /v1/admin/bank/items``, ``/v1/admin/bank/health``,
  ``/v1/admin/sessions``, ``/v1/leaderboard?view=disciplines``.

It prints each worker's resident set after start-up (``VmRSS``) and at its peak over the
whole run (``VmHWM`` from ``/proc/<pid>/status``), for both databases, against the target
(500 MB per worker), and the HTTP status counts of the mix (non-2xx ones are listed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.taxonomy import DEFAULT_TAXONOMY
from tests.support.bank_keys import TEST_BANK_KEYS, install_test_keyring
from tests.support.console import console_login

JWT_SECRET = "bench-memory-" + "k3Wd8Qz1Lp6Rt0Yv" * 3
TARGET_MB = 500.0
QTYPES = ("multiple_choice", "true_false", "fill_in", "short_answer", "calculation", "essay")
SUBDISCIPLINES = 50
PG_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "256MB",
    "max_connections": "200",
    "max_wal_size": "4GB",
}
CONSOLE_PAGES = (
    "/console",
    "/console/bank",
    "/console/bank/items",
    "/console/bank/items?q=question+12",
    "/console/bank/health",
    "/console/models",
    "/console/leaderboard",
    "/console/sessions",
)
ADMIN_API = (
    "/v1/admin/bank/items?limit=100",
    "/v1/admin/bank/health",
    "/v1/admin/sessions",
    "/v1/leaderboard?view=disciplines",
)


# --------------------------------------------------------------------------- #
# The bank and the accounts
# --------------------------------------------------------------------------- #


async def build_bank(engine: AsyncEngine, n_items: int) -> float:
    """``n_items`` items over the strata of the evaluated disciplines; seconds taken."""
    started = time.perf_counter()
    keys = [d.key for d in DEFAULT_TAXONOMY if d.evaluated]
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO strata (discipline, qtype, subdiscipline, n_slots, n_active)"
                " SELECT d, q, 'sub-' || s, 0, 0 FROM unnest(CAST(:keys AS text[])) d"
                " CROSS JOIN unnest(CAST(:qtypes AS text[])) q"
                " CROSS JOIN generate_series(1, :subs) s"
            ),
            {"keys": keys, "qtypes": list(QTYPES), "subs": SUBDISCIPLINES},
        )
        # item n: stratum (n mod strata), rank (n div strata); choice items carry options
        await conn.execute(
            text(
                "WITH st AS (SELECT id, discipline, qtype, subdiscipline,"
                "   row_number() OVER (ORDER BY id) - 1 AS k, count(*) OVER () AS total"
                "   FROM strata),"
                " n AS (SELECT g, md5('item' || g)::uuid AS id FROM generate_series(0, :n - 1) g)"
                " INSERT INTO items (id, family_id, variant, stratum_id, slot, discipline,"
                "   subdiscipline, qtype, question, options, answer, language, status,"
                "   content_hash, created_at)"
                " SELECT n.id, n.id, 'original', st.id, (st.id::bigint << 32) + n.g / st.total,"
                "   st.discipline, st.subdiscipline, st.qtype,"
                "   'Synthetic question ' || n.g || ': which of the options holds?',"
                "   CASE WHEN st.qtype = 'multiple_choice'"
                '     THEN CAST(\'["one", "two", "three", "four"]\' AS json) END,'
                "   CASE WHEN st.qtype = 'multiple_choice' THEN 'A'"
                "     ELSE 'Reference answer ' || n.g END,"
                "   'en', 'active', md5('content' || n.g), now()"
                " FROM n JOIN st ON st.k = n.g % st.total"
            ),
            {"n": n_items},
        )
        await conn.execute(
            text(
                "UPDATE strata SET n_slots = c.n, n_active = c.n"
                " FROM (SELECT stratum_id, count(*) AS n FROM items GROUP BY stratum_id) c"
                " WHERE strata.id = c.stratum_id"
            )
        )
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM ANALYZE items")
        await conn.exec_driver_sql("ANALYZE")
    return time.perf_counter() - started


@dataclass
class Accounts:
    vendor_keys: list[str]
    admin_key: str
    model_id: str


async def make_accounts(engine: AsyncEngine, vendors: int) -> Accounts:
    from server.auth.service import create_api_key
    from server.database import unit_of_work
    from server.orgs.service import create_org
    from server.registry.models import RegisteredModel

    async with unit_of_work(engine) as db:
        org = await create_org(db, name="bench-vendor")
        keys = [
            (await create_api_key(db, org_id=org.id, role="evaluator"))[1] for _ in range(vendors)
        ]
        model = RegisteredModel(org_id=org.id, name="bench-model", api_snapshot="v1")
        db.add(model)
        operator = await create_org(db, name="bench-operator", operator=True)
        _, admin = await create_api_key(db, org_id=operator.id, role="admin")
        await db.flush()
        return Accounts(keys, admin, str(model.id))


async def prepare(url: str, n_items: int, vendors: int) -> tuple[Accounts, float]:
    from server.database import create_engine

    engine = create_engine(url)
    try:
        seconds = await build_bank(engine, n_items)
        return await make_accounts(engine, vendors), seconds
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- #
# The server and its workers' memory
# --------------------------------------------------------------------------- #


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def workers(self) -> list[int]:
        """The uvicorn worker processes (spawned children running ``spawn_main``)."""
        found = []
        for pid in children(self.process.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline:
                found.append(pid)
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def memory_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` (peak) of ``pid`` in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) / 1024
    return out


def start_server(env_extra: dict[str, str], workers: int, workdir: Path) -> Server:
    from tests.support.ports import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(env_extra)
    port = free_port()
    log = workdir / "serve.log"
    cmd = [sys.executable, "-m", "server", "serve", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", str(workers)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            cmd, env=env, cwd=str(Path(__file__).resolve().parents[2]), stdout=out, stderr=out
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"proctor serve exited:\n{log.read_text()[-3000:]}")
        try:
            httpx.get(server.url + "/v1/whoami", timeout=2.0)
            if len(server.workers()) >= workers:
                # every worker answers only after its lifespan: let each one take requests
                for _ in range(4 * workers):
                    httpx.get(server.url + "/v1/whoami", timeout=5.0)
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"proctor serve did not start:\n{log.read_text()[-3000:]}")


# --------------------------------------------------------------------------- #
# The mix
# --------------------------------------------------------------------------- #


@dataclass
class Tally:
    statuses: Counter[str] = field(default_factory=Counter)
    answered: int = 0

    def note(self, what: str, response: httpx.Response) -> None:
        self.statuses[f"{what} {response.status_code}"] += 1


async def token_for(client: httpx.AsyncClient, key: str) -> dict[str, str]:
    response = await client.post("/v1/auth/token", json={"api_key": key})
    response.raise_for_status()
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


async def vendor(base_url: str, key: str, model_id: str, session_items: int, tally: Tally) -> None:
    """One session from start to end, with the vendor's other reads between items."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        headers = await token_for(client, key)
        created = await client.post(
            "/v1/sessions", json={"model_id": model_id, "n_items": session_items}, headers=headers
        )
        tally.note("create", created)
        if created.status_code != 201:
            return
        sid = created.json()["id"]
        while True:
            item = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
            tally.note("next", item)
            if item.status_code != 200:
                break
            body = item.json()
            answer = {"position": body["position"], "item_id": body["item_id"], "answer": "A"}
            submitted = await client.post(
                f"/v1/sessions/{sid}/answers", json=answer, headers=headers
            )
            tally.note("answer", submitted)
            tally.answered += submitted.status_code == 201
            if body["position"] % 10 == 0:
                for path in ("/v1/sessions", "/v1/leaderboard", "/v1/whoami"):
                    tally.note(path, await client.get(path, headers=headers))


async def admin(base_url: str, key: str, tally: Tally) -> None:
    """The console's pages and the admin's reads, once each."""
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        tally.note("console login", await console_login(client, key))
        for page in CONSOLE_PAGES:
            tally.note(page, await client.get(page))
        headers = await token_for(client, key)
        for path in ADMIN_API:
            tally.note(path, await client.get(path, headers=headers))


async def drive(base_url: str, accounts: Accounts, args: argparse.Namespace) -> Tally:
    tally = Tally()
    for _ in range(args.rounds):
        await asyncio.gather(
            admin(base_url, accounts.admin_key, tally),
            *(
                vendor(base_url, key, accounts.model_id, args.session_items, tally)
                for key in accounts.vendor_keys
            ),
        )
    return tally


@dataclass
class Measured:
    name: str
    items: int
    build_s: float
    started: dict[int, dict[str, float]]
    peak: dict[int, dict[str, float]]
    tally: Tally
    mix_s: float


def measure(
    name: str, url: str, redis_url: str, n_items: int, args: argparse.Namespace
) -> Measured:
    accounts, build_s = asyncio.run(prepare(url, n_items, args.vendors))
    print(f"{name}: {n_items:,} items built in {build_s:.1f} s", flush=True)
    env = {
        "PROCTOR_DATABASE_URL": url,
        "PROCTOR_REDIS_URL": redis_url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_BANK_KEYS": TEST_BANK_KEYS,
        "PROCTOR_MAX_CONCURRENT_SESSIONS": "1000",
        "PROCTOR_MAX_SESSIONS_PER_PERIOD": "100000",
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "100000000",
    }
    with tempfile.TemporaryDirectory(prefix=f"bench-memory-{name}-") as tmp:
        server = start_server(env, args.workers, Path(tmp))
        try:
            workers = server.workers()
            started = {pid: memory_mb(pid) for pid in workers}
            t0 = time.perf_counter()
            tally = asyncio.run(drive(server.url, accounts, args))
            mix_s = time.perf_counter() - t0
            peak = {pid: memory_mb(pid) for pid in workers}
        finally:
            server.stop()
            if args.keep_log:
                print(server.log.read_text()[-4000:])
    return Measured(name, n_items, build_s, started, peak, tally, mix_s)


def report(runs: list[Measured]) -> None:
    print()
    for run in runs:
        statuses = run.tally.statuses.items()
        bad = {k: v for k, v in statuses if not k.split()[-1].startswith(("2", "3"))}
        print(
            f"{run.name}: mix {run.mix_s:.1f} s, {run.tally.answered} answers, "
            f"{sum(run.tally.statuses.values())} requests; non-2xx: {bad or 'none'}"
        )
    print()
    print("| figure | measured | target |")
    print("|---|---|---|")
    for run in runs:
        for n, pid in enumerate(sorted(run.peak), 1):
            after = run.started[pid]["VmRSS"]
            peak = run.peak[pid]["VmHWM"]
            target = f"<= {TARGET_MB:.0f} MB" if run.name == "big" else "(baseline)"
            print(
                f"| worker {n} peak RSS, {run.items:,}-item bank (after start-up "
                f"{after:.0f} MB) | {peak:.0f} MB | {target} |"
            )
    big, base = runs[-1], runs[0]
    delta = max(p["VmHWM"] for p in big.peak.values()) - max(p["VmHWM"] for p in base.peak.values())
    print(f"| largest peak, big bank minus baseline | {delta:+.0f} MB | |")


def main() -> None:
    install_test_keyring()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--baseline-items", type=int, default=5_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vendors", type=int, default=8)
    parser.add_argument("--session-items", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep-log", action="store_true", help="print each server log's tail")
    args = parser.parse_args()

    from server.database import upgrade
    from tests.support.services import postgres_server, redis_server

    runs = []
    with postgres_server(settings=PG_SETTINGS) as pg, redis_server() as redis:
        for name, n_items in (("baseline", args.baseline_items), ("big", args.items)):
            database = f"mem_{name}_{uuid.uuid4().hex[:6]}"
            pg.create_database(database)
            upgrade(pg.url(database))
            runs.append(measure(name, pg.url(database), redis.url, n_items, args))
    report(runs)


if __name__ == "__main__":
    main()
