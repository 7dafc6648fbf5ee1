"""Run one configured judge over a calibration set and store its figures.

The judge is the real one: ``judge.llm_judge.LlmJudge`` on the configured endpoint's chat
client, at most ``judge_concurrency`` calls in flight, with **no** reply cache (a re-run
calls the judge again: a cached reply would hide exactly the drift a re-run looks for).
The stored ``JudgeCalibration`` row carries the judge name, the model snapshot sent (the
configured ``model``), ``PROMPT_VERSION``, the set, the kind (``full`` or ``drift``), the
judge's score of every answer by index, and against the human scores: Cohen's kappa and
the quadratic-weighted kappa with 95% BCa bootstrap intervals that resample whole item
families (``cluster``; an answer without one is its own), exact and within-one agreement,
and ``n``, the answers the judge gave a score (LLMEval-Fair (Zhang et al.), "LLMEval-Fair:
A Large-Scale Longitudinal Study on Robust and Fair Evaluation of Large Language Models",
§3.4 and app. F.2 for kappa against human experts; app. L, table 13 for the weighted kappa,
exact and within-one agreement).

A full run that passes the gate on the current set clears the judge's open drifts.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from clients.llm.chat import ChatError
from judge.agreement.intervals import ScorePair, grouped_kappa_intervals, kappa_intervals
from judge.agreement.kappa import exact_agreement, within_one_agreement
from judge.agreement.round_change import CalibrationRound, kappa_change
from judge.llm_judge import CachedVerdict, CacheKey, LlmJudge
from judge.prompts import PROMPT_VERSION, JudgeInput
from server.calibration import gate
from server.calibration.figures import Figures
from server.calibration.models import CalibrationAnswer, CalibrationKind, CalibrationSet, JudgeDrift
from server.calibration.service import find_set, set_answers
from server.config import JudgeEndpoint, Settings
from server.database import unit_of_work
from server.scoring.judges import chat_client
from server.scoring.models import JudgeCalibration

HUMAN_REFERENCE = "human"
"""The ``reference`` of every calibration-set run: the set's human scores."""
N_RESAMPLES = 2000
"""Bootstrap replicates of the intervals."""
BOOTSTRAP_SEED = 0
"""The intervals are reproducible: the same scores give the same bounds."""


class CalibrationRunError(ValueError):
    """The run cannot start or gave nothing to measure (the message says why)."""


class NoCache:
    """A ``judge.llm_judge.JudgeCache`` that never hits: every answer is a judge call."""

    async def get(self, key: CacheKey) -> CachedVerdict | None:
        return None

    async def put(self, key: CacheKey, verdict: CachedVerdict) -> None:
        return None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def answer_clusters(clusters: Sequence[str | None]) -> list[Hashable]:
    """The bootstrap cluster of each answer: its ``cluster``, or itself when it has none."""
    return [("family", c) if c else ("answer", i) for i, c in enumerate(clusters)]


def agreement_figures(
    human: Sequence[int],
    judge: Sequence[int | None],
    clusters: Sequence[str | None],
    *,
    n_resamples: int = N_RESAMPLES,
) -> Figures:
    """The figures of one run (pure): answers the judge did not score (None) are left out.

    Parameters
    ----------
    human, judge, clusters : sequences aligned by answer
        Human scores 0-3, the judge's scores 0-3 or None, item families or None.
    n_resamples : int
        Bootstrap replicates.
    """
    pairs = [(i, score) for i, score in enumerate(judge) if score is not None]
    kept = [i for i, _ in pairs]
    reference = [human[i] for i in kept]
    rated = [score for _, score in pairs]
    groups = answer_clusters([clusters[i] for i in kept])
    if not kept:
        nan = float("nan")
        return Figures(None, None, None, None, None, None, nan, nan, 0, 0)
    both = kappa_intervals(
        reference, rated, clusters=groups, n_resamples=n_resamples, rng=BOOTSTRAP_SEED
    )
    return Figures(
        kappa=_finite(both.plain.estimate),
        kappa_low=_finite(both.plain.low),
        kappa_high=_finite(both.plain.high),
        weighted_kappa=_finite(both.weighted.estimate),
        weighted_low=_finite(both.weighted.low),
        weighted_high=_finite(both.weighted.high),
        exact=exact_agreement(reference, rated),
        within_one=within_one_agreement(reference, rated),
        n=len(kept),
        n_clusters=both.weighted.n_clusters,
    )


