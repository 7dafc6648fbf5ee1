"""Benchmark: the leaderboard's cold build and warm ``GET /v1/leaderboard`` against the
number of verdicts, with the old per-request computation as the baseline in the same run.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    flock /tmp/bench.lock python tests/benchmarks/bench_leaderboard.py \\
        [--sizes 10000,100000,1000000] [--models 60] [--warm 30] \\
        [--baseline-up-to 100000] [--profile] [--json out.json]

Targets: warm ``GET /v1/leaderboard`` <= 50 ms; a cold rebuild at 1,000,000
verdicts <= 5 s and <= 1 GiB, off the request path.

What runs, per size (a database of its own on one throwaway durable PostgreSQL):

1. the data: ``leaderboard_data.seed`` (``--models`` models x sessions x items, one verdict
   each of one judge, written by SQL), then ``VACUUM ANALYZE``;
2. the cold build, in a fresh subprocess each (``--child build``): ``configured_leaderboard``
   as the server computes it (2,000 resamples), wall time and the process's peak RSS
   (``ru_maxrss``; the RSS after imports is printed beside it); the baseline is the same
   build with the fixed sessions read row by row (the code before the aggregates), up to
   ``--baseline-up-to`` verdicts (it takes about 25 s and GBs at 1,000,000). The data
   version's read, new (the change counter) and old (counts over the tables), is timed too;
3. ``proctor serve`` (one worker) on the database: the first GET (builds the board in a
   thread), ``--warm`` warm GETs (median and p95 of the client's wall time over real HTTP
   on 127.0.0.1), and one GET right after a new verdict written by another connection (it
   waits for the rebuild: the cache never serves a board older than a committed change).
   The baseline of the warm GET is the old route's cost: the build before this change
   recomputed on every request (its time from step 2).

``--profile`` records the new cold build at the largest size with py-spy and prints the
frames with the most samples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DURABLE = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "shared_buffers": "1GB",
    "max_wal_size": "8GB",
    "work_mem": "64MB",
}
WARM_TARGET_MS = 50.0
COLD_TARGET_S = 5.0
MEMORY_TARGET_MB = 1024.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def judges_json(judge: str) -> str:
    return json.dumps([{"name": judge, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}])


# --------------------------------------------------------------------------- #
# Child: one cold build in a fresh process
# --------------------------------------------------------------------------- #


async def child_build(url: str, old: bool) -> dict[str, Any]:
    from sqlalchemy import select

    from server.database import create_engine, unit_of_work
    from server.leaderboard import cache, inputs, service
    from server.scoring.assignment import JudgeAssignment
    from tests.benchmarks.leaderboard_data import JUDGE
    from tests.support.api import test_settings

    if old:
        vars(inputs)["can_aggregate"] = lambda *_a, **_k: False  # the fixed sessions row by row
    phases = timed_phases(service)
    settings = test_settings(url, judges=json.loads(judges_json(JUDGE)))
    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as db:
            await db.execute(select(1))  # the connection, before the clock
            before = rss_mb()
            started = time.perf_counter()
            data = await service.configured_leaderboard(
                db, settings=settings, judges=JudgeAssignment.single(JUDGE), diagnostics=True
            )
            seconds = time.perf_counter() - started
            version_ms = []
            for reader in (cache.data_version, cache._counted_version):
                await reader(db)
                t = time.perf_counter()
                for _ in range(5):
                    await reader(db)
                version_ms.append((time.perf_counter() - t) / 5 * 1000)
    finally:
        await engine.dispose()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": seconds,
        "peak_rss_mb": peak,
        "rss_before_mb": before,
        "rows": len(data.board.rows),
        "version_ms": version_ms[0],
        "counted_version_ms": version_ms[1],
        "phases_s": phases,
    }


def timed_phases(service: Any) -> dict[str, float]:
    """Wall seconds of the build's two big parts: reading the fixed sessions (the database
    and the assembly) and the statistics (bootstrap, groups, disciplines, usage)."""
    phases: dict[str, float] = {}
    read, build = service.fixed_scores, service.build_leaderboard

    async def timed_read(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await read(*args, **kwargs)
        finally:
            phases["read_fixed_sessions"] = time.perf_counter() - started

    def timed_build(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return build(*args, **kwargs)
        finally:
            phases["statistics"] = time.perf_counter() - started

    vars(service).update(fixed_scores=timed_read, build_leaderboard=timed_build)
    return phases


def run_child(url: str, *, old: bool, profile: Path | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", "build", "--url", url]
    if old:
        cmd.append("--old")
    if profile is not None:
        cmd = ["py-spy", "record", "-r", "200", "-f", "raw", "-o", str(profile), "--", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or done.stdout)[-600:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def top_frames(raw: Path, n: int = 14) -> list[str]:
    """Frames by the share of the build's CPU samples they are on the stack of (our code
    and the libraries under it), from py-spy's raw output; time waiting for PostgreSQL is
    not sampled (``phases_s`` has the wall time)."""
    counts: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if "configured_leaderboard" not in stack:
            continue  # imports and set-up
        samples = int(number)
        total += samples
        seen = set()
        for frame in stack.split(";"):
            name = frame.split(" (")[0]
            where = frame.rsplit("/", 1)[-1].rstrip(")") if "/" in frame else ""
            label = f"{name} ({where})"
            if label not in seen and "importlib" not in frame and "<frozen" not in frame:
                seen.add(label)
                counts[label] += samples
    skip = ("<module>", "run (", "Runner.", "BaseEventLoop", "main (", "child_build", "Handle.")
    skip = (*skip, "configured_leaderboard", "timed_", "greenlet", "_run_once", "Context.run")
    lines = [
        f"{share / total * 100:5.1f}%  {label}"
        for label, share in counts.most_common(60)
        if not label.startswith(skip)
    ]
    return lines[:n]


# --------------------------------------------------------------------------- #
# The HTTP server
# --------------------------------------------------------------------------- #


def time_http(
    url: str, admin_key: str, session_id: str, warm: int, workdir: Path
) -> dict[str, Any]:
    import httpx

    from tests.benchmarks.leaderboard_data import JUDGE
    from tests.support.api import JWT_SECRET, live_server

    env = {
        "PROCTOR_DATABASE_URL": url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_JUDGES": judges_json(JUDGE),
        "PROCTOR_SCORING_IN_PROCESS": "false",
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "1000000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "1000000",
        "PROCTOR_JUDGE_DRIFT_INTERVAL_S": "0",
    }
    with live_server(env, workdir) as server, httpx.Client(base_url=server.url, timeout=600) as c:
        token = c.post("/v1/auth/token", json={"api_key": admin_key}).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}

        def get() -> tuple[float, int]:
            started = time.perf_counter()
            response = c.get("/v1/leaderboard", headers=headers)
            assert response.status_code == 200, response.text[:300]
            return (time.perf_counter() - started) * 1000, len(response.content)

        first_ms, size = get()
        warm_ms = [get()[0] for _ in range(warm)]
        asyncio.run(add_verdict(url, session_id))
        fresh_ms, _ = get()
        after_ms = get()[0]
    return {
        "first_ms": first_ms,
        "bytes": size,
        "warm_median_ms": statistics.median(warm_ms),
        "warm_p95_ms": sorted(warm_ms)[min(len(warm_ms) - 1, round(0.95 * (len(warm_ms) - 1)))],
        "after_verdict_ms": fresh_ms,
        "warm_again_ms": after_ms,
    }


async def add_verdict(url: str, session_id: str) -> None:
    """A human verdict on one answer (a review result), by a connection of its own."""
    from sqlalchemy import text

    from server.database import create_engine

    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO verdicts (session_id, position, judge, prompt_version, score, "
                    "method, needs_review, calls, prompt_tokens, completion_tokens, cost, "
                    "latency_ms, created_at) VALUES (CAST(:s AS uuid), 0, 'human:bench', "
                    "'human', 0, 'human', false, 0, 0, 0, 0, 0, now())"
                ),
                {"s": session_id},
            )
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def shape(verdicts: int, models: int) -> tuple[int, int]:
    """(sessions per model, items per session) for about ``verdicts`` verdicts."""
    sessions = max(1, round(verdicts / (models * 1000)))
    return sessions, max(1, round(verdicts / (models * sessions)))


def measure_size(
    server: Any, verdicts: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    from server.database import upgrade
    from tests.benchmarks.leaderboard_data import seed

    name = f"lb_{verdicts}"
    server.create_database(name)
    url = server.url(name)
    upgrade(url)
    sessions, items = shape(verdicts, args.models)
    started = time.perf_counter()
    seeded = asyncio.run(
        seed(url, models=args.models, sessions_per_model=sessions, items_per_session=items)
    )
    out: dict[str, Any] = {
        "verdicts": seeded.verdicts,
        "shape": f"{args.models} x {sessions} x {items}",
        "seed_s": time.perf_counter() - started,
    }
    print(f"\n{seeded.verdicts:,} verdicts ({out['shape']}) seeded in {out['seed_s']:.1f} s")
    out["new"] = run_child(url, old=False)
    print(f"  cold build (aggregates):  {out['new']}")
    if verdicts <= args.baseline_up_to:
        out["old"] = run_child(url, old=True)
        print(f"  cold build (row by row):  {out['old']}")
    out["http"] = time_http(
        url, seeded.admin_key, str(seeded.session_ids[0]), args.warm, workdir / name
    )
    print(f"  HTTP: {out['http']}")
    return out


def report(results: list[dict[str, Any]], profile: list[str]) -> None:
    print("\n" + "=" * 100)
    print(
        f"leaderboard -- {datetime.now(UTC).isoformat(timespec='seconds')}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}"
    )
    head = (
        "| verdicts | cold build s (target <= 5 at 1M) | peak RSS MB (<= 1024) | baseline "
        "build s / peak MB | warm GET median / p95 ms (<= 50) | baseline GET ms | GET after a "
        "verdict ms | version read ms new / old |"
    )
    print(head)
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        new, old, http = r["new"], r.get("old", {}), r["http"]
        base = (
            f"{old['seconds']:.2f} / {old['peak_rss_mb']:.0f}"
            if "seconds" in old
            else ("not run" if not old else "failed")
        )
        base_get = f"{old['seconds'] * 1000:.0f}" if "seconds" in old else "-"
        print(
            f"| {r['verdicts']:,} | {new.get('seconds', float('nan')):.2f} | "
            f"{new.get('peak_rss_mb', float('nan')):.0f} (after imports "
            f"{new.get('rss_before_mb', float('nan')):.0f}) | {base} | "
            f"{http['warm_median_ms']:.1f} / {http['warm_p95_ms']:.1f} | {base_get} | "
            f"{http['after_verdict_ms']:.0f} | {new.get('version_ms', float('nan')):.1f} / "
            f"{new.get('counted_version_ms', float('nan')):.1f} |"
        )
    print("\ncold build by part (wall time):")
    for r in results:
        phases = r["new"].get("phases_s", {})
        print(f"  {r['verdicts']:,}: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    if profile:
        print(
            "\nprofile of the cold build at the largest size (py-spy, share of the build's CPU "
            "samples; waiting for PostgreSQL is not sampled):"
        )
        for line in profile:
            print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--baseline-up-to", type=int, default=100_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["build"])
    parser.add_argument("--url")
    parser.add_argument("--old", action="store_true")
    args = parser.parse_args()

    from tests.support.bank_keys import install_test_keyring

    install_test_keyring()
    if args.child:
        print(json.dumps(asyncio.run(child_build(args.url, args.old))))
        return
    from tests.support.services import postgres_server

    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    profile: list[str] = []
    with postgres_server(settings=DURABLE) as server, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for verdicts in sizes:
            (workdir / f"lb_{verdicts}").mkdir()
            results.append(measure_size(server, verdicts, args, workdir))
        if args.profile:
            raw = workdir / "profile.txt"
            run_child(server.url(f"lb_{sizes[-1]}"), old=False, profile=raw)
            profile = top_frames(raw) if raw.exists() else ["(py-spy failed)"]
    report(results, profile)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "profile": profile}, indent=2))


if __name__ == "__main__":
    main()
