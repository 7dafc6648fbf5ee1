"""The calibration gate: which configured judges may score new answers by default.

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4 and app. F.2) picks its judge by agreement
with human experts; a point kappa from a hundred answers is uncertain by a tenth, so the
gate reads the *lower bound* of the 95% interval of the quadratic-weighted kappa.

A configured judge passes when

* the newest FULL run of that judge name, with its currently configured model and the
  current ``judge.prompts.PROMPT_VERSION``, on the current calibration set
  (``judge_gate_set``'s newest version, else the newest set) has
  ``weighted_low >= judge_gate_min_kappa`` and at least ``judge_min_calibration_n``
  answers, and
* it is not drifting: no uncleared ``JudgeDrift`` of that judge found after that run.

A run under another model snapshot or prompt version, or on an older set, does not match,
so a change of any of them re-opens the gate: the judge waits for a new full run. With no
calibration set at all the gate is open and every configured judge is eligible (the first
configured is the default, reported as uncalibrated). :func:`gate_decision` is the pure
decision, :func:`eligible_judges` the database-backed list and :func:`gate_report` what the
console and the API show.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from judge.prompts import PROMPT_VERSION
from server.calibration.figures import Figures
from server.calibration.models import CalibrationKind, CalibrationSet, JudgeDrift
from server.config import JudgeEndpoint, Settings
from server.scoring.models import JudgeCalibration

__all__ = [
    "GateReport",
    "GateRun",
    "GateStatus",
    "JudgeCalibrationView",
    "JudgeGate",
    "OpenDrift",
    "calibration_of",
    "current_set",
    "eligible_judges",
    "gate_decision",
    "gate_report",
]


class GateStatus(StrEnum):
    """Where a judge stands at the gate."""

    OPEN = "open"
    """No calibration set exists: every configured judge may score (uncalibrated)."""
    PASSED = "passed"
    UNCALIBRATED = "uncalibrated"
    """No full run matches the judge, its model, the prompt version and the current set."""
    REFUSED = "refused"
    """The matching run's lower bound is below the threshold (or it has too few answers)."""
    DRIFTING = "drifting"
    """It passed, but the drift check found it scoring worse since."""
    NO_SET = "no_set"
    """``judge_gate_set`` names a set that does not exist: nobody passes."""


@dataclass(frozen=True, slots=True)
class GateRun:
    """The full run the gate reads for one judge: which run, under which model and prompt
    version, when, and its figures."""

    id: uuid.UUID
    model: str | None
    prompt_version: str
    figures: Figures
    created_at: datetime

    @classmethod
    def of(cls, row: JudgeCalibration) -> GateRun:
        return cls(
            id=row.id,
            model=row.model,
            prompt_version=row.prompt_version,
            figures=Figures.stored(row),
            created_at=row.created_at,
        )


@dataclass(frozen=True, slots=True)
class OpenDrift:
    """An uncleared drift of a judge: when the drift check found it, and what it saw."""

    id: uuid.UUID
    found_at: datetime
    detail: str


@dataclass(frozen=True, slots=True)
class JudgeGate:
    """One configured judge at the gate: its status, why, and the run it was judged on."""

    judge: str
    model: str
    status: GateStatus
    reason: str
    run: GateRun | None = None
    drift_id: uuid.UUID | None = None

    @property
    def eligible(self) -> bool:
        return self.status in (GateStatus.OPEN, GateStatus.PASSED)


def gate_decision(
    endpoint: JudgeEndpoint,
    *,
    set_exists: bool,
    run: GateRun | None,
    drift: OpenDrift | None,
    min_kappa: float,
    min_n: int,
    prompt_version: str,
) -> JudgeGate:
    """The gate's decision for one judge (pure; see the module docstring).

    Parameters
    ----------
    endpoint : JudgeEndpoint
        The configured judge (its name and model).
    set_exists : bool
        Whether a current calibration set exists (False: the gate is open).
    run : GateRun or None
        The newest full run of this judge on the current set, or None. A run of another
        model or prompt version does not count (the caller may pass it; it is refused as
        uncalibrated).
    drift : OpenDrift or None
        The newest uncleared drift of this judge; it counts only when found after ``run``.
    min_kappa, min_n : float, int
        ``judge_gate_min_kappa`` and ``judge_min_calibration_n``.
    prompt_version : str
        The current prompt version.

    Returns
    -------
    JudgeGate
    """
    name, model = endpoint.name, endpoint.model
    if not set_exists:
        return JudgeGate(name, model, GateStatus.OPEN, "no calibration set: the gate is open")
    if run is None or run.model != model or run.prompt_version != prompt_version:
        return JudgeGate(
            name,
            model,
            GateStatus.UNCALIBRATED,
            f"no full run of {name} with model {model} and prompt {prompt_version} "
            "on the current calibration set",
        )
    low = run.figures.weighted_low
    if low is None or not math.isfinite(low) or low < min_kappa:
        shown = "undefined" if low is None or not math.isfinite(low) else f"{low:.3f}"
        return JudgeGate(
            name,
            model,
            GateStatus.REFUSED,
            f"weighted kappa lower bound {shown} is below {min_kappa:g}",
            run,
        )
    n = run.figures.n
    if n < min_n:
        return JudgeGate(name, model, GateStatus.REFUSED, f"{n} answers, fewer than {min_n}", run)
    if drift is not None and drift.found_at > run.created_at:
        return JudgeGate(
            name,
            model,
            GateStatus.DRIFTING,
            f"the drift check found it scoring worse than its calibration: {drift.detail}",
            run,
            drift.id,
        )
    return JudgeGate(
        name,
        model,
        GateStatus.PASSED,
        f"weighted kappa lower bound {low:.3f} >= {min_kappa:g}",
        run,
    )


