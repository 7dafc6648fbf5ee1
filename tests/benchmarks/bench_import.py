"""Benchmark: bank import throughput through the full path, against a plain ``COPY``.

Run: ``python tests/benchmarks/bench_import.py [--items 1000000] [--workers N] [--profile]``
(not collected by pytest). Starts its own PostgreSQL from the installed binaries, with
durable settings (fsync, synchronous_commit and full-page writes on), and prints, each
measured in the same run:

* the synthetic bank (canonical JSONL) through the real importer: reading, parsing,
  validation, content hashing, sealing of answers (AES-GCM), MinHash signatures, the
  near-duplicate key index and ``COPY``, in one transaction, committed;
* the same with the preparation in this process only (``--workers 0``, the old path), on a
  second database;
* the database's own rate: a plain ``COPY`` of the same number of prepared rows (already
  sealed and hashed) into a copy of ``items`` with the same indexes, and their band keys
  into a copy of ``item_lsh_keys``, in one committed transaction;
* the real MMLU-Pro file (``$PROCTOR_SHARED_DATA/mmlu_pro/items.jsonl``) with augmentation,
  pipelined and in one process, each into an empty bank.

Bank: the ten evaluated disciplines of :data:`bank.taxonomy.DEFAULT_TAXONOMY` x 6 question
types x 50 sub-disciplines, items spread evenly, every question distinct.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import random
import string
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from sqlalchemy import text

from bank.duplicates.exact import content_hash
from bank.duplicates.near import LSH
from bank.formats import read_records
from bank.importer import PIPELINE_CHUNK, import_records
from bank.taxonomy import DEFAULT_TAXONOMY
from server.database import create_engine, unit_of_work, upgrade
from tests.support.bank_keys import install_test_keyring, test_keyring
from tests.support.paths import SHARED_DATA
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
DISCIPLINES = [d.key for d in DEFAULT_TAXONOMY if d.evaluated]
MMLU = SHARED_DATA / "mmlu_pro" / "items.jsonl"
TARGET = 20_000


def write_synthetic_bank(path: Path, n_items: int) -> None:
    """Canonical JSONL over 10 x 6 x 50 cells, round-robin; each question is a dozen words
    drawn from a 20,000-word vocabulary, so questions are distinct (not one template)."""
    rng = random.Random(7)
    vocabulary = [
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(20_000)
    ]
    cells = [(d, t, s) for d in DISCIPLINES for t in QTYPES for s in range(50)]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_items):
            d, t, s = cells[i % len(cells)]
            record: dict[str, object] = {
                "discipline": d,
                "subdiscipline": f"{d}-{s}",
                "qtype": t,
                "question": " ".join(rng.choices(vocabulary, k=12)) + f" (#{i})?",
                "answer": " ".join(rng.choices(vocabulary, k=3)),
                "language": "en",
            }
            if t == "multiple_choice":
                record["options"] = [
                    f"{k} " + " ".join(rng.choices(vocabulary, k=2)) for k in range(4)
                ]
                record["answer"] = "B"
            out.write(json.dumps(record) + "\n")


async def import_file(
    url: str,
    path: Path,
    fmt: str,
    *,
    augment: bool,
    workers: int | None,
    chunk_size: int = PIPELINE_CHUNK,
) -> tuple[int, float]:
    """Import ``path`` in one committed transaction; (items added, seconds)."""
    engine = create_engine(url)
    started = time.perf_counter()
    async with unit_of_work(engine) as session:
        report = await import_records(
            session,
            read_records(path, fmt),
            augment=augment,
            workers=workers,
            chunk_size=chunk_size,
        )
    elapsed = time.perf_counter() - started
    await engine.dispose()
    return report.items_added, elapsed


def prepared_rows(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[int, uuid.UUID]]]:
    """The item rows and key rows an import of ``path`` writes, prepared outside the clock."""
    keyring = test_keyring()
    items: list[tuple[object, ...]] = []
    texts: list[str] = []
    ids: list[uuid.UUID] = []
    with path.open(encoding="utf-8") as stream:
        for rank, line in enumerate(stream):
            r = json.loads(line)
            options = r.get("options")
            digest = content_hash(r["qtype"], r["question"], options)
            item_id = uuid.uuid4()
            items.append(
                (
                    item_id,
                    item_id,
                    "original",
                    r["discipline"],
                    r["subdiscipline"],
                    r["qtype"],
                    r["question"],
                    json.dumps(options) if options else None,
                    keyring.seal(r["answer"], column="items.answer"),
                    None,
                    None,
                    "en",
                    "active",
                    digest,
                    1,
                    rank,
                )
            )
            texts.append(r["question"] + ("\n" + "\n".join(options) if options else ""))
            ids.append(item_id)
    keys = LSH.band_keys(LSH.signatures(texts))
    rows = sorted((int(k), ids[i]) for i in range(len(ids)) for k in set(keys[i].tolist()))
    return items, rows  # sorted by key, as the importer writes them


ITEM_COLUMNS = [
    "id", "family_id", "variant", "discipline", "subdiscipline", "qtype", "question", "options",
    "answer", "explanation", "source", "language", "status", "content_hash", "stratum_id", "slot",
]  # fmt: skip


async def plain_copy(url: str, path: Path) -> tuple[int, float]:
    """``COPY`` of prepared rows into copies of the two tables (same indexes), committed."""
    items, keys = prepared_rows(path)
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE copy_items (LIKE items INCLUDING ALL)"))
        await connection.execute(text("CREATE TABLE copy_keys (LIKE item_lsh_keys INCLUDING ALL)"))
        await connection.execute(text("ALTER TABLE copy_items ALTER created_at SET DEFAULT now()"))
    started = time.perf_counter()
    async with engine.begin() as connection:
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        await driver.copy_records_to_table("copy_items", records=items, columns=ITEM_COLUMNS)
        halfway = time.perf_counter()
        await driver.copy_records_to_table("copy_keys", records=keys, columns=["key", "item_id"])
        before_commit = time.perf_counter()
    elapsed = time.perf_counter() - started
    print(
        f"  plain COPY: items {halfway - started:.1f} s, {len(keys):,} band keys "
        f"{before_commit - halfway:.1f} s, commit {started + elapsed - before_commit:.1f} s"
    )
    await engine.dispose()
    return len(items), elapsed


def rate(name: str, added: int, seconds: float) -> float:
    per_second = added / seconds
    print(f"{name:<58} {added:>9,} items in {seconds:6.1f} s = {per_second:>8,.0f} items/s")
    return per_second


async def main_async(urls: list[str], args: argparse.Namespace, workdir: Path) -> None:
    bank_file = workdir / "bank.jsonl"
    write_synthetic_bank(bank_file, args.items)
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    full = rate(
        f"full import, pipelined (workers={args.workers})",
        *await import_file(urls[0], bank_file, "jsonl", augment=False, workers=args.workers),
    )
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    if not args.skip_single:
        rate(
            "full import, one process (workers=0, the old path)",
            *await import_file(urls[1], bank_file, "jsonl", augment=False, workers=0),
        )
    copy = rate(
        "plain COPY of the prepared rows (the database's rate)",
        *await plain_copy(urls[2], bank_file),
    )
    print(f"full import / plain COPY: {full / copy:.2f}; target {TARGET:,} items/s: "
          f"{'met' if full >= TARGET else 'MISSED'}")  # fmt: skip
    if MMLU.is_file() and not args.skip_mmlu:
        # 12,032 records: chunks of 2,000 so that the file is pipelined; empty banks
        rate(
            "MMLU-Pro with augmentation, pipelined",
            *await import_file(
                urls[3], MMLU, "mmlu_pro", augment=True, workers=args.workers, chunk_size=2_000
            ),
        )
        rate(
            "MMLU-Pro with augmentation, one process (workers=0)",
            *await import_file(urls[4], MMLU, "mmlu_pro", augment=True, workers=0),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=None, help="default: the importer's")
    parser.add_argument("--profile", action="store_true", help="cProfile the pipelined import")
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument("--skip-mmlu", action="store_true")
    args = parser.parse_args()
    install_test_keyring()
    with postgres_server(settings=DURABLE) as server, tempfile.TemporaryDirectory() as tmp:
        urls = []
        for name in ("bench", "single", "plain", "mmlu", "mmlu_single"):
            server.create_database(name)
            urls.append(server.url(name))
            upgrade(urls[-1])
        asyncio.run(main_async(urls, args, Path(tmp)))


if __name__ == "__main__":
    main()