def grouped_figures(
    answers: Sequence[CalibrationAnswer],
    judge: Sequence[int | None],
    field: str,
    *,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, dict[str, object]]:
    """Kappa and weighted kappa with intervals per value of ``field`` (``discipline`` or
    ``model_family``; ``unknown`` where empty), on the answers the judge scored (pure)."""
    records, keys = [], []
    for answer, score in zip(answers, judge, strict=True):
        if score is not None:
            records.append(ScorePair(answer.human_score, score, answer.cluster or None))
            keys.append(getattr(answer, field) or "unknown")
    if not records:
        return {}
    groups = grouped_kappa_intervals(records, keys, n_resamples=n_resamples, rng=BOOTSTRAP_SEED)
    return {
        key: {"n": both.plain.n, "kappa": both.plain.to_json(), "weighted": both.weighted.to_json()}
        for key, both in groups.items()
    }


def compared_rounds(
    human: Sequence[int],
    baseline: Sequence[int | None],
    rerun: Sequence[int | None],
    clusters: Sequence[str | None],
    indexes: Sequence[int],
) -> tuple[CalibrationRound, CalibrationRound]:
    """The baseline and the re-run on the answers of ``indexes`` both scored, paired by
    answer (pure). ``human``, ``baseline``, ``rerun`` and ``clusters`` are by set index."""
    both = [i for i in indexes if baseline[i] is not None and rerun[i] is not None]
    groups = answer_clusters([clusters[i] for i in both])
    reference = [human[i] for i in both]
    before = [baseline[i] for i in both]
    after = [rerun[i] for i in both]
    return (
        CalibrationRound(reference, [int(s) for s in before if s is not None], both, groups),
        CalibrationRound(reference, [int(s) for s in after if s is not None], both, groups),
    )


def round_change(
    human: Sequence[int],
    previous: Sequence[int | None],
    current: Sequence[int | None],
    clusters: Sequence[str | None],
) -> dict[str, object] | None:
    """The change in kappa from a previous full run to this one on the answers both
    scored, paired by answer (LLMEval-Fair (Zhang et al.), app. F.2, table 10 compares
    calibration rounds); None when they share fewer than two answers (pure)."""
    if len(previous) != len(current):
        return None
    before, after = compared_rounds(human, previous, current, clusters, range(len(current)))
    if len(before.reference) < 2:
        return None
    changes = kappa_change(before, after, n_resamples=N_RESAMPLES, rng=BOOTSTRAP_SEED)
    return {"n": len(before.reference), **changes.to_json()}