async def current_set(db: AsyncSession, settings: Settings) -> CalibrationSet | None:
    """The calibration set the gate reads: the newest version of ``judge_gate_set``, else
    the newest set (None when there is none, or when the named set does not exist)."""
    statement = select(CalibrationSet).order_by(
        CalibrationSet.created_at.desc(), CalibrationSet.version.desc()
    )
    if settings.judge_gate_set is not None:
        statement = (
            select(CalibrationSet)
            .where(CalibrationSet.name == settings.judge_gate_set)
            .order_by(CalibrationSet.version.desc())
        )
    found: CalibrationSet | None = (await db.execute(statement.limit(1))).scalar_one_or_none()
    return found


async def _any_set(db: AsyncSession) -> bool:
    return (await db.execute(select(CalibrationSet.id).limit(1))).first() is not None


async def _latest_runs(
    db: AsyncSession, set_id: uuid.UUID, endpoints: Sequence[JudgeEndpoint]
) -> dict[str, GateRun]:
    """The newest matching full run (model, prompt version) per judge on the set."""
    models = {e.name: e.model for e in endpoints}
    rows = (
        await db.execute(
            select(JudgeCalibration)
            .where(
                JudgeCalibration.set_id == set_id,
                JudgeCalibration.kind == CalibrationKind.FULL.value,
                JudgeCalibration.judge.in_(list(models)),
                JudgeCalibration.prompt_version == PROMPT_VERSION,
            )
            .order_by(JudgeCalibration.created_at.desc())
        )
    ).scalars()
    latest: dict[str, GateRun] = {}
    for row in rows:
        if row.model == models[row.judge]:
            latest.setdefault(row.judge, GateRun.of(row))
    return latest


async def open_drifts(db: AsyncSession, names: Sequence[str]) -> dict[str, OpenDrift]:
    """The newest uncleared drift of each judge that has one."""
    rows = (
        await db.execute(
            select(JudgeDrift.judge, JudgeDrift.id, JudgeDrift.created_at, JudgeDrift.detail)
            .where(JudgeDrift.judge.in_(list(names)), JudgeDrift.cleared_at.is_(None))
            .order_by(JudgeDrift.created_at.desc())
        )
    ).all()
    found: dict[str, OpenDrift] = {}
    for judge, drift_id, at, detail in rows:
        found.setdefault(judge, OpenDrift(drift_id, at, detail))
    return found


@dataclass(frozen=True, slots=True)
class GateReport:
    """The gate of every configured judge, in configured order."""

    set_id: uuid.UUID | None
    set_name: str | None
    set_version: int | None
    min_kappa: float
    prompt_version: str
    judges: tuple[JudgeGate, ...]

    @property
    def eligible(self) -> list[str]:
        return [gate.judge for gate in self.judges if gate.eligible]

    @property
    def default(self) -> str | None:
        """The first eligible judge (None: no judge may score open answers)."""
        return next(iter(self.eligible), None)


async def gate_report(db: AsyncSession, settings: Settings) -> GateReport:
    """Every configured judge's gate decision on the current calibration set."""
    endpoints = list(settings.judges)
    chosen = await current_set(db, settings)
    exists = chosen is not None or await _any_set(db)
    runs = await _latest_runs(db, chosen.id, endpoints) if chosen is not None else {}
    drifts = await open_drifts(db, [e.name for e in endpoints])
    gates = []
    for endpoint in endpoints:
        if exists and chosen is None:
            gates.append(
                JudgeGate(
                    endpoint.name,
                    endpoint.model,
                    GateStatus.NO_SET,
                    f"judge_gate_set {settings.judge_gate_set!r} names no calibration set",
                )
            )
            continue
        gates.append(
            gate_decision(
                endpoint,
                set_exists=exists,
                run=runs.get(endpoint.name),
                drift=drifts.get(endpoint.name),
                min_kappa=settings.judge_gate_min_kappa,
                min_n=settings.judge_min_calibration_n,
                prompt_version=PROMPT_VERSION,
            )
        )
    return GateReport(
        set_id=chosen.id if chosen else None,
        set_name=chosen.name if chosen else None,
        set_version=chosen.version if chosen else None,
        min_kappa=settings.judge_gate_min_kappa,
        prompt_version=PROMPT_VERSION,
        judges=tuple(gates),
    )


@dataclass(frozen=True, slots=True)
class JudgeCalibrationView:
    """The figures of a judge's run the gate reads, with the calibration set it was on
    (for headers)."""

    set_name: str
    set_version: int
    figures: Figures


async def calibration_of(
    db: AsyncSession, settings: Settings, judge: str
) -> JudgeCalibrationView | None:
    """The run of ``judge`` the gate reads on the current set (None: no such run, or the
    judge is not configured)."""
    report = await gate_report(db, settings)
    if report.set_name is None or report.set_version is None:
        return None
    for gate in report.judges:
        if gate.judge == judge and gate.run is not None:
            return JudgeCalibrationView(report.set_name, report.set_version, gate.run.figures)
    return None


async def eligible_judges(db: AsyncSession, settings: Settings) -> list[str]:
    """Configured judges, in configured order, that pass the gate and are not drifting."""
    if not settings.judges:
        return []
    return (await gate_report(db, settings)).eligible
