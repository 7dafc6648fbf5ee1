"""The server side of adaptive sessions: the policy of :mod:`bank.adaptive`
driving delivery.

When the session opens, its pool is drawn exactly as for a fixed session of ``budget``
items (same sampler, same exposure reservations), and the 2PL parameters of the pool's
items are fitted on *other* models' past scores (``neyman-irt``, ``model-assisted``).
Before each new delivery, :func:`advance` rebuilds the policy's state from the database
(``server.sessions.policy_state``: the delivered positions are the allocation, the scores
so far are the scores: objective items are scored at once, judged ones when the judge
answers), evaluates the stopping rule if a new check point of the schedule has been
passed (each check point once, so the union bound over checks holds), and moves the item
the policy asks for to the next position, so delivery stays strictly in order. When the
rule fires, delivery ends where it is (``server.sessions.delivery``: the session shrinks
to what was delivered and the rest of the pool goes back to the organisation); the state
machine and exposure rules are those of fixed sessions. ``model-assisted`` picks the item
itself and stores how it was drawn (:mod:`server.sessions.assisted`).

Every score read here is the one the leaderboard counts (``server.scoring.effective``:
reviewers first, then the panel rule over the board's judges under the current prompt
version), so a live session stops on the score the leaderboard later gives it.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist, fmean

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.adaptive.bounds import Bound
from bank.adaptive.irt import fit_2pl
from bank.adaptive.policy import Decision, Policy
from bank.models import SampleItem
from clients.sdk.types import (
    AdaptiveBound,
    AdaptivePolicy,
    AdaptiveSummary,
    DisciplineEstimate,
    StopReason,
)
from judge.prompts import PROMPT_VERSION
from judge.ranking.scores import MAX_SCORE
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.scoring.models import Verdict
from server.sessions import assisted
from server.sessions.limits import AdaptiveDefaults
from server.sessions.models import AdaptiveRun, Answer, EvalSession
from server.sessions.options import AdaptiveRequest
from server.sessions.policy_state import Estimate, load_policy

POINTS = 100.0
"""The policy works on [0, 1]; clients see points (0-100)."""
IRT_POLICIES = (Policy.NEYMAN_IRT, Policy.MODEL_ASSISTED)
"""Policies that fit item parameters on the bank's history when a session opens."""


async def start(
    db: AsyncSession,
    *,
    record: EvalSession,
    request: AdaptiveRequest,
    defaults: AdaptiveDefaults,
    history_modes: Sequence[str],
    judges: JudgeAssignment,
) -> AdaptiveRun:
    """Record the session's policy and fit its items' parameters from the scores of other
    models' sessions in ``history_modes`` (flush)."""
    policy = Policy(request.policy or defaults.policy)
    parameters: dict[str, list[float]] = {}
    n_models = 0
    if policy in IRT_POLICIES:
        parameters, n_models = await _history_parameters(
            db, record=record, history_modes=history_modes, judges=judges
        )
    bound = Bound(request.bound or defaults.bound)
    if policy is Policy.MODEL_ASSISTED:
        bound = Bound.NORMAL  # its totals are not bounded scores: only the normal interval
    run = AdaptiveRun(
        session_id=record.id,
        policy=policy.value,
        bound=bound.value,
        delta=request.delta if request.delta is not None else defaults.delta,
        target_halfwidth=(request.target_halfwidth or defaults.target_halfwidth) / POINTS,
        check_every=defaults.check_every,
        pilot=defaults.pilot,
        checks_done=0,
        item_parameters=parameters,
        history_models=n_models,
        n_scored=0,
    )
    db.add(run)
    await db.flush()
    return run


async def get_run(db: AsyncSession, *, session_id: uuid.UUID) -> AdaptiveRun:
    run = await db.get(AdaptiveRun, session_id)
    if run is None:
        raise LookupError(f"session {session_id} has no adaptive run")
    return run


