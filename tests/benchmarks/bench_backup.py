"""Benchmark: size and duration of ``proctor db backup`` and ``proctor db restore`` on a
synthetic bank, on PostgreSQL and on the embedded default (SQLite).

Run: ``python tests/benchmarks/bench_backup.py [--items 100000]`` (not collected by
pytest). Writes the synthetic bank of ``bench_import`` (``--items`` items, no augmentation)
into a fresh PostgreSQL (its own server, durable settings) migrated by ``proctor db upgrade``
as an owner role with a runtime role, and into a fresh SQLite data dir; then runs the real
commands (subprocesses) and prints each database's size, the backup's size and the
seconds each command took (wall clock of the whole command, Python start-up included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import asyncpg

from bank import sealing
from bank.formats import read_records
from bank.importer import import_records
from server.database import create_engine, unit_of_work
from tests.benchmarks.bench_import import DURABLE, write_synthetic_bank
from tests.support.bank_keys import TEST_BANK_KEYS, test_keyring
from tests.support.services import PostgresServer, postgres_server


def proctor(env: dict[str, str], *args: str) -> float:
    """Run ``proctor ARGS``; its wall seconds (fails loudly on a non-zero exit)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    full.update(env, PROCTOR_BANK_KEYS=TEST_BANK_KEYS)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "server", *args], env=full, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"proctor {' '.join(args)} failed:\n{done.stderr}")
    return seconds


async def import_bank(url: str, path: Path) -> int:
    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as session:
            report = await import_records(
                session, read_records(path, "jsonl"), augment=False, add_disciplines=True
            )
    finally:
        await engine.dispose()
    return report.items_added


async def superuser(server: PostgresServer, *statements: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(server.dsn("postgres"))
    try:
        rows: list[asyncpg.Record] = []
        for statement in statements:
            rows = list(await connection.fetch(statement))
        return rows
    finally:
        await connection.close()


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def bench_postgres(bank_file: Path, workdir: Path) -> None:
    with postgres_server(settings=DURABLE) as server:
        asyncio.run(
            superuser(
                server,
                "CREATE ROLE bench_owner LOGIN",
                "CREATE ROLE bench_app LOGIN",
                "CREATE DATABASE bench_src OWNER bench_owner",
                "CREATE DATABASE bench_dst OWNER bench_owner",
            )
        )

        def env(database: str) -> dict[str, str]:
            return {
                "PROCTOR_MIGRATION_DATABASE_URL": server.url(database).replace(
                    "//postgres@", "//bench_owner@"
                ),
                "PROCTOR_DATABASE_URL": server.url(database).replace("//postgres@", "//bench_app@"),
            }

        proctor(env("bench_src"), "db", "upgrade")
        items = asyncio.run(import_bank(env("bench_src")["PROCTOR_DATABASE_URL"], bank_file))
        size = asyncio.run(superuser(server, "SELECT pg_database_size('bench_src')"))[0][0]
        dump = workdir / "proctor.dump"
        backup_s = proctor(env("bench_src"), "db", "backup", str(dump))
        restore_s = proctor(env("bench_dst"), "db", "restore", str(dump))
        print(
            f"PostgreSQL: {items} items, database {mib(size)}; backup {mib(dump.stat().st_size)} "
            f"in {backup_s:.1f} s; restore into an empty database in {restore_s:.1f} s"
        )


def bench_sqlite(bank_file: Path, workdir: Path) -> None:
    data_dir = workdir / "data"
    env = {"PROCTOR_DATA_DIR": str(data_dir)}
    proctor(env, "db", "upgrade")
    database = data_dir / "proctor.db"
    items = asyncio.run(import_bank(f"sqlite+aiosqlite:///{database}", bank_file))
    size = database.stat().st_size
    copy = workdir / "proctor-backup.db"
    backup_s = proctor(env, "db", "backup", str(copy))
    for lost in data_dir.glob("proctor.db*"):
        lost.unlink()
    restore_s = proctor(env, "db", "restore", str(copy))
    print(
        f"SQLite: {items} items, database {mib(size)}; backup {mib(copy.stat().st_size)} "
        f"in {backup_s:.1f} s; restore into a lost database in {restore_s:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    sealing.install(test_keyring())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bank_file = workdir / "bank.jsonl"
        write_synthetic_bank(bank_file, args.items)
        bench_postgres(bank_file, workdir)
        bench_sqlite(bank_file, workdir)


if __name__ == "__main__":
    main()
