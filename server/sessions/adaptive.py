"""The server side of adaptive sessions: the policy of :mod:`bank.adaptive`
driving delivery.

When the session opens, its pool is drawn exactly as for a fixed session of ``budget``
items (same sampler, same exposure reservations), and the 2PL parameters of the pool's
items are fitted on *other* models' past verdicts (``neyman-irt``, ``model-assisted``).
Before each new delivery, :func:`advance` rebuilds the policy's state from the database
(the delivered positions are the allocation, the verdicts so far are the scores:
objective items are scored at once, judged ones when the judge answers), evaluates the
stopping rule if a new check point of the schedule has been passed (each check point
once, so the union bound over checks holds), and moves the item the policy asks for to
the next position, so delivery stays strictly in order. When the rule fires,
delivery ends where it is (``server.sessions.delivery``: the session shrinks to what was
delivered and the rest of the pool goes back to the organisation); the state machine and
exposure rules are those of fixed sessions. ``model-assisted`` picks the item itself and
stores how it was drawn (:mod:`server.sessions.assisted`).
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.adaptive.assisted import AssistedState
from bank.adaptive.bounds import Bound
from bank.adaptive.irt import ItemParameters, fit_2pl
from bank.adaptive.policy import AdaptiveConfig, AdaptiveState, Decision, Policy, assign_strata
from bank.models import Item, SampleItem
from clients.sdk.types import (
    AdaptiveBound,
    AdaptivePolicy,
    AdaptiveSummary,
    DisciplineEstimate,
    StopReason,
)
from server.scoring.models import Verdict
from server.sessions import assisted
from server.sessions.limits import AdaptiveDefaults
from server.sessions.models import AdaptiveRun, Answer, EvalSession
from server.sessions.options import AdaptiveRequest

MAX_SCORE = 3.0
"""Verdicts are on the 0-3 rubric; the policy works on [0, 1]."""
POINTS = 100.0
IRT_POLICIES = (Policy.NEYMAN_IRT, Policy.MODEL_ASSISTED)
"""Policies that fit item parameters on the bank's history when a session opens."""


@dataclass(frozen=True, slots=True)
class PoolItem:
    position: int
    item_id: uuid.UUID
    stratum: Hashable