async def advance(
    db: AsyncSession, *, record: EvalSession, run: AdaptiveRun, judges: JudgeAssignment
) -> bool:
    """Prepare the delivery of position ``record.n_delivered``: False if the session must
    stop (the stopping rule fired at a new check point, or the policy has nothing left to
    deliver), else True with the policy's chosen item moved to that position (and, for
    ``model-assisted``, how it was drawn stored)."""
    policy = await load_policy(
        db, record=record, run=run, scores=await _scores(db, record=record, judges=judges)
    )
    index = policy.check_index()
    if index > run.checks_done:
        run.checks_done = index
        near = (
            await assisted.neighbours(db, record=record, judges=judges)
            if policy.wants_neighbours
            else []
        )
        decision = policy.decision(neighbours=near)
        _remember(run, decision, policy.n_scored)
        if decision.stop is not None:
            run.stop_reason = decision.stop.value
            return False
    pick = policy.next_item(n_delivered=record.n_delivered)
    if pick is None:
        return False
    if pick.position != record.n_delivered:
        await _swap_positions(db, sample_id=record.sample_id, a=pick.position, b=record.n_delivered)
    if pick.draw is not None:
        db.add(assisted.stored_draw(record.id, record.n_delivered, pick.draw))
    await db.flush()
    return True


async def summary(
    db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
) -> AdaptiveSummary:
    """The session's policy, its current estimate and half-width (points) over every score
    so far, and why it stopped (None while it runs)."""
    run = await get_run(db, session_id=record.id)
    policy = await load_policy(
        db, record=record, run=run, scores=await _scores(db, record=record, judges=judges)
    )
    figures = policy.estimate()
    estimate = halfwidth = None
    if not math.isnan(figures.decision.estimate.mean):  # NaN until every stratum is scored
        estimate = figures.decision.estimate.mean * POINTS
        halfwidth = figures.decision.halfwidth * POINTS
    stop_reason = None if run.stop_reason is None else StopReason(run.stop_reason)
    if stop_reason is None and record.n_delivered == policy.budget:
        stop_reason = StopReason.BUDGET
    return AdaptiveSummary(
        policy=AdaptivePolicy(run.policy),
        bound=AdaptiveBound(run.bound),
        delta=run.delta,
        target_halfwidth=round(run.target_halfwidth * POINTS, 9),
        budget=policy.budget,
        history_models=run.history_models,
        n_scored=policy.n_scored,
        estimate=estimate,
        halfwidth=halfwidth,
        checks=run.checks_done,
        stop_reason=stop_reason,
        disciplines=_discipline_summaries(figures, delta=run.delta),
    )


def _discipline_summaries(
    figures: Estimate, *, delta: float
) -> dict[str, DisciplineEstimate] | None:
    """Per discipline the estimate and its pointwise normal half-width (points) at
    ``delta``; None for the stratified policies (their strata are not disciplines)."""
    if figures.disciplines is None:
        return None
    z = float(NormalDist().inv_cdf(1.0 - delta / 2.0))
    return {
        name: DisciplineEstimate(
            estimate=d.mean * POINTS, halfwidth=z * d.standard_error * POINTS, n_items=d.n
        )
        for name, d in figures.disciplines.items()
    }


@dataclass(frozen=True, slots=True)
class SessionEstimate:
    """An adaptive session's estimate of its score on its pool, for the leaderboard: points
    (0-100), variance in points squared, the scored items behind it, and the same per
    discipline (discipline -> (points, variance, items))."""

    score: float
    variance: float
    n_items: int
    disciplines: dict[str, tuple[float, float, int]]


async def session_estimates(
    db: AsyncSession,
    *,
    session_ids: Collection[uuid.UUID],
    scores: Mapping[uuid.UUID, Mapping[int, float]],
) -> dict[uuid.UUID, SessionEstimate]:
    """The estimate of each adaptive session of ``session_ids`` that has one (sessions
    whose strata are not all scored yet are left out), from ``scores[session][position]``
    (in [0, 1]): the scores the leaderboard counts (``server.scoring.effective``)."""
    out: dict[uuid.UUID, SessionEstimate] = {}
    for session_id in sorted(session_ids, key=str):
        record = await db.get(EvalSession, session_id)
        run = await db.get(AdaptiveRun, session_id)
        if record is None or run is None:
            continue
        policy = await load_policy(
            db, record=record, run=run, scores=dict(scores.get(session_id, {}))
        )
        estimate = _session_estimate(policy.estimate(), n_scored=policy.n_scored)
        if estimate is not None:
            out[session_id] = estimate
    return out


