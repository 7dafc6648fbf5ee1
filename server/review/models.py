"""Tables of the human review queue: one task per answer a person should score, the
reviewers' skips, and the counters of the audit sample.

A human score is not stored here: it is a ``Verdict`` of rater ``human:<reviewer>`` and
prompt version ``HUMAN_PROMPT_VERSION`` (``server.scoring.models``), so the scores of the
judges and of people sit side by side and agreement between them is one query.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow
from server.review.states import ReviewTaskState


class ReviewTask(Base):
    """One answer waiting for ``required`` human scores (two for dual annotation)."""

    __tablename__ = "review_tasks"
    __table_args__ = (
        UniqueConstraint("session_id", "position"),
        ForeignKeyConstraint(
            ["session_id", "position"],
            ["answers.session_id", "answers.position"],
            ondelete="CASCADE",
        ),
        Index(None, "state", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[uuid.UUID]
    position: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(16))
    """A ``ReviewReason``."""
    judge: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """The judge whose verdict is checked (the stratum of the audit sample)."""
    discipline: Mapped[str] = mapped_column(String(100))
    required: Mapped[int] = mapped_column(Integer, default=1)
    """Human scores that close the task: 2 for a task drawn for dual annotation."""
    state: Mapped[str] = mapped_column(String(8), default=ReviewTaskState.OPEN.value)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(nullable=True)


class ReviewSkip(Base):
    """A reviewer passed on a task: it is not offered to them again (others still see it)."""

    __tablename__ = "review_skips"
    __table_args__ = (ForeignKeyConstraint(["task_id"], ["review_tasks.id"], ondelete="CASCADE"),)

    task_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True
    )
    reviewer: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AuditStratum(Base):
    """Systematic sampling state of one (discipline, judge) stratum of the audit sample:
    answer number ``seen + 1`` is drawn when ``floor(rate (seen + 1) + start)`` exceeds
    ``floor(rate seen + start)``, so every stratum gets its share to within one answer."""

    __tablename__ = "review_audit_strata"

    discipline: Mapped[str] = mapped_column(String(100), primary_key=True)
    judge: Mapped[str] = mapped_column(String(100), primary_key=True)
    start: Mapped[float] = mapped_column(Float)
    """Random start in [0, 1), drawn when the stratum is first seen."""
    seen: Mapped[int] = mapped_column(BigInteger, default=0)
    drawn: Mapped[int] = mapped_column(BigInteger, default=0)
