"""The embedded SQLite engine (``server.database.create_engine``): a query cancelled halfway
through a transaction does not leave SQLite's write lock behind.

SQLite keeps a connection closed while one of its statements is still being stepped as a
"zombie" that holds its transaction until the statement's cursor is garbage-collected; a
cancelled query (a task cancelled at shutdown, an ``asyncio.timeout``) left exactly that,
and every later writer then failed with "database is locked" after the busy timeout.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from server.database import create_engine

SLOW_QUERY = (
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5000000) "
    "SELECT i FROM r WHERE i % 1000000 = 0"
)
"""Steps for a few hundred milliseconds before its first row: cancelled while running."""


def write_lock_is_free(path: Path) -> bool:
    """Whether another connection takes the write lock within a second."""
    other = sqlite3.connect(path, isolation_level=None, timeout=1.0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError as error:
        assert "locked" in str(error)
        return False
    finally:
        other.close()


@pytest.mark.parametrize("cancel_after_s", [0.05, 0.2])
async def test_a_cancelled_transaction_releases_the_write_lock(
    tmp_path: Path, cancel_after_s: float
) -> None:
    path = tmp_path / "proctor.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (x INTEGER)"))

        started = asyncio.Event()

        async def write_then_read_slowly() -> None:
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO t VALUES (1)"))
                started.set()
                await connection.execute(text(SLOW_QUERY))

        task = asyncio.create_task(write_then_read_slowly())
        await started.wait()
        await asyncio.sleep(cancel_after_s)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gc.collect()
        assert await asyncio.to_thread(write_lock_is_free, path)
        async with engine.connect() as connection:  # and the cancelled write is not kept
            assert (await connection.scalar(text("SELECT count(*) FROM t"))) == 0
    finally:
        await engine.dispose()
