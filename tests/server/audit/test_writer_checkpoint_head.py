"""The audit writer reads its chain's last row id only when it signs a checkpoint, and
never signs a head the database does not hold."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import select, text

from server.audit.models import AuditEntry
from server.audit.writer import AuditWriter
from server.database import create_engine
from server.ledger.models import ChainCheckpoint
from server.ledger.signing import new_private_text, parse_private
from server.ledger.verify import AUDIT, verify_log
from tests.support.audit import request_row
from tests.support.database import database_session

KEY = parse_private(new_private_text(), source="test")


async def delete_row(db_url: str, row_id: int) -> None:
    """Delete audit row ``row_id`` as the database owner (append-only trigger off)."""
    off = (
        "DROP TRIGGER IF EXISTS audit_log_no_delete"
        if db_url.startswith("sqlite")
        else "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only"
    )
    engine = create_engine(db_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(off))
            await connection.execute(text(f"DELETE FROM audit_log WHERE id = {int(row_id)}"))
    finally:
        await engine.dispose()


async def chain_ids(db_url: str, chain: str) -> list[int]:
    async with database_session(db_url) as db:
        statement = select(AuditEntry.id).where(AuditEntry.chain == chain).order_by(AuditEntry.id)
        return list((await db.scalars(statement)).all())


async def checkpoints(db_url: str, chain: str) -> list[tuple[int, int]]:
    async with database_session(db_url) as db:
        rows = await db.execute(
            select(ChainCheckpoint.last_row_id, ChainCheckpoint.n_rows)
            .where(ChainCheckpoint.chain == chain)
            .order_by(ChainCheckpoint.id)
        )
        return [(last, n) for last, n in rows.tuples()]


async def assert_log_verifies(db_url: str) -> None:
    async with database_session(db_url) as db:
        report = await verify_log(db, AUDIT, {KEY.public.key_id: KEY.public})
    assert report.ok, report.failures


async def test_a_checkpoint_names_the_chains_own_last_row(
    fresh_db_url: str, tmp_path: Path
) -> None:
    engine = create_engine(fresh_db_url)
    mine = AuditWriter(engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=1000)
    other = AuditWriter(engine, tmp_path / "spool", signing_key=None)
    try:
        for n in range(3):
            await mine.write(request_row(n))
            await other.write(request_row(n))  # a later id of another chain
        await mine.checkpoint()
    finally:
        await engine.dispose()
    ids = await chain_ids(fresh_db_url, mine.chain)
    assert await checkpoints(fresh_db_url, mine.chain) == [(ids[-1], 3)]
    await assert_log_verifies(fresh_db_url)


async def test_no_checkpoint_over_a_head_the_database_lost(
    fresh_db_url: str, tmp_path: Path
) -> None:
    engine = create_engine(fresh_db_url)
    writer = AuditWriter(engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=1000)
    try:
        for n in range(3):
            await writer.write(request_row(n))
        ids = await chain_ids(fresh_db_url, writer.chain)
        await delete_row(fresh_db_url, ids[-1])
        with pytest.raises(RuntimeError, match="not its known head"):
            await writer.checkpoint()
        assert await checkpoints(fresh_db_url, writer.chain) == []
        # the head is read back: the next row links after the row the database holds
        await writer.write(request_row(3))
        await writer.checkpoint()
    finally:
        await engine.dispose()
    ids = await chain_ids(fresh_db_url, writer.chain)
    assert len(ids) == 3
    assert await checkpoints(fresh_db_url, writer.chain) == [(ids[-1], 3)]
    await assert_log_verifies(fresh_db_url)


async def test_checkpoints_follow_the_row_and_time_cadence(
    fresh_db_url: str, tmp_path: Path
) -> None:
    """A writer signs after ``checkpoint_rows`` rows, or at its first write once
    ``checkpoint_s`` seconds have passed since the last checkpoint, and not otherwise."""
    engine = create_engine(fresh_db_url)
    by_rows = AuditWriter(engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=3)
    try:
        for n in range(7):
            await by_rows.write(request_row(n))
        by_time = AuditWriter(
            engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=1000, checkpoint_s=1.0
        )
        await by_time.write(request_row(0))
        await by_time.write(request_row(1))
        assert await checkpoints(fresh_db_url, by_time.chain) == []  # neither due yet
        await asyncio.sleep(1.1)
        await by_time.write(request_row(2))
    finally:
        await engine.dispose()
    rows_ids = await chain_ids(fresh_db_url, by_rows.chain)
    assert await checkpoints(fresh_db_url, by_rows.chain) == [(rows_ids[2], 3), (rows_ids[5], 6)]
    time_ids = await chain_ids(fresh_db_url, by_time.chain)
    assert await checkpoints(fresh_db_url, by_time.chain) == [(time_ids[2], 3)]
