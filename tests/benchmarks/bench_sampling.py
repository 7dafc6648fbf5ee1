"""Benchmark: plan, draw and persist one 1,000-item sample on a 1,000,000-item bank.

Run: ``flock /tmp/bench.lock python tests/benchmarks/bench_sampling.py [--items 1000000]
[--repeats 200] [--profile]`` (not collected by pytest). Starts its own PostgreSQL with
durable settings (fsync, synchronous_commit and full-page writes on), builds the bank
server-side (``INSERT ... SELECT generate_series``: 10 evaluated disciplines of the
taxonomy x 6 question types x 50 sub-disciplines, items spread evenly, clear-text answers
read as legacy values), serves 20% of the families to an organisation, then prints the
median and p95 of

* plan + draw (``draw_sample``) and plan + draw + persist + commit (``allocate_sample``);
* ``ORDER BY random() LIMIT 1000`` over the same rows with the same exposure exclusion,
  measured in the same run as the baseline.

``--profile`` runs the draws under cProfile and prints the top frames by own time.
``--previous FILE`` also times another version of ``bank/sampling/service.py`` (e.g.
``git show 1a3ebf8:bank/sampling/service.py > /tmp/previous.py``) in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.util
import pstats
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.sampling import service
from bank.taxonomy import DEFAULT_TAXONOMY
from server.database import create_engine, unit_of_work, upgrade
from server.orgs.service import create_org
from tests.support.bank_keys import install_test_keyring
from tests.support.services import postgres_server

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
QTYPES = ("multiple_choice", "true_false", "fill_in", "short_answer", "calculation", "essay")
SUBDISCIPLINES = 50
SAMPLE = 1000


def disciplines() -> list[str]:
    return [d.key for d in DEFAULT_TAXONOMY if d.evaluated]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<46} median {statistics.median(ms):8.2f} ms   p95 {percentile(ms, 0.95):8.2f} ms"
        f"   (n={len(ms)})"
    )


async def build_bank(engine: AsyncEngine, n_items: int) -> None:
    """Strata and items in three statements; counters set as the importer keeps them."""
    keys = disciplines()
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO strata (discipline, qtype, subdiscipline, n_slots, n_active)"
                " SELECT d, t, d || '-sub-' || s, 0, 0"
                " FROM unnest(CAST(:ds AS text[])) d, unnest(CAST(:ts AS text[])) t,"
                " generate_series(0, :subs - 1) s ORDER BY 1, 2, 3"
            ),
            {"ds": keys, "ts": list(QTYPES), "subs": SUBDISCIPLINES},
        )
        # Item i goes to stratum i mod n_strata at rank i div n_strata (round-robin).
        await conn.execute(
            text(
                "WITH s AS (SELECT id, discipline, qtype, subdiscipline,"
                "  row_number() OVER (ORDER BY id) - 1 AS k, count(*) OVER () AS n FROM strata),"
                " g AS (SELECT i, md5(i::text)::uuid AS id FROM generate_series(0, :n - 1) i)"
                " INSERT INTO items (id, family_id, variant, stratum_id, slot, discipline,"
                "  subdiscipline, qtype, question, answer, language, status, content_hash,"
                "  created_at)"
                " SELECT g.id, g.id, 'original', s.id, (s.id::bigint << 32) | (g.i / s.n),"
                "  s.discipline, s.subdiscipline, s.qtype, 'question ' || g.i || '?', 'A', 'en',"
                "  'active', md5('h' || g.i), now()"
                " FROM g JOIN s ON s.k = g.i % s.n"
            ),
            {"n": n_items},
        )
        await conn.execute(
            text(
                "UPDATE strata SET n_slots = c.n, n_active = c.n FROM"
                " (SELECT stratum_id, count(*) AS n FROM items GROUP BY stratum_id) c"
                " WHERE c.stratum_id = strata.id"
            )
        )


async def expose_share(engine: AsyncEngine, every: int) -> uuid.UUID:
    """Create the organisation and serve it one family in ``every`` (with its counters)."""
    async with unit_of_work(engine) as session:
        org = await create_org(session, name="bench-org")
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO exposures (org_id, family_id, item_id, exposed_at, delivered_at)"
                " SELECT :org, family_id, id, now(), now() FROM items"
                " WHERE (slot & 4294967295) % :every = 0"
            ),
            {"org": org.id, "every": every},
        )
        await conn.execute(
            text(
                "INSERT INTO org_stratum_exclusions (org_id, stratum_id, n_items)"
                " SELECT :org, i.stratum_id, count(*) FROM exposures e"
                " JOIN items i ON i.family_id = e.family_id AND i.status = 'active'"
                " WHERE e.org_id = :org GROUP BY i.stratum_id"
            ),
            {"org": org.id},
        )
    async with create_engine(str(engine.url), isolation_level="AUTOCOMMIT").connect() as conn:
        await conn.exec_driver_sql("VACUUM ANALYZE")
    return org.id


def load_previous(path: Path) -> ModuleType:
    """Another version of ``bank.sampling.service``, loaded from ``path``."""
    spec = importlib.util.spec_from_file_location("previous_sampling_service", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def time_sampling(
    engine: AsyncEngine,
    org_id: uuid.UUID,
    repeats: int,
    profile: cProfile.Profile | None,
    sampler: ModuleType = service,
) -> dict[str, list[float]]:
    """Each repeat draws once (rolled back) and allocates once (committed)."""
    timings: dict[str, list[float]] = {"draw": [], "allocate": []}
    for _ in range(repeats):
        if profile:
            profile.enable()
        async with unit_of_work(engine) as session:
            started = time.perf_counter()
            sample = await sampler.draw_sample(session, org_id=org_id, n=SAMPLE)
            timings["draw"].append(time.perf_counter() - started)
            await session.rollback()
        started = time.perf_counter()
        async with unit_of_work(engine) as session:
            _, sample = await sampler.allocate_sample(session, org_id=org_id, n=SAMPLE)
        timings["allocate"].append(time.perf_counter() - started)  # includes COMMIT
        if profile:
            profile.disable()
        assert len(sample.items) == SAMPLE and sample.shortfall == {"unplaced": 0}
        assert len({i.family_id for i in sample.items}) == SAMPLE
    per_discipline = Counter(i.discipline for i in sample.items)
    assert max(per_discipline.values()) - min(per_discipline.values()) <= 1
    return timings


async def check_unexposed(engine: AsyncEngine, org_id: uuid.UUID) -> None:
    """No committed sample may hold a family the organisation had been served."""
    async with engine.connect() as conn:
        leaked = await conn.scalar(
            text(
                "SELECT count(*) FROM sample_items si JOIN exposures e"
                " ON e.family_id = si.family_id AND e.org_id = :org AND e.session_id IS NULL"
            ),
            {"org": org_id},
        )
    assert leaked == 0, f"{leaked} sampled items were of exposed families"


async def time_baseline(engine: AsyncEngine, org_id: uuid.UUID, repeats: int) -> list[float]:
    query = text(
        "SELECT i.id FROM items i WHERE i.status = 'active' AND NOT EXISTS ("
        " SELECT 1 FROM exposures e WHERE e.org_id = :org AND e.family_id = i.family_id)"
        " ORDER BY random() LIMIT 1000"
    )
    timings = []
    for _ in range(repeats):
        async with engine.connect() as connection:
            started = time.perf_counter()
            rows = (await connection.execute(query, {"org": org_id})).all()
            timings.append(time.perf_counter() - started)
            assert len(rows) == SAMPLE
    return timings


async def main_async(url: str, args: argparse.Namespace) -> None:
    engine = create_engine(url, pool_size=2)
    started = time.perf_counter()
    await build_bank(engine, args.items)
    org_id = await expose_share(engine, 5)
    built = time.perf_counter() - started
    print(f"bank of {args.items:,} items, 20% of families served: {built:.1f} s")
    gc.collect()
    gc.freeze()
    await time_sampling(engine, org_id, 3, None)  # warm the caches and the statement cache
    profile = cProfile.Profile() if args.profile else None
    timings = await time_sampling(engine, org_id, args.repeats, profile)
    await check_unexposed(engine, org_id)
    print(summary("plan + draw (1,000 items)", timings["draw"]))
    print(summary("plan + draw + persist + commit (1,000 items)", timings["allocate"]))
    if args.previous:
        previous = load_previous(args.previous)
        await time_sampling(engine, org_id, 3, None, previous)
        before = await time_sampling(engine, org_id, args.repeats, None, previous)
        print(summary("previous: plan + draw", before["draw"]))
        print(summary("previous: plan + draw + persist + commit", before["allocate"]))
    baseline = await time_baseline(engine, org_id, args.baseline_repeats)
    print(summary("ORDER BY random() LIMIT 1000 (query only)", baseline))
    ratio = statistics.median(baseline) / statistics.median(timings["allocate"])
    print(f"median ratio baseline / ours (with persist + commit): {ratio:.1f}x")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--baseline-repeats", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--previous", type=Path, help="another service.py to time as well")
    run_on_durable_postgres(main_async, parser.parse_args())


def run_on_durable_postgres(
    work: Callable[[str, argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> None:
    """Run ``work(url, args)`` on a new, migrated database of a throwaway durable
    PostgreSQL server (``DURABLE``), with the test bank keys installed."""
    install_test_keyring()
    with postgres_server(settings=DURABLE) as server:
        server.create_database("bench")
        url = server.url("bench")
        upgrade(url)
        asyncio.run(work(url, args))


if __name__ == "__main__":
    main()
