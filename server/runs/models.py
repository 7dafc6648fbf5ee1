"""The ``runs`` and ``run_slots`` tables: an evaluation run and each of its sessions.

The database is the record of a run's progress: a slot is a lease on one session's work
(``lease_owner`` until ``lease_expires_at``), so a slot whose worker died is taken over by
another once its lease has run out; the session's own state says where to go on.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, JSONType, utcnow
from server.runs.states import RunState, SlotState


class Run(Base):
    """A request to drive a model's endpoint through ``sessions`` sessions, and what the
    workers have spent on it so far (tokens, cost, failures by kind)."""

    __tablename__ = "runs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), index=True
    )
    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), index=True
    )
    created_by: Mapped[str] = mapped_column(String(64))
    """The API key that started it: the run's sessions are opened and driven as that key."""
    created_role: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    sessions: Mapped[int] = mapped_column(Integer)
    n_items: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_cap_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    state: Mapped[str] = mapped_column(String(16), default=RunState.QUEUED.value, index=True)
    stop_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(nullable=True)
    answers: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    reserved_usd: Mapped[float] = mapped_column(Float, default=0.0)
    """The most the calls in flight may cost (the cost cap counts it as spent)."""
    failures: Mapped[dict[str, int]] = mapped_column(JSONType, default=dict)


class RunSlot(Base):
    """One session of a run: its id once opened, and the worker driving it."""

    __tablename__ = "run_slots"

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("eval_sessions.id", ondelete="SET NULL"), nullable=True
    )
    state: Mapped[str] = mapped_column(String(16), default=SlotState.WAITING.value, index=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
