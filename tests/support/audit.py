"""Reading the audit log and the audit spool the way an operator would, for audit tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from sqlalchemy import func, select

from bank.database import utcnow
from server.audit.models import AuditEntry
from tests.support.database import database_session

SPOOL_REPLAY_TIMEOUT_S = 30.0


async def audit_rows(db_url: str, after: int = 0) -> list[AuditEntry]:
    """Audit rows with an id above ``after``, oldest first, read on a separate engine."""
    async with database_session(db_url) as db:
        statement = select(AuditEntry).where(AuditEntry.id > after).order_by(AuditEntry.id)
        return list((await db.execute(statement)).scalars().all())


async def last_audit_id(db_url: str) -> int:
    """The highest audit row id (0 for an empty log)."""
    async with database_session(db_url) as db:
        return int(await db.scalar(select(func.coalesce(func.max(AuditEntry.id), 0))) or 0)


def spool_files(spool: Path) -> list[Path]:
    """The audit spool files waiting in ``spool``."""
    return sorted(spool.glob("*.jsonl"))


async def wait_for_empty_spool(spool: Path) -> float:
    """Wait until no spool file is left in ``spool`` (the server replayed them); seconds."""
    t0 = time.monotonic()
    while await asyncio.to_thread(spool_files, spool):
        assert time.monotonic() - t0 < SPOOL_REPLAY_TIMEOUT_S, "the spool was not replayed"
        await asyncio.sleep(0.1)
    return time.monotonic() - t0


def request_row(n: int) -> dict[str, object]:
    """The audit row of a ``GET /v1/whoami`` by subject ``s-<n>``, as a request hands it
    to ``AuditWriter.write``."""
    return {
        "at": utcnow(),
        "subject": f"s-{n}",
        "org_id": uuid.uuid4(),
        "session_id": None,
        "method": "GET",
        "route": "/v1/whoami",
        "status": 200,
        "client": "203.0.113.7",
        "repeats": 1,
    }
