"""Tables of judge calibration: frozen calibration sets and the judges' drift events.

A calibration set is a frozen, versioned list of answers with human scores (taken from
the review queue or imported from CSV). Every run of a judge on a set is a
``JudgeCalibration`` row (``server.scoring.models``) carrying the set, the judge's model
snapshot, the prompt version, the figures with their intervals and the judge's scores.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow
from bank.sealing import SealedText


class CalibrationSource(StrEnum):
    REVIEW = "review"
    """Human verdicts of the review queue."""
    CSV = "csv"


class CalibrationKind(StrEnum):
    """What a judge's run on a calibration set was for."""

    FULL = "full"
    """The whole set: the gate reads these."""
    DRIFT = "drift"
    """The fixed drift subset, re-run on a schedule."""


class CalibrationSet(Base):
    """One frozen version of a named calibration set (a new import is a new version)."""

    __tablename__ = "calibration_sets"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100))
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))
    """A ``CalibrationSource``."""
    n: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    """Of the set's content (question, reference, answer, human score of every answer)."""
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CalibrationAnswer(Base):
    """One answer of a calibration set, with everything a judge needs to score it again."""

    __tablename__ = "calibration_answers"

    set_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("calibration_sets.id", ondelete="CASCADE"), primary_key=True
    )
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    question: Mapped[str] = mapped_column(Text)
    reference: Mapped[str] = mapped_column(SealedText("calibration_answers.reference"))
    """Sealed at rest like the bank's own (``bank.sealing``), and so is ``answer``."""
    answer: Mapped[str] = mapped_column(SealedText("calibration_answers.answer"))
    language: Mapped[str] = mapped_column(String(16))
    human_score: Mapped[int] = mapped_column(Integer)
    """0-3; with several reviewers, their rounded mean."""
    discipline: Mapped[str | None] = mapped_column(String(100), nullable=True)
    model_family: Mapped[str | None] = mapped_column(String(100), nullable=True)
    cluster: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """The item family (bootstrap clusters); the answer is its own cluster when empty."""


class JudgeDrift(Base):
    """A judge found drifting: it scores nothing new by default until ``cleared_at``."""

    __tablename__ = "judge_drifts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    judge: Mapped[str] = mapped_column(String(100), index=True)
    prompt_version: Mapped[str] = mapped_column(String(40))
    baseline_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("judge_calibrations.id"))
    """The full run whose interval the drift run fell below."""
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("judge_calibrations.id"))
    detail: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    cleared_at: Mapped[datetime | None] = mapped_column(nullable=True)
    cleared_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
