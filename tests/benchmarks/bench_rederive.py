"""Benchmark: re-derive a recorded 1,000-item sample on a 1,000,000-item bank.

Run: ``flock /tmp/bench.lock python tests/benchmarks/bench_rederive.py [--items 1000000]
[--repeats 10] [--changes 20000]`` (not collected by pytest). Builds the bank and the
organisation's exposure as ``bench_sampling.py`` does (20% of families served), allocates
one sample, then changes the world after it (``--changes`` items retired through
``bank.item_status.change_status``, the sample's families reserved), and prints the median
and p95 of ``bank.sampling.as_of.check_sample`` (rebuilding the state as of the draw,
drawing again, comparing), asserting that it matches.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from sqlalchemy import select, text

from bank.exposure import record_exposure
from bank.item_status import change_status
from bank.models import Item, ItemStatus, Sample
from bank.sampling import service
from bank.sampling.as_of import check_sample
from bank.sampling.rederive import Outcome
from server.database import create_engine, unit_of_work
from tests.benchmarks.bench_sampling import (
    SAMPLE,
    build_bank,
    expose_share,
    percentile,
    run_on_durable_postgres,
    summary,
)


async def main_async(url: str, args: argparse.Namespace) -> None:
    engine = create_engine(url, pool_size=2)
    started = time.perf_counter()
    await build_bank(engine, args.items)
    org_id = await expose_share(engine, 5)
    built = time.perf_counter() - started
    print(f"bank of {args.items:,} items, 20% of families served: {built:.1f} s")
    async with unit_of_work(engine) as session:
        record, drawn = await service.allocate_sample(session, org_id=org_id, n=SAMPLE)
        sample_id = record.id
        await record_exposure(
            session,
            org_id=org_id,
            item_ids=[i.id for i in drawn.items],
            session_id=uuid.uuid4(),
            delivered=False,
        )
    async with unit_of_work(engine) as session:
        retired = list(
            (
                await session.execute(
                    select(Item.id)
                    .where(Item.status == "active")
                    .order_by(Item.id)
                    .limit(args.changes)
                )
            ).scalars()
        )
        await change_status(session, item_ids=retired, to=ItemStatus.RETIRED, actor="bench")
    async with engine.connect() as conn:
        await conn.execute(text("ANALYZE"))
    timings = []
    for _ in range(args.repeats):
        async with unit_of_work(engine) as session:
            sample = await session.get(Sample, sample_id)
            assert sample is not None
            began = time.perf_counter()
            check = await check_sample(session, sample)
            timings.append(time.perf_counter() - began)
            assert check.outcome is Outcome.MATCH, check.comparison
    print(
        summary(f"re-derive + compare ({SAMPLE:,} items, {args.changes:,} retired since)", timings)
    )
    print(
        f"max {max(timings) * 1000:.0f} ms, p95 {percentile(timings, 0.95) * 1000:.0f} ms, "
        f"median {statistics.median(timings) * 1000:.0f} ms"
    )
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--changes", type=int, default=20_000)
    run_on_durable_postgres(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
