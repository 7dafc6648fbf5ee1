"""Tables of the tamper-evident chains: signed checkpoints, and the results ledger.

Both are append-only like ``audit_log`` (on PostgreSQL a trigger refuses UPDATE and DELETE,
and the runtime role may only INSERT and SELECT them).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class ChainCheckpoint(Base):
    """A signed statement that chain ``chain`` of log ``log`` had ``n_rows`` rows, the last
    being ``last_row_id`` with hash ``head_hash`` (``server.ledger.checkpoints``)."""

    __tablename__ = "chain_checkpoints"
    __table_args__ = (Index(None, "log", "chain", "id"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    log: Mapped[str] = mapped_column(String(16))
    """A ``server.ledger.chain.Log``: ``audit`` or ``results``."""
    chain: Mapped[str] = mapped_column(String(40))
    last_row_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"))
    n_rows: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"))
    head_hash: Mapped[str] = mapped_column(String(64))
    prev_checkpoint_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """``checkpoint_hash`` of the chain's previous checkpoint (None for its first)."""
    checkpoint_hash: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the signed payload (``server.ledger.signing.checkpoint_payload``)."""
    at: Mapped[datetime] = mapped_column(default=utcnow)
    key_id: Mapped[str] = mapped_column(String(64))
    """``server.ledger.signing.key_id`` of the public key that verifies ``signature``."""
    signature: Mapped[str] = mapped_column(String(128))
    """Ed25519 signature of the payload (hex)."""


class ResultEntry(Base):
    """One chained record of a verdict as written: a judge's or a person's score of one
    answer (``server.ledger.results``). A verdict changed afterwards no longer matches its
    latest entry, and an entry changed or deleted breaks the chain."""

    __tablename__ = "result_ledger"
    __table_args__ = (
        Index(None, "chain", "id"),
        Index(None, "session_id", "position"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    chain: Mapped[str] = mapped_column(String(40))
    prev_hash: Mapped[str] = mapped_column(String(64))
    row_hash: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    verdict_id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"))
    session_id: Mapped[uuid.UUID] = mapped_column()
    position: Mapped[int] = mapped_column(Integer)
    judge: Mapped[str] = mapped_column(String(100))
    """The rater: a judge's name, or ``human:<reviewer>``."""
    prompt_version: Mapped[str] = mapped_column(String(40))
    score: Mapped[int | None] = mapped_column(Integer, nullable=True)
    method: Mapped[str] = mapped_column(String(16))
    needs_review: Mapped[bool] = mapped_column(Boolean, default=False)
