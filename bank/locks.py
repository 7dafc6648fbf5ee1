"""Named, transaction-scoped exclusive locks.

PostgreSQL: ``pg_advisory_xact_lock`` on a 64-bit key derived from the name, released at
COMMIT or ROLLBACK. SQLite: nothing to do, because every transaction already begins with
``BEGIN IMMEDIATE`` (see ``server.database``) and so holds the database's write lock.
"""

from __future__ import annotations

import hashlib
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession


def lock_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name``."""
    return int.from_bytes(
        hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
    )


async def lock(session: AsyncSession, name: str) -> None:
    """Wait for and take the lock called ``name`` until the transaction ends."""
    connection = await session.connection()
    if connection.dialect.name == "postgresql":
        await connection.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(name)}
        )


async def lock_org_sampling(session: AsyncSession, org_id: uuid.UUID) -> None:
    """Take organisation ``org_id``'s sampling lock until the transaction ends: held by
    every draw for the organisation and by every release of its exposures, so a release
    happens wholly before a draw's reads or wholly after its commit (a re-derivation,
    ordering them by time, then sees what the draw saw)."""
    await lock(session, f"bank:sample:{org_id}")