async def score_answers(
    judge: LlmJudge, answers: Sequence[CalibrationAnswer], *, concurrency: int
) -> list[int | None]:
    """The judge's score of each answer (None: no readable verdict, or the provider failed),
    with at most ``concurrency`` answers in flight."""
    limit = asyncio.Semaphore(concurrency)

    async def one(answer: CalibrationAnswer) -> int | None:
        request = JudgeInput(
            question=answer.question,
            answer=answer.answer,
            reference=answer.reference,
            language=answer.language,
        )
        async with limit:
            try:
                return (await judge.grade(request)).rating
            except ChatError:
                return None

    return list(await asyncio.gather(*(one(answer) for answer in answers)))


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """A stored run: its row's id and figures, the set it ran on, what went unscored."""

    id: uuid.UUID
    judge: str
    model: str
    prompt_version: str
    kind: CalibrationKind
    set_name: str
    set_version: int
    figures: Figures
    scores: list[int | None]
    """By set index; None for answers not run (outside a drift subset) or not scored."""
    answers_run: int
    unscored: int
    cleared_drifts: int
    created_at: datetime
    by_group: dict[str, dict[str, dict[str, object]]]
    """``discipline`` and ``model_family`` -> value -> n, kappa and weighted kappa with
    intervals (shown, not stored: the stored scores give them again)."""
    previous: dict[str, object] | None = None
    """The judge's previous full run on the set and the paired change in kappa from it
    (``change``: n, plain and weighted, each with its 95% interval)."""

    def to_json(self) -> dict[str, object]:
        figures = self.figures
        return {
            "id": str(self.id),
            "judge": self.judge,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "kind": self.kind.value,
            "set": self.set_name,
            "set_version": self.set_version,
            "n": figures.n,
            "clusters": figures.n_clusters,
            "answers_run": self.answers_run,
            "unscored": self.unscored,
            "kappa": {
                "estimate": figures.kappa,
                "low": figures.kappa_low,
                "high": figures.kappa_high,
            },
            "weighted_kappa": {
                "estimate": figures.weighted_kappa,
                "low": figures.weighted_low,
                "high": figures.weighted_high,
            },
            "exact": _finite(figures.exact),
            "within_one": _finite(figures.within_one),
            "cleared_drifts": self.cleared_drifts,
            "created_at": self.created_at.isoformat(),
            "by_discipline": self.by_group.get("discipline", {}),
            "by_model_family": self.by_group.get("model_family", {}),
            "previous": self.previous,
        }


def endpoint_of(settings: Settings, name: str) -> JudgeEndpoint:
    """The configured judge ``name``; ``CalibrationRunError`` naming the configured ones."""
    for endpoint in settings.judges:
        if endpoint.name == name:
            return endpoint
    known = ", ".join(e.name for e in settings.judges) or "none"
    raise CalibrationRunError(f"no judge {name!r} is configured (configured: {known})")


async def calibrate(
    engine: AsyncEngine,
    settings: Settings,
    *,
    judge: str,
    set_name: str,
    set_version: int | None = None,
    kind: CalibrationKind = CalibrationKind.FULL,
    indexes: Sequence[int] | None = None,
    created_by: str = "cli",
) -> CalibrationRun:
    """Run ``judge`` over the set (all of it, or the answers at ``indexes``) and store it.

    No transaction is held while the judge works: the set is read in one unit of work,
    the run stored in another.

    Raises
    ------
    CalibrationRunError
        Unknown judge or set, or the judge scored none of the answers.
    """
    endpoint = endpoint_of(settings, judge)
    async with unit_of_work(engine) as db:
        chosen = await find_set(db, set_name, set_version)
        if chosen is None:
            raise CalibrationRunError(f"no calibration set {set_name!r}")
        answers = await set_answers(db, chosen.id)
        previous = await _previous_full_run(db, judge, chosen.id) if indexes is None else None
    wanted = answers if indexes is None else [answers[i] for i in indexes]
    client = chat_client(endpoint, settings)
    try:
        grader = LlmJudge(name=judge, client=client, cache=NoCache(), prompt_version=PROMPT_VERSION)
        scored = await score_answers(grader, wanted, concurrency=settings.judge_concurrency)
    finally:
        await client.aclose()
    if all(score is None for score in scored):
        raise CalibrationRunError(
            f"judge {judge} scored none of the {len(wanted)} answers (unreachable or unreadable)"
        )
    by_index: list[int | None] = [None] * len(answers)
    for answer, score in zip(wanted, scored, strict=True):
        by_index[answer.index] = score
    figures = agreement_figures(
        [a.human_score for a in wanted], scored, [a.cluster for a in wanted]
    )
    async with unit_of_work(engine) as db:
        row = _row(endpoint, chosen, kind, figures, by_index)
        db.add(row)
        await db.flush()
        cleared = 0
        if kind is CalibrationKind.FULL:
            cleared = await clear_drifts_if_passing(db, settings, row, cleared_by=created_by)
    return CalibrationRun(
        id=row.id,
        judge=judge,
        model=endpoint.model,
        prompt_version=PROMPT_VERSION,
        kind=kind,
        set_name=chosen.name,
        set_version=chosen.version,
        figures=figures,
        scores=by_index,
        answers_run=len(wanted),
        unscored=sum(score is None for score in scored),
        cleared_drifts=cleared,
        created_at=row.created_at,
        by_group={
            field: grouped_figures(wanted, scored, field)
            for field in ("discipline", "model_family")
        }
        if kind is CalibrationKind.FULL
        else {},
        previous=_previous_json(previous, answers, by_index),
    )