async def start(
    db: AsyncSession,
    *,
    record: EvalSession,
    request: AdaptiveRequest,
    defaults: AdaptiveDefaults,
    history_modes: Sequence[str],
) -> AdaptiveRun:
    """Record the session's policy and fit its items' parameters from the verdicts of
    other models' sessions in ``history_modes`` (flush)."""
    policy = Policy(request.policy or defaults.policy)
    parameters: dict[str, list[float]] = {}
    n_models = 0
    if policy in IRT_POLICIES:
        parameters, n_models = await _history_parameters(
            db, record=record, history_modes=history_modes
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


def config_of(run: AdaptiveRun, *, budget: int) -> AdaptiveConfig:
    return AdaptiveConfig(
        policy=Policy(run.policy),
        budget=budget,
        target_halfwidth=run.target_halfwidth,
        delta=run.delta,
        bound=Bound(run.bound),
        pilot=run.pilot,
        check_every=run.check_every,
    )


async def advance(db: AsyncSession, *, record: EvalSession, run: AdaptiveRun) -> bool:
    """Prepare the delivery of position ``record.n_delivered``: False if the session must
    stop (the stopping rule fired at a new check point), else True with the policy's
    chosen item moved to that position."""
    if run.policy == Policy.MODEL_ASSISTED.value:
        return await _advance_assisted(db, record=record, run=run)
    state, pool = await _rebuild(db, record=record, run=run)
    index = state.check_index()
    if index > run.checks_done:
        run.checks_done = index
        decision = state.decision()
        _remember(run, decision, state.n_scored)
        if decision.stop is not None:
            run.stop_reason = decision.stop.value
            return False
    key = state.next_stratum()
    if key is None:
        return False
    chosen = min(
        (p for p in pool if p.position >= record.n_delivered and p.stratum == key),
        key=lambda p: p.position,
    )
    if chosen.position != record.n_delivered:
        await _swap_positions(
            db, sample_id=record.sample_id, a=chosen.position, b=record.n_delivered
        )
    return True


async def _advance_assisted(db: AsyncSession, *, record: EvalSession, run: AdaptiveRun) -> bool:
    """``advance`` for ``model-assisted``: check, then draw with the policy's probabilities
    (from the operating system's randomness) and store how the item was drawn."""
    state = await _rebuild_assisted(db, record=record, run=run)
    index = state.check_index()
    if index > run.checks_done:
        run.checks_done = index
        decision = state.decision(neighbours=await assisted.neighbours(db, record=record))
        _remember(run, decision, state.n_scored)
        if decision.stop is not None:
            run.stop_reason = decision.stop.value
            return False
    draw = state.next_draw(np.random.default_rng(secrets.randbits(128)))
    if draw is None:
        return False
    if draw.item != record.n_delivered:  # pool index = position
        await _swap_positions(db, sample_id=record.sample_id, a=draw.item, b=record.n_delivered)
    db.add(assisted.stored_draw(record.id, record.n_delivered, draw))
    await db.flush()
    return True


async def summary(db: AsyncSession, *, record: EvalSession) -> AdaptiveSummary:
    """The session's policy, its current estimate and half-width (points) over every score
    so far, and why it stopped (None while it runs)."""
    run = await get_run(db, session_id=record.id)
    state = await _state(db, record=record, run=run)
    estimate = halfwidth = None
    decision = state.decision()
    if not math.isnan(decision.estimate.mean):  # NaN until every stratum has a score
        estimate = decision.estimate.mean * POINTS
        halfwidth = decision.halfwidth * POINTS
    budget = await _pool_size(db, record=record)
    disciplines = _discipline_summaries(state, delta=run.delta)
    stop_reason = None if run.stop_reason is None else StopReason(run.stop_reason)
    if stop_reason is None and record.n_delivered == budget:
        stop_reason = StopReason.BUDGET
    return AdaptiveSummary(
        policy=AdaptivePolicy(run.policy),
        bound=AdaptiveBound(run.bound),
        delta=run.delta,
        target_halfwidth=round(run.target_halfwidth * POINTS, 9),
        budget=budget,
        history_models=run.history_models,
        n_scored=state.n_scored,
        estimate=estimate,
        halfwidth=halfwidth,
        checks=run.checks_done,
        stop_reason=stop_reason,
        disciplines=disciplines,
    )


def _discipline_summaries(
    state: AdaptiveState | AssistedState, *, delta: float
) -> dict[str, DisciplineEstimate] | None:
    """Per discipline the estimate and its pointwise normal half-width (points) at
    ``delta``; None for the stratified policies (their strata are not disciplines)."""
    if not isinstance(state, AssistedState):
        return None
    z = float(NormalDist().inv_cdf(1.0 - delta / 2.0))
    return {
        name: DisciplineEstimate(
            estimate=d.mean * POINTS, halfwidth=z * d.standard_error * POINTS, n_items=d.n
        )
        for name, d in state.estimate().disciplines.items()
        if not math.isnan(d.mean)
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
    scores: Mapping[uuid.UUID, Mapping[int, float]] | None = None,
) -> dict[uuid.UUID, SessionEstimate]:
    """The estimate of each adaptive session of ``session_ids`` that has one (sessions
    whose strata are not all scored yet are left out). ``scores[session][position]`` (in
    [0, 1]) replaces the session's own scores, the mean of its verdicts: the leaderboard
    passes the scores it counts (its judges, reviewers first)."""
    out: dict[uuid.UUID, SessionEstimate] = {}
    for session_id in sorted(session_ids, key=str):
        record = await db.get(EvalSession, session_id)
        run = await db.get(AdaptiveRun, session_id)
        if record is None or run is None:
            continue
        given = None if scores is None else dict(scores.get(session_id, {}))
        estimate = await _session_estimate(db, record=record, run=run, scores=given)
        if estimate is not None:
            out[session_id] = estimate
    return out


async def _session_estimate(
    db: AsyncSession, *, record: EvalSession, run: AdaptiveRun, scores: dict[int, float] | None
) -> SessionEstimate | None:
    state = await _state(db, record=record, run=run, scores=scores)
    decision = state.decision()
    if math.isnan(decision.estimate.mean):
        return None
    disciplines: dict[str, tuple[float, float, int]] = {}
    if isinstance(state, AssistedState):
        disciplines = {
            name: (d.mean * POINTS, d.variance * POINTS * POINTS, d.n)
            for name, d in state.estimate().disciplines.items()
            if not math.isnan(d.mean)
        }
    return SessionEstimate(
        score=decision.estimate.mean * POINTS,
        variance=decision.estimate.variance * POINTS * POINTS,
        n_items=state.n_scored,
        disciplines=disciplines,
    )


async def _state(
    db: AsyncSession,
    *,
    record: EvalSession,
    run: AdaptiveRun,
    scores: dict[int, float] | None = None,
) -> AdaptiveState | AssistedState:
    """The policy's state rebuilt from the database (``scores``, if given, replaces the
    session's own)."""
    if run.policy == Policy.MODEL_ASSISTED.value:
        return await _rebuild_assisted(db, record=record, run=run, scores=scores)
    state, _ = await _rebuild(db, record=record, run=run, scores=scores)
    return state


async def _pool_rows(db: AsyncSession, *, record: EvalSession) -> list[assisted.PoolRow]:
    """The session's pool in position order."""
    rows = (
        await db.execute(
            select(SampleItem.position, SampleItem.item_id, Item.discipline, Item.qtype)
            .join(Item, Item.id == SampleItem.item_id)
            .where(SampleItem.sample_id == record.sample_id)
            .order_by(SampleItem.position)
        )
    ).all()
    return [assisted.PoolRow(r.position, r.item_id, r.discipline, r.qtype) for r in rows]


async def _rebuild_assisted(
    db: AsyncSession,
    *,
    record: EvalSession,
    run: AdaptiveRun,
    scores: dict[int, float] | None = None,
) -> AssistedState:
    pool = await _pool_rows(db, record=record)
    return assisted.restore(
        config_of(run, budget=len(pool)),
        pool,
        parameters=run.item_parameters or {},
        draws=await assisted.load_draws(db, session_id=record.id),
        scores=scores if scores is not None else await _scores(db, session_id=record.id),
        n_delivered=record.n_delivered,
    )


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


async def _pool_size(db: AsyncSession, *, record: EvalSession) -> int:
    count = await db.scalar(
        select(func.count()).select_from(SampleItem).where(SampleItem.sample_id == record.sample_id)
    )
    return int(count or 0)


async def _rebuild(
    db: AsyncSession,
    *,
    record: EvalSession,
    run: AdaptiveRun,
    scores: dict[int, float] | None = None,
) -> tuple[AdaptiveState, list[PoolItem]]:
    """The policy's state from the database: strata of the whole pool (the session's
    population), the delivered positions as allocated, the verdicts (or ``scores``) as
    scores."""
    rows = await _pool_rows(db, record=record)
    config = config_of(run, budget=len(rows))
    params = run.item_parameters or {}
    difficulty = [params[str(r.item_id)][1] if str(r.item_id) in params else None for r in rows]
    keys = assign_strata(
        [(r.discipline, r.qtype) for r in rows],
        policy=config.policy,
        bands=config.bands,
        difficulty=difficulty if params else None,
    )
    pool = [PoolItem(r.position, r.item_id, key) for r, key in zip(rows, keys, strict=True)]
    sizes: dict[Hashable, int] = {}
    members: dict[Hashable, list[str]] = {}
    for item in pool:
        sizes[item.stratum] = sizes.get(item.stratum, 0) + 1
        members.setdefault(item.stratum, []).append(str(item.item_id))
    item_parameters = {
        key: ItemParameters(
            np.array([params[i][0] for i in ids if i in params], dtype=np.float64),
            np.array([params[i][1] for i in ids if i in params], dtype=np.float64),
        )
        for key, ids in members.items()
        if any(i in params for i in ids)
    }
    state = AdaptiveState.start(
        config,
        sizes,
        costs=await _stratum_costs(db, record=record, pool=pool),
        item_parameters=item_parameters,
    )
    by_position = {p.position: p for p in pool}
    for position in range(record.n_delivered):
        state.allocated(by_position[position].stratum)
    if scores is None:
        scores = await _scores(db, session_id=record.id)
    for position, score in scores.items():
        item = by_position[position]
        ab = params.get(str(item.item_id))
        state.record(item.stratum, score, item=(ab[0], ab[1]) if ab else None)
    return state, pool


async def _scores(db: AsyncSession, *, session_id: uuid.UUID) -> dict[int, float]:
    """Position -> score in [0, 1] of every scored answer (the mean if several judges)."""
    rows = (
        await db.execute(
            select(Verdict.position, func.avg(Verdict.score))
            .where(Verdict.session_id == session_id, Verdict.score.is_not(None))
            .group_by(Verdict.position)
        )
    ).all()
    return {int(position): float(score) / MAX_SCORE for position, score in rows}


async def _stratum_costs(
    db: AsyncSession, *, record: EvalSession, pool: list[PoolItem]
) -> dict[Hashable, float]:
    """c_h: the stratum's mean tokens per answer (as clients report them) relative to the
    session's mean; strata without reports cost 1."""
    rows = (
        await db.execute(
            select(Answer.position, Answer.prompt_tokens, Answer.completion_tokens).where(
                Answer.session_id == record.id,
                Answer.prompt_tokens.is_not(None),
                Answer.completion_tokens.is_not(None),
            )
        )
    ).all()
    if not rows:
        return {}
    by_position = {p.position: p.stratum for p in pool}
    spent: dict[Hashable, list[int]] = {}
    for position, prompt, completion in rows:
        spent.setdefault(by_position[position], []).append(prompt + completion)
    overall = sum(sum(v) for v in spent.values()) / sum(len(v) for v in spent.values())
    if overall <= 0:
        return {}
    return {key: max(sum(v) / len(v) / overall, 0.05) for key, v in spent.items()}


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
    db: AsyncSession, *, record: EvalSession, history_modes: Sequence[str]
) -> tuple[dict[str, list[float]], int]:
    """2PL parameters of the pool's items from other models' verdicts, and how many models
    they came from; nothing with fewer than two such models."""
    pool_items = select(SampleItem.item_id).where(SampleItem.sample_id == record.sample_id)
    rows = (
        await db.execute(
            select(EvalSession.model_id, Answer.item_id, func.avg(Verdict.score))
            .join(
                Answer,
                (Answer.session_id == Verdict.session_id) & (Answer.position == Verdict.position),
            )
            .join(EvalSession, EvalSession.id == Verdict.session_id)
            .where(
                Verdict.score.is_not(None),
                EvalSession.model_id != record.model_id,
                EvalSession.mode.in_(history_modes),
                Answer.item_id.in_(pool_items),
            )
            .group_by(EvalSession.model_id, Answer.item_id)
        )
    ).all()
    models = sorted({r[0] for r in rows}, key=str)
    if len(models) < 2:
        return {}, len(models)
    items = sorted({r[1] for r in rows}, key=str)
    row_of = {m: i for i, m in enumerate(models)}
    col_of = {it: j for j, it in enumerate(items)}
    matrix = np.full((len(models), len(items)), np.nan)
    for model_id, item_id, score in rows:
        matrix[row_of[model_id], col_of[item_id]] = float(score) / MAX_SCORE
    fitted = fit_2pl(matrix).items
    return (
        {str(it): [float(fitted.a[j]), float(fitted.b[j])] for it, j in col_of.items()},
        len(models),
    )
