"""Benchmark: bank import throughput and 1,000-item sampling on a 1,000,000-item bank.

Run: ``python tests/benchmarks/bench_bank.py [--items 1000000] [--repeats 100]``
(not collected by pytest). Starts its own PostgreSQL from the installed binaries, with
durable settings (fsync, synchronous_commit and full-page writes on), and prints:

* import throughput (items/s) of the synthetic bank through the real importer
  (canonical JSONL file -> reader -> validation -> hashing -> near-duplicate index ->
  COPY), and of the real MMLU-Pro file with augmentation;
* median and p95 time to plan, draw and persist one 1,000-item sample for an organisation
  that has already been served 20% of the bank, next to ``ORDER BY random() LIMIT 1000``
  over the same rows (with the same exposure exclusion, which the baseline also needs).

Bank: 10 disciplines x 6 question types x 50 sub-disciplines, items spread evenly.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import string
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.exposure import record_exposure
from bank.formats import read_records
from bank.importer import import_records
from bank.models import Exposure, Item
from bank.sampling.service import draw_sample, persist_sample
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
MMLU = Path(__file__).resolve().parents[3] / "shared" / "data" / "mmlu_pro" / "items.jsonl"


def write_synthetic_bank(path: Path, n_items: int) -> None:
    """Canonical JSONL over 10 x 6 x 50 cells, round-robin; each question is a dozen words
    drawn from a 20,000-word vocabulary, so questions are distinct (not one template)."""
    rng = random.Random(7)
    vocabulary = [
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(20_000)
    ]
    cells = [(d, t, s) for d in range(10) for t in QTYPES for s in range(50)]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_items):
            d, t, s = cells[i % len(cells)]
            record = {
                "discipline": f"discipline-{d}",
                "subdiscipline": f"sub-{d}-{s}",
                "qtype": t,
                "question": " ".join(rng.choices(vocabulary, k=12)) + f" (#{i})?",
                "answer": " ".join(rng.choices(vocabulary, k=3)),
                "language": "en",
            }
            if t == "multiple_choice":
                record["options"] = [" ".join(rng.choices(vocabulary, k=2)) for _ in range(4)]
                record["answer"] = "B"
            out.write(json.dumps(record) + "\n")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<46} median {statistics.median(ms):8.2f} ms   p95 {percentile(ms, 0.95):8.2f} ms"
        f"   (n={len(ms)})"
    )


async def import_file(url: str, path: Path, fmt: str, augment: bool) -> tuple[int, float]:
    engine = create_engine(url)
    started = time.perf_counter()
    async with unit_of_work(engine) as session:
        report = await import_records(session, read_records(path, fmt), augment=augment)
    elapsed = time.perf_counter() - started
    await engine.dispose()
    return report.items_added, elapsed


async def expose_share(url: str, share: float) -> uuid.UUID:
    """Create the organisation and serve it ``share`` of the bank's families."""
    engine = create_engine(url)
    async with unit_of_work(engine) as session:
        org = await create_org(session, name="bench-org")
        ids = list((await session.execute(select(Item.id).order_by(Item.id))).scalars())
    step = round(1 / share)
    served = ids[::step]
    for start in range(0, len(served), 20_000):
        async with unit_of_work(engine) as session:
            await record_exposure(session, org_id=org.id, item_ids=served[start : start + 20_000])
    await engine.dispose()
    return org.id


async def time_sampling(url: str, org_id: uuid.UUID, repeats: int) -> dict[str, list[float]]:
    engine = create_engine(url, pool_size=2)
    timings: dict[str, list[float]] = {"draw": [], "draw+persist": []}
    exposed_hits = 0
    for _ in range(repeats):
        async with unit_of_work(engine) as session:
            started = time.perf_counter()
            sample = await draw_sample(session, org_id=org_id, n=1000)
            drawn = time.perf_counter()
            await persist_sample(session, org_id=org_id, sample=sample)
            await session.flush()
        finished = time.perf_counter()  # includes COMMIT
        assert len(sample.items) == 1000 and sample.shortfall == {"unplaced": 0}
        assert len({i.family_id for i in sample.items}) == 1000
        exposed_hits += await _count_exposed(engine, org_id, [i.family_id for i in sample.items])
        timings["draw"].append(drawn - started)
        timings["draw+persist"].append(finished - started)
    assert exposed_hits == 0, "a sample contained an exposed family"
    last = Counter(i.discipline for i in sample.items)
    assert max(last.values()) - min(last.values()) <= 1
    await engine.dispose()
    return timings


async def analyze(url: str) -> None:
    """Refresh planner statistics after the bulk load, as autovacuum would shortly."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.exec_driver_sql("ANALYZE")
    await engine.dispose()


async def _count_exposed(engine: AsyncEngine, org_id: uuid.UUID, families: list[uuid.UUID]) -> int:
    async with unit_of_work(engine) as session:
        return int(
            (
                await session.execute(
                    select(func.count()).where(
                        Exposure.org_id == org_id, Exposure.family_id.in_(families)
                    )
                )
            ).scalar_one()
        )


async def time_baseline(url: str, org_id: uuid.UUID, repeats: int) -> list[float]:
    engine = create_engine(url)
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
            assert len(rows) == 1000
    await engine.dispose()
    return timings


async def main_async(url: str, args: argparse.Namespace, workdir: Path) -> None:
    bank_file = workdir / "bank.jsonl"
    write_synthetic_bank(bank_file, args.items)
    added, seconds = await import_file(url, bank_file, "jsonl", augment=False)
    print(
        f"import synthetic bank: {added} items in {seconds:.1f} s = {added / seconds:,.0f} items/s"
    )
    org_id = await expose_share(url, 0.2)
    print("20% of the bank's families served to the organisation")
    await analyze(url)
    # A server process does not carry a million-row import's garbage: collect it and keep the
    # collector from rescanning what is left, so the timings are of sampling alone.
    gc.collect()
    gc.freeze()
    timings = await time_sampling(url, org_id, args.repeats)
    print(summary("plan + draw (1,000 items)", timings["draw"]))
    print(summary("plan + draw + persist + commit (1,000 items)", timings["draw+persist"]))
    baseline = await time_baseline(url, org_id, args.baseline_repeats)
    print(summary("ORDER BY random() LIMIT 1000 (query only)", baseline))
    ratio = statistics.median(baseline) / statistics.median(timings["draw+persist"])
    print(f"median ratio baseline / ours: {ratio:.1f}x")
    if MMLU.is_file():
        added, seconds = await import_file(url, MMLU, "mmlu_pro", augment=True)
        print(
            f"import MMLU-Pro with augmentation: {added} items in {seconds:.1f} s = "
            f"{added / seconds:,.0f} items/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--baseline-repeats", type=int, default=10)
    args = parser.parse_args()
    install_test_keyring()
    with postgres_server(settings=DURABLE) as server, tempfile.TemporaryDirectory() as tmp:
        server.create_database("bench")
        url = server.url("bench")
        upgrade(url)
        asyncio.run(main_async(url, args, Path(tmp)))


if __name__ == "__main__":
    main()
