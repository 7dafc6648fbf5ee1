"""Evaluation sessions and their answers.

A session delivers its sample (``bank.models.SampleItem``, positions 0..n-1) strictly in
order, so each item's state follows from two counters (see ``states.item_state``):
positions below ``n_completed`` are completed, those below ``n_delivered`` pending, the
rest allocated. Every change to the counters happens under the session row's lock.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, JSONType, utcnow
from bank.sealing import SealedText


class EvalSession(Base):
    """One evaluation of one registered model on one freshly drawn sample."""

    __tablename__ = "eval_sessions"
    __table_args__ = (Index(None, "org_id", "state"), Index(None, "org_id", "created_at"))

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("organisations.id"))
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("registered_models.id"), index=True)
    sample_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("samples.id"))
    mode: Mapped[str] = mapped_column(String(16), default="fixed")
    state: Mapped[str] = mapped_column(String(16))
    n_items: Mapped[int] = mapped_column(Integer)
    n_delivered: Mapped[int] = mapped_column(Integer, default=0)
    n_completed: Mapped[int] = mapped_column(Integer, default=0)
    pending_window: Mapped[int] = mapped_column(Integer, default=1)
    deadline_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(nullable=True)
    lease_jti: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The token that last drove the session; another token is refused while it holds it."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)


class Answer(Base):
    """The one accepted answer to one position of a session (the primary key makes it one)."""

    __tablename__ = "answers"

    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("eval_sessions.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("items.id"))
    answer: Mapped[str] = mapped_column(SealedText("answers.answer"))
    """Sealed at rest (``bank.sealing``), like ``reasoning``: a correct answer is the
    reference answer, and its verdict says so."""
    reasoning: Mapped[str | None] = mapped_column(SealedText("answers.reasoning"), nullable=True)
    submitted_by: Mapped[str] = mapped_column(String(64))
    """The ``jti`` of the token that submitted it."""
    delivered_at: Mapped[datetime]
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Tokens the model read for this answer, as the client reports them (for cost)."""
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Tokens the model wrote (reasoning included), as the client reports them."""
    finish_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """Why the model's reply ended, as the client reports it (``FinishReason``: ``length``
    for a cut reply, ``error`` for an item the model could not answer)."""
    reported_latency_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The model's own time for the reply, as the client reports it (the server's own
    figure is ``submitted_at - delivered_at``, client overhead included)."""


class AdaptiveRun(Base):
    """How an ``adaptive`` session samples and stops, and where it stands
    (``server.sessions.adaptive``). Half-widths and the estimate are on the [0, 1] scale."""

    __tablename__ = "adaptive_runs"

    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("eval_sessions.id", ondelete="CASCADE"), primary_key=True
    )
    policy: Mapped[str] = mapped_column(String(16))
    bound: Mapped[str] = mapped_column(String(24))
    delta: Mapped[float] = mapped_column(Float)
    target_halfwidth: Mapped[float] = mapped_column(Float)
    check_every: Mapped[int] = mapped_column(Integer)
    pilot: Mapped[int] = mapped_column(Integer)
    checks_done: Mapped[int] = mapped_column(Integer, default=0)
    """Check points of the schedule already evaluated (each is evaluated once)."""
    item_parameters: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    """Item id -> [a, b], the 2PL parameters fitted on other models' past verdicts when
    the session opened (``neyman-irt``); items without history are absent."""
    history_models: Mapped[int] = mapped_column(Integer, default=0)
    """How many other models' verdicts the parameters came from."""
    estimate: Mapped[float | None] = mapped_column(Float, nullable=True)
    halfwidth: Mapped[float | None] = mapped_column(Float, nullable=True)
    n_scored: Mapped[int] = mapped_column(Integer, default=0)
    """Scored items behind ``estimate`` at the last check."""
    stop_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)


class AdaptiveDraw(Base):
    """How the item at ``position`` of a ``model-assisted`` session was drawn
    (``bank.adaptive.difference.StratumDraw`` without its score, which is the verdict's):
    fixed at delivery, so the estimator can be rebuilt whatever verdicts came since."""

    __tablename__ = "adaptive_draws"

    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("eval_sessions.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    probability: Mapped[float] = mapped_column(Float)
    predicted: Mapped[float] = mapped_column(Float)
    unseen_predicted: Mapped[float] = mapped_column(Float)
    weight: Mapped[float] = mapped_column(Float)
