"""Signed checkpoints of the hash chains (``server.ledger.chain``).

A checkpoint states that chain ``chain`` of log ``log`` had ``n_rows`` rows, the last one
``last_row_id`` with hash ``head_hash``; it links to the chain's previous checkpoint and is
signed with the server's Ed25519 key (``server.ledger.signing``). Rows before a checkpoint
cannot be deleted, edited or inserted without the walk disagreeing with a signature the
database owner cannot forge; auditors who keep the checkpoints they fetched
(``GET /v1/audit/checkpoints``) also notice a checkpoint that was removed.

The payload signed is the canonical JSON (``server.ledger.chain.canonical``) of::

    {"v": "proctor-checkpoint-v1", "log": LOG, "chain": CHAIN, "last_row_id": ID,
     "n_rows": N, "head_hash": HEX, "prev_checkpoint_hash": HEX or null, "at": TIME,
     "key_id": KEY_ID}

and ``checkpoint_hash`` is its SHA-256 (hex).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from bank.database import utcnow
from server.ledger.chain import ChainHead, Log, canonical
from server.ledger.models import ChainCheckpoint
from server.ledger.signing import PublicKey, SigningKey

VERSION = "proctor-checkpoint-v1"


def checkpoint_payload(
    *,
    log: Log | str,
    chain: str,
    last_row_id: int,
    n_rows: int,
    head_hash: str,
    prev_checkpoint_hash: str | None,
    at: datetime,
    key_id: str,
) -> bytes:
    """The canonical bytes a checkpoint signs (see the module docstring)."""
    return canonical(
        {
            "v": VERSION,
            "log": str(log),
            "chain": chain,
            "last_row_id": last_row_id,
            "n_rows": n_rows,
            "head_hash": head_hash,
            "prev_checkpoint_hash": prev_checkpoint_hash,
            "at": at,
            "key_id": key_id,
        }
    )


def payload_of(checkpoint: ChainCheckpoint) -> bytes:
    """The payload ``checkpoint`` signed."""
    return checkpoint_payload(
        log=checkpoint.log,
        chain=checkpoint.chain,
        last_row_id=checkpoint.last_row_id,
        n_rows=checkpoint.n_rows,
        head_hash=checkpoint.head_hash,
        prev_checkpoint_hash=checkpoint.prev_checkpoint_hash,
        at=checkpoint.at,
        key_id=checkpoint.key_id,
    )


def is_authentic(checkpoint: ChainCheckpoint, keys: dict[str, PublicKey]) -> bool:
    """Whether ``checkpoint`` hashes to its ``checkpoint_hash`` and carries a valid
    signature of one of ``keys`` (by key id)."""
    payload = payload_of(checkpoint)
    if hashlib.sha256(payload).hexdigest() != checkpoint.checkpoint_hash:
        return False
    key = keys.get(checkpoint.key_id)
    return key is not None and key.verifies(checkpoint.signature, payload)


async def last_checkpoint_hash(
    db: AsyncSession | AsyncConnection, *, log: Log, chain: str
) -> str | None:
    """``checkpoint_hash`` of the newest checkpoint of ``chain`` (None if it has none):
    what the chain's next checkpoint links to."""
    statement = (
        select(ChainCheckpoint.checkpoint_hash)
        .where(ChainCheckpoint.log == log.value, ChainCheckpoint.chain == chain)
        .order_by(ChainCheckpoint.id.desc())
        .limit(1)
    )
    return (await db.execute(statement)).scalar_one_or_none()


def new_checkpoint(
    *, key: SigningKey, log: Log, head: ChainHead, prev_checkpoint_hash: str | None
) -> dict[str, Any]:
    """The column values of a signed checkpoint of ``head`` (a chain with at least one
    row), ready to insert into ``chain_checkpoints``."""
    if head.last_row_id is None:
        raise ValueError("an empty chain has nothing to checkpoint")
    at = utcnow()
    fields: dict[str, Any] = {
        "log": log.value,
        "chain": head.chain,
        "last_row_id": head.last_row_id,
        "n_rows": head.n_rows,
        "head_hash": head.head_hash,
        "prev_checkpoint_hash": prev_checkpoint_hash,
        "at": at,
        "key_id": key.public.key_id,
    }
    payload = checkpoint_payload(**fields)
    fields["checkpoint_hash"] = hashlib.sha256(payload).hexdigest()
    fields["signature"] = key.sign(payload)
    return fields


@dataclass(slots=True)
class Cadence:
    """When a chain's writer signs its next checkpoint: after ``every_rows`` new rows or
    ``every_s`` seconds after the last one (if rows were written since)."""

    every_rows: int
    every_s: float
    rows_since: int = 0
    last_at: float = field(default_factory=time.monotonic)

    def wrote(self, n_rows: int) -> None:
        self.rows_since += n_rows

    def due(self) -> bool:
        if self.rows_since <= 0:
            return False
        return self.rows_since >= self.every_rows or (
            time.monotonic() - self.last_at >= self.every_s
        )

    def done(self) -> None:
        self.rows_since = 0
        self.last_at = time.monotonic()
