"""The append-only ``audit_log`` table.

No API route updates or deletes it; on PostgreSQL a trigger refuses UPDATE and DELETE too
(see the migration). It never holds a token or answer text."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class AuditEntry(Base):
    """One HTTP request, refused ones included."""

    __tablename__ = "audit_log"

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
    repeats: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    """How many requests the row stands for: more than 1 only for repeated refusals of one
    kind (``server.audit.refusals``), folded into one row per window."""
