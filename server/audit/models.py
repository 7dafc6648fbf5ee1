"""The append-only ``audit_log`` table.

No API route updates or deletes it; on PostgreSQL a trigger refuses UPDATE and DELETE too
(see the migration). It never holds a token or answer text."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class AuditEntry(Base):
    """One HTTP request, refused ones included."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "chain", "id"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(default=utcnow)
    subject: Mapped[str | None] = mapped_column(String(64), nullable=True)
    org_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True, index=True)
    session_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True, index=True)
    method: Mapped[str] = mapped_column(String(8))
    route: Mapped[str] = mapped_column(String(200))
    status: Mapped[int] = mapped_column(Integer)
    client: Mapped[str | None] = mapped_column(String(64), nullable=True)
    chain: Mapped[str | None] = mapped_column(String(40), nullable=True)
    """The hash chain the row belongs to (``server.ledger.chain``): one per audit writer
    process, so group commit needs no global lock; None only on rows written before
    chaining existed (``proctor audit verify`` counts those, and reports a row without a
    chain after the first chained row as inserted)."""
    prev_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """``row_hash`` of the chain's previous row (the chain's genesis hash for its first)."""
    row_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """SHA-256 over ``prev_hash`` and the row's fields (``server.ledger.chain.link``)."""
    reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """Why a request was refused before the application saw it (the request guard's
    problem: ``Content too large: ...``), or ``client closed the request``; None for every
    request the application answered (its status says the rest)."""
    repeats: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    """How many requests the row stands for: more than 1 only for repeated refusals of one
    kind (``server.audit.refusals``), folded into one row per window."""