def _session_estimate(figures: Estimate, *, n_scored: int) -> SessionEstimate | None:
    overall = figures.decision.estimate
    if math.isnan(overall.mean):
        return None
    return SessionEstimate(
        score=overall.mean * POINTS,
        variance=overall.variance * POINTS * POINTS,
        n_items=n_scored,
        disciplines={
            name: (d.mean * POINTS, d.variance * POINTS * POINTS, d.n)
            for name, d in (figures.disciplines or {}).items()
        },
    )


async def scores_of(
    db: AsyncSession, *, session_ids: Collection[uuid.UUID], judges: JudgeAssignment
) -> dict[uuid.UUID, dict[int, float]]:
    """Session -> position -> score in [0, 1] of every scored answer of ``session_ids``,
    as the leaderboard counts it (``server.scoring.effective``, the current prompt
    version); answers waiting for review are left out."""
    counted = await counted_answers(
        db,
        judges=judges,
        prompt_version=PROMPT_VERSION,
        where=[Verdict.session_id.in_(list(session_ids))],
    )
    out: dict[uuid.UUID, dict[int, float]] = {i: {} for i in session_ids}
    for answer in counted:
        if answer.score is not None:
            out[answer.row.session_id][answer.row.position] = answer.score / MAX_SCORE
    return out


async def _scores(
    db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
) -> dict[int, float]:
    return (await scores_of(db, session_ids=[record.id], judges=judges))[record.id]


def without_verdict_figures(summary: AdaptiveSummary) -> AdaptiveSummary:
    """``summary`` without the figures that move with single verdicts (estimate, interval,
    stop reason, counts of scores and checks: with ``completed`` they would give the review
    count); see ``server.scoring.visibility``."""
    return replace(
        summary,
        estimate=None,
        halfwidth=None,
        stop_reason=None,
        n_scored=None,
        checks=None,
        disciplines=None,
    )


def _remember(run: AdaptiveRun, decision: Decision, n_scored: int) -> None:
    run.estimate = None if math.isnan(decision.estimate.mean) else decision.estimate.mean
    run.halfwidth = None if math.isinf(decision.halfwidth) else decision.halfwidth
    run.n_scored = n_scored


async def _swap_positions(db: AsyncSession, *, sample_id: uuid.UUID, a: int, b: int) -> None:
    """Exchange two undelivered positions of a sample (through a free position, as the
    primary key and the unique item and family constraints forbid a direct swap)."""
    parked = -1 - a

    async def move(source: int, target: int) -> None:
        await db.execute(
            update(SampleItem)
            .where(SampleItem.sample_id == sample_id, SampleItem.position == source)
            .values(position=target)
            .execution_options(synchronize_session=False)
        )

    await move(a, parked)
    await move(b, a)
    await move(parked, b)


async def _history_parameters(
    db: AsyncSession,
    *,
    record: EvalSession,
    history_modes: Sequence[str],
    judges: JudgeAssignment,
) -> tuple[dict[str, list[float]], int]:
    """2PL parameters of the pool's items from other models' scores (each model's mean
    score of the item), and how many models they came from; nothing with fewer than two
    such models."""
    pool_items = select(SampleItem.item_id).where(SampleItem.sample_id == record.sample_id)
    counted = await counted_answers(
        db,
        judges=judges,
        prompt_version=PROMPT_VERSION,
        where=[
            EvalSession.model_id != record.model_id,
            EvalSession.mode.in_(history_modes),
            Answer.item_id.in_(pool_items),
        ],
        columns=(EvalSession.model_id, Answer.item_id),
        ordered=False,
        in_thread=True,
    )
    cells: dict[tuple[uuid.UUID, uuid.UUID], list[float]] = defaultdict(list)
    for answer in counted:
        if answer.score is not None:
            cells[answer.row.model_id, answer.row.item_id].append(answer.score / MAX_SCORE)
    models = sorted({model for model, _ in cells}, key=str)
    if len(models) < 2:
        return {}, len(models)
    items = sorted({item for _, item in cells}, key=str)
    row_of = {m: i for i, m in enumerate(models)}
    col_of = {it: j for j, it in enumerate(items)}
    matrix = np.full((len(models), len(items)), np.nan)
    for (model_id, item_id), scores in cells.items():
        matrix[row_of[model_id], col_of[item_id]] = fmean(scores)
    fitted = fit_2pl(matrix).items
    return (
        {str(it): [float(fitted.a[j]), float(fitted.b[j])] for it, j in col_of.items()},
        len(models),
    )
