"""Benchmark: bank import throughput with reference answers sealed at rest, and the cost of
sealing and opening one value.

Run: ``python tests/benchmarks/bench_sealing.py [--items 100000] [--repeats 3]`` (not
collected by pytest). Starts its own PostgreSQL from the installed binaries (durable
settings, as ``bench_import``), writes the synthetic bank of ``bench_import`` and imports it
through the real importer (COPY) into a fresh database per repeat, without augmentation,
adding its disciplines; prints items/s of each repeat and their median, and items per
second of this process's CPU (the importer's Python side, where sealing happens: a figure
that other load on the machine disturbs less than the wall clock). On a tree without
``bank.sealing`` (before encryption at rest) it imports the same way, so the two figures
compare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from bank.formats import read_records
from bank.importer import import_records
from bank.models import Item
from server.database import create_engine, unit_of_work, upgrade
from tests.benchmarks.bench_import import DURABLE, write_synthetic_bank
from tests.support.services import postgres_server

SEALING = type(Item.__table__.c.answer.type).__name__ == "SealedText"
TEST_ENTRY = "bench:" + "QkVOQ0hNQVJLLWtleS1vZi0zMi1ieXRlcy0tLS0tLS0="


async def import_once(url: str, path: Path) -> tuple[int, float, float]:
    """Items added, wall seconds and this process's CPU seconds (PostgreSQL's excluded)."""
    engine = create_engine(url)
    cpu = time.process_time()
    started = time.perf_counter()
    async with unit_of_work(engine) as session:
        report = await import_records(
            session, read_records(path, "jsonl"), augment=False, add_disciplines=True
        )
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    await engine.dispose()
    return report.items_added, elapsed, cpu


def per_value_cost() -> None:
    from bank.sealing import parse_keyring

    keyring = parse_keyring(TEST_ENTRY, source="bench", lines=False)
    text = "ocean river mountain"
    sealed = keyring.seal(text, column="items.answer")
    n = 100_000
    seal_s = timeit.timeit(lambda: keyring.seal(text, column="items.answer"), number=n)
    open_s = timeit.timeit(lambda: keyring.open(sealed, column="items.answer"), number=n)
    print(f"seal one answer: {seal_s / n * 1e6:.2f} us; open one: {open_s / n * 1e6:.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if SEALING:
        from bank import sealing

        sealing.install(sealing.parse_keyring(TEST_ENTRY, source="bench", lines=False))
        per_value_cost()
    print(f"sealing at rest: {'yes' if SEALING else 'no (tree before encryption)'}")
    rates: list[float] = []
    cpu_rates: list[float] = []
    with postgres_server(settings=DURABLE) as server, tempfile.TemporaryDirectory() as tmp:
        bank_file = Path(tmp) / "bank.jsonl"
        write_synthetic_bank(bank_file, args.items)
        for repeat in range(args.repeats):
            name = f"bench{repeat}"
            server.create_database(name)
            url = server.url(name)
            upgrade(url)
            added, seconds, cpu = asyncio.run(import_once(url, bank_file))
            rates.append(added / seconds)
            cpu_rates.append(added / cpu)
            print(
                f"import {added} items in {seconds:.1f} s = {added / seconds:,.0f} items/s "
                f"({cpu:.1f} s of this process's CPU = {added / cpu:,.0f} items per CPU s)"
            )
    print(
        f"median: {statistics.median(rates):,.0f} items/s, "
        f"{statistics.median(cpu_rates):,.0f} items per CPU s, over {len(rates)} imports"
    )


if __name__ == "__main__":
    main()
