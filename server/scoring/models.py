"""Tables of the scoring pipeline: the outbox of answers to score, verdicts (which double as
the judge-reply cache, by judge, prompt version and input hash, and hold the human
reviewers' scores too: rater ``human:<reviewer>``) and stored calibration results.

Exactly-once scoring comes from the database, not from the queue: a job is claimed with
``FOR UPDATE SKIP LOCKED`` and a lease (a crashed worker's lease runs out and another
worker takes the job over), and a verdict is inserted with ``ON CONFLICT DO NOTHING`` on
(answer, judge, prompt version), so a job done twice still leaves one verdict.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, JSONType, utcnow
from bank.sealing import SealedText

JOB_STATES = frozenset({"queued", "leased", "done"})
"""queued: waiting (maybe until ``not_before``); leased: a worker holds it until
``lease_expires_at``; done: its verdict exists."""


class ScoringJob(Base):
    """One answer to score with one judge and prompt version (the scoring outbox)."""

    __tablename__ = "scoring_jobs"
    __table_args__ = (
        UniqueConstraint("session_id", "position", "judge", "prompt_version"),
        ForeignKeyConstraint(
            ["session_id", "position"],
            ["answers.session_id", "answers.position"],
            ondelete="CASCADE",
        ),
        Index(None, "state", "not_before"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[uuid.UUID]
    position: Mapped[int] = mapped_column(Integer)
    judge: Mapped[str] = mapped_column(String(100))
    prompt_version: Mapped[str] = mapped_column(String(40))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    not_before: Mapped[datetime] = mapped_column(default=utcnow)
    """A deferred job (the provider asked us to wait) is not claimed before this."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Verdict(Base):
    """The score of one answer by one judge and prompt version; at most one per key.

    ``score`` is on the fig. 11 scale 0-3, or None when ``needs_review`` (the judge's reply
    could not be read even after a reminder, or the judge stayed unavailable): such answers
    wait for a person and are never silently scored 0.
    """

    __tablename__ = "verdicts"
    __table_args__ = (
        UniqueConstraint("session_id", "position", "judge", "prompt_version"),
        Index(None, "judge", "prompt_version", "input_hash"),
        ForeignKeyConstraint(
            ["session_id", "position"],
            ["answers.session_id", "answers.position"],
            ondelete="CASCADE",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    session_id: Mapped[uuid.UUID]
    position: Mapped[int] = mapped_column(Integer)
    judge: Mapped[str] = mapped_column(String(100))
    prompt_version: Mapped[str] = mapped_column(String(40))
    score: Mapped[int | None] = mapped_column(Integer, nullable=True)
    method: Mapped[str] = mapped_column(String(16))
    """``objective``, ``similarity`` or ``judge``: which stage of the cascade decided."""
    needs_review: Mapped[bool] = mapped_column(Boolean, default=False)
    detail: Mapped[str | None] = mapped_column(SealedText("verdicts.detail"), nullable=True)
    """The matcher's note, or the judge's stated reason (sealed: both quote the reference)."""
    judge_reply: Mapped[str | None] = mapped_column(
        SealedText("verdicts.judge_reply"), nullable=True
    )
    input_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    """Judge calls paid for this verdict (0 for the cascade's early stages and cache hits)."""
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class JudgeCalibration(Base):
    """A judge's agreement with the human reference, stored with the judge's version
    (LLMEval-Fair (Zhang et al.) §3.4, app. F.2): the default judge is the best calibrated one."""

    __tablename__ = "judge_calibrations"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    judge: Mapped[str] = mapped_column(String(100), index=True)
    prompt_version: Mapped[str] = mapped_column(String(40))
    reference: Mapped[str] = mapped_column(String(100))
    kappa: Mapped[float | None] = mapped_column(Float, nullable=True)
    weighted_kappa: Mapped[float | None] = mapped_column(Float, nullable=True)
    exact: Mapped[float] = mapped_column(Float)
    within_one: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    source_sha256: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the ratings file (or of the calibration set) the figures come from."""
    set_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("calibration_sets.id"), nullable=True, index=True
    )
    """The calibration set the judge was run on (None: an imported ratings file)."""
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The model snapshot the judge's endpoint served."""
    kind: Mapped[str] = mapped_column(String(8), default="full")
    """A ``server.calibration.models.CalibrationKind``."""
    kappa_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    kappa_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    weighted_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Lower bound of the 95% interval of ``weighted_kappa``: the gate reads it."""
    weighted_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    scores: Mapped[list[int | None] | None] = mapped_column(JSONType, nullable=True)
    """The judge's score of each answer of the set, by index (None: no verdict)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
