"""The drift check: the default judge re-scores a small fixed subset of the calibration set.

Every ``judge_drift_interval_s`` seconds (0: never) the scoring worker (in-process on the
embedded default) runs the current default judge, without any reply cache, on the drift
subset of the current calibration set: the first ``judge_drift_items`` answers of a shuffle
of the set seeded by the set's content hash (so the subset is fixed for a set, and
unrelated to the order the answers were imported in). The new scores are compared with the
scores of the baseline, the full run the gate passed the judge on, on the same answers:
the change in quadratic-weighted kappa against the human scores, with a paired 95%
bootstrap interval (``judge.agreement.round_change.kappa_change``; LLMEval-Fair (Zhang et
al.), "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and Fair Evaluation of
Large Language Models", app. F.2, table 10 compares calibration rounds the same way).

A drop whose whole interval lies below 0 marks the judge drifting: a ``JudgeDrift`` row,
a warning in the log and the gauge ``proctor_judge_drifting{judge}`` at 1. A drifting judge
fails the gate, so new answers go to the next gated judge; a newer full run that passes
the gate clears the drift (``server.calibration.runner``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prometheus_client import Gauge
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from judge.agreement.round_change import KappaChange, kappa_change
from judge.prompts import PROMPT_VERSION
from server.calibration import gate
from server.calibration.models import CalibrationKind, JudgeDrift
from server.calibration.runner import (
    CalibrationRun,
    CalibrationRunError,
    calibrate,
    compared_rounds,
)
from server.calibration.service import set_answers
from server.config import Settings
from server.database import unit_of_work
from server.scoring.models import JudgeCalibration

log = logging.getLogger(__name__)

DRIFTING = Gauge(
    "proctor_judge_drifting",
    "1 while the drift check finds the judge scoring worse than its calibration, else 0.",
    ["judge"],
    multiprocess_mode="livemostrecent",  # the latest check of any live process
)


def drift_indexes(n: int, items: int, seed_text: str) -> list[int]:
    """The drift subset of a set of ``n`` answers: the first ``items`` of a shuffle of
    ``range(n)`` seeded by ``seed_text`` (the set's content hash), in shuffled order."""
    seed = int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "big")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order[: min(items, n)]


def is_drop(change: KappaChange) -> bool:
    """Whether the interval of the change lies wholly below 0 (NaN bounds: no)."""
    return math.isfinite(change.high) and change.high < 0


@dataclass(frozen=True, slots=True)
class DriftCheck:
    """One drift check of one judge."""

    judge: str
    baseline_id: str
    run: CalibrationRun
    change: KappaChange
    """Of the quadratic-weighted kappa, re-run minus baseline."""
    drifting: bool
    detail: str


def describe(change: KappaChange, n: int) -> str:
    """One line: the weighted kappa before and after, the change and its interval."""
    return (
        f"weighted kappa {change.kappa_a:.3f} -> {change.kappa_b:.3f} on {n} answers: "
        f"change {change.change:+.3f}, 95% interval [{change.low:+.3f}, {change.high:+.3f}]"
    )


async def check_drift(engine: AsyncEngine, settings: Settings) -> DriftCheck | None:
    """Re-run the default judge on the drift subset and record a drift if it dropped.

    None when there is nothing to check: no eligible judge, the gate open (no calibration
    set, so no baseline), or a drift run of this judge on this set newer than half the
    interval (another worker just did it).
    """
    async with unit_of_work(engine) as db:
        report = await gate.gate_report(db, settings)
        _publish(report)
        chosen = await gate.current_set(db, settings)
        default = next((g for g in report.judges if g.eligible), None)
        if chosen is None or default is None or default.run is None:
            return None
        if await _recently_checked(db, settings, default.judge, chosen.id):
            return None
        answers = await set_answers(db, chosen.id)
        baseline = await db.get(JudgeCalibration, default.run.id)
    if baseline is None or baseline.scores is None:
        return None
    indexes = drift_indexes(len(answers), settings.judge_drift_items, chosen.sha256)
    try:
        run = await calibrate(
            engine,
            settings,
            judge=default.judge,
            set_name=chosen.name,
            set_version=chosen.version,
            kind=CalibrationKind.DRIFT,
            indexes=indexes,
            created_by="drift check",
        )
    except CalibrationRunError as error:
        log.warning("judge %s drift check: %s", default.judge, error)
        return None
    round_a, round_b = compared_rounds(
        [a.human_score for a in answers],
        list(baseline.scores),
        run.scores,
        [a.cluster for a in answers],
        indexes,
    )
    change = kappa_change(round_a, round_b, rng=0).weighted
    detail = describe(change, len(round_a.reference))
    drifting = is_drop(change)
    async with unit_of_work(engine) as db:
        if drifting:
            db.add(
                JudgeDrift(
                    judge=default.judge,
                    prompt_version=PROMPT_VERSION,
                    baseline_id=baseline.id,
                    run_id=run.id,
                    detail=detail,
                )
            )
            await db.flush()
        _publish(await gate.gate_report(db, settings))
    if drifting:
        log.warning(
            "judge %s is drifting: %s; new answers go to the next gated judge",
            default.judge,
            detail,
        )
    else:
        log.info("judge %s drift check: %s", default.judge, detail)
    return DriftCheck(default.judge, str(baseline.id), run, change, drifting, detail)


async def _recently_checked(
    db: AsyncSession, settings: Settings, judge: str, set_id: uuid.UUID
) -> bool:
    """Whether a drift run of ``judge`` on the set is newer than half the interval."""
    if settings.judge_drift_interval_s <= 0:
        return False
    since = datetime.now(UTC) - timedelta(seconds=settings.judge_drift_interval_s / 2)
    found = (
        await db.execute(
            select(JudgeCalibration.id)
            .where(
                JudgeCalibration.judge == judge,
                JudgeCalibration.set_id == set_id,
                JudgeCalibration.kind == CalibrationKind.DRIFT.value,
                JudgeCalibration.prompt_version == PROMPT_VERSION,
                JudgeCalibration.created_at > since,
            )
            .limit(1)
        )
    ).first()
    return found is not None


def _publish(report: gate.GateReport) -> None:
    """Set the gauge of every configured judge from the gate."""
    for judge in report.judges:
        DRIFTING.labels(judge=judge.judge).set(int(judge.status is gate.GateStatus.DRIFTING))


async def drift_forever(engine: AsyncEngine, settings: Settings) -> None:
    """Run :func:`check_drift` every ``judge_drift_interval_s`` seconds until cancelled (not
    at all when it is 0); a failure is logged and the next tick tries again."""
    if settings.judge_drift_interval_s <= 0:
        return
    while True:
        await asyncio.sleep(settings.judge_drift_interval_s)
        try:
            await check_drift(engine, settings)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("judge drift check failed")
