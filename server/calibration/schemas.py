"""Bodies of the judge and calibration-set routes (``/v1/admin/judges``,
``/v1/admin/calibration-sets``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from server.api.bodies import RequestBody
from server.calibration.gate import GateStatus


class CalibrationSetIn(RequestBody):
    """Freeze the review queue's human-scored answers as the next version of ``name``."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Letters, digits, ``.``, ``_`` and ``-``; an existing name gets a new version."""


class CalibrationSetOut(BaseModel):
    """One frozen version of a calibration set (never its answers)."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    version: int
    source: str
    """``review`` (the review queue) or ``csv`` (an imported file)."""
    n: int
    """Answers in the set."""
    sha256: str
    """Of the set's content: two sets with the same hash hold the same answers."""
    created_by: str
    created_at: datetime


class CalibrationRunOut(BaseModel):
    """A judge's run on a calibration set: agreement with the human scores, 95% intervals
    (cluster bootstrap over item families, BCa)."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    judge: str
    model: str | None
    prompt_version: str
    kind: str
    """``full`` (the gate reads it) or ``drift`` (the drift subset)."""
    n: int
    """Answers the judge scored."""
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    weighted_kappa: float | None
    """Quadratic-weighted kappa: the gate reads the lower bound ``weighted_low``."""
    weighted_low: float | None
    weighted_high: float | None
    exact: float
    within_one: float
    created_at: datetime


class JudgeGateOut(BaseModel):
    """One configured judge at the gate."""

    name: str
    model: str
    status: GateStatus
    reason: str
    eligible: bool
    """Passes the gate (or the gate is open) and is not drifting."""
    drifting: bool
    default: bool
    """New answers are scored by this judge."""
    run: CalibrationRunOut | None
    """The full run the gate read (None: none matches)."""


class CalibrationSetRef(BaseModel):
    id: uuid.UUID
    name: str
    version: int


class JudgesOut(BaseModel):
    """The gate of every configured judge, in configured order."""

    calibration_set: CalibrationSetRef | None
    """The set the gate reads (None: none, the gate is open, or ``judge_gate_set`` names
    no set)."""
    min_kappa: float
    prompt_version: str
    default: str
    """The default judge (``none``: no judge may score open answers)."""
    judges: list[JudgeGateOut]