async def _previous_full_run(
    db: AsyncSession, judge: str, set_id: uuid.UUID
) -> JudgeCalibration | None:
    """The judge's newest full run on the set before this one (any model or prompt)."""
    found: JudgeCalibration | None = (
        await db.execute(
            select(JudgeCalibration)
            .where(
                JudgeCalibration.judge == judge,
                JudgeCalibration.set_id == set_id,
                JudgeCalibration.kind == CalibrationKind.FULL.value,
            )
            .order_by(JudgeCalibration.created_at.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
    return found


def _previous_json(
    previous: JudgeCalibration | None,
    answers: Sequence[CalibrationAnswer],
    scores: Sequence[int | None],
) -> dict[str, object] | None:
    if previous is None or previous.scores is None:
        return None
    change = round_change(
        [a.human_score for a in answers], previous.scores, scores, [a.cluster for a in answers]
    )
    return {
        "run": str(previous.id),
        "model": previous.model,
        "prompt_version": previous.prompt_version,
        "created_at": previous.created_at.isoformat(),
        "change": change,
    }


def _row(
    endpoint: JudgeEndpoint,
    chosen: CalibrationSet,
    kind: CalibrationKind,
    figures: Figures,
    scores: list[int | None],
) -> JudgeCalibration:
    return JudgeCalibration(
        judge=endpoint.name,
        prompt_version=PROMPT_VERSION,
        reference=HUMAN_REFERENCE,
        kappa=figures.kappa,
        weighted_kappa=figures.weighted_kappa,
        exact=figures.exact if math.isfinite(figures.exact) else 0.0,
        within_one=figures.within_one if math.isfinite(figures.within_one) else 0.0,
        n=figures.n,
        source_sha256=chosen.sha256,
        set_id=chosen.id,
        model=endpoint.model,
        kind=kind.value,
        kappa_low=figures.kappa_low,
        kappa_high=figures.kappa_high,
        weighted_low=figures.weighted_low,
        weighted_high=figures.weighted_high,
        scores=scores,
    )


async def clear_drifts_if_passing(
    db: AsyncSession, settings: Settings, row: JudgeCalibration, *, cleared_by: str
) -> int:
    """Clear the judge's open drifts when ``row`` (a full run) passes the gate on the
    current set; returns how many were cleared."""
    current = await gate.current_set(db, settings)
    if current is None or current.id != row.set_id:
        return 0
    endpoint = endpoint_of(settings, row.judge)
    decision = gate.gate_decision(
        endpoint,
        set_exists=True,
        run=gate.GateRun.of(row),
        drift=None,
        min_kappa=settings.judge_gate_min_kappa,
        min_n=settings.judge_min_calibration_n,
        prompt_version=PROMPT_VERSION,
    )
    if not decision.eligible:
        return 0
    result = await db.execute(
        update(JudgeDrift)
        .where(JudgeDrift.judge == row.judge, JudgeDrift.cleared_at.is_(None))
        .values(cleared_at=row.created_at, cleared_by=f"{cleared_by}: run {row.id}"[:64])
    )
    cleared: int = result.rowcount  # type: ignore[attr-defined]
    return cleared
