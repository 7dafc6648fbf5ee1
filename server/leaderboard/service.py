"""Reading scored sessions for the leaderboard, the anchor designation, and contamination.

The statistics are pure (``judge.ranking``, ``judge.contamination``); this module only
gathers their input from the database: for every model, the 0-3 scores of its scored
sessions by discipline (the score each answer counts with: ``server.scoring.effective``),
the end-to-end time of every answer and the tokens clients reported. Fixed sessions feed
the ranking by their item scores, adaptive sessions by their estimates
(``server.sessions.adaptive.session_estimates``: an unbiased estimate of the session's
score on its pool and its variance, as ``judge.ranking.stability.EstimatedSession``; their
raw item scores are biased by the informative selection and never enter a score); replay
and anchor-set sessions feed only the contamination report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.pool import NullPool

from judge.contamination.generalisation_gap import GapReport, ScoreEstimate, generalisation_gap
from judge.contamination.replay import ReplayRate, replay_rate
from judge.prompts import PROMPT_VERSION
from judge.ranking.leaderboard import (
    BoardDiagnostics,
    DisciplineEstimate,
    EstimatedSession,
    Leaderboard,
    ModelRecord,
    board_diagnostics,
    build_leaderboard,
)
from judge.ranking.pairwise import (
    BradleyTerryError,
    BradleyTerryResult,
    EloResult,
    bradley_terry,
    comparisons_from_items,
    elo,
)
from judge.ranking.scores import MAX_SCORE
from server.calibration.gate import JudgeCalibrationView, calibration_of
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.errors import NotFound
from server.leaderboard.aggregates import aggregate_fixed_scores, can_aggregate
from server.leaderboard.models import LeaderboardChange, RankingAnchor
from server.orgs.models import Organisation
from server.registry.models import RegisteredModel
from server.review.models import ReviewTask
from server.review.states import ReviewTaskState
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.scoring.models import Verdict
from server.sessions.adaptive import SessionEstimate, session_estimates
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import SessionMode, modes_where
from server.sessions.states import SCORED_STATE_VALUES, SessionState

_T = TypeVar("_T")
log = logging.getLogger(__name__)


@dataclass
class _Collected:
    """What the database holds for one model, by session mode."""

    sessions: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    positions: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    """Session id -> position -> the score it counts with (adaptive sessions' estimates
    are computed on these)."""
    items: dict[uuid.UUID, list[int]] = field(default_factory=lambda: defaultdict(list))
    """Item id -> its scores (per-item comparisons between models, for Elo and BT)."""
    disciplines: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    panel: list[list[float]] = field(default_factory=list)
    """Per counted answer, one score per judge (``AnswerRatings.judge_columns``)."""
    latencies_s: list[float] = field(default_factory=list)
    reported_latencies_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    n_with_usage: int = 0


@dataclass(frozen=True, slots=True)
class Contamination:
    """Per model key: the replay rate (replay sessions) and the generalisation gap
    (fixed sessions versus anchor-set sessions)."""

    replay: dict[str, ReplayRate]
    gap: GapReport | None


@dataclass(frozen=True, slots=True)
class Baselines:
    """Elo (LLMEval-Fair, Zhang et al., app. D) and Bradley-Terry ratings from per-item
    comparisons: two models compared on every item both were served (their mean score on
    it)."""

    n_comparisons: int
    elo: EloResult | None
    bradley_terry: BradleyTerryResult | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderboardData:
    board: Leaderboard
    contamination: Contamination
    judges: JudgeAssignment
    prompt_version: str
    baselines: Baselines | None = None
    diagnostics: BoardDiagnostics | None = None
    calibration: JudgeCalibrationView | None = None
    """The default judge's run the gate reads (None: uncalibrated)."""
    stale: bool = False
    """Computed before the latest verdict, review or anchor (``cached_leaderboard``): a
    newer board is being computed."""


async def _scores_by_model(
    db: AsyncSession, *, mode: SessionMode, judges: JudgeAssignment, prompt_version: str
) -> dict[uuid.UUID, _Collected]:
    """Scored sessions of ``mode``, each answer with the score it counts with
    (``server.scoring.effective``: reviewers first, then the panel); answers still waiting
    for review are left out of the scores, never counted as 0."""
    counted = await counted_answers(
        db,
        judges=judges,
        prompt_version=prompt_version,
        where=[EvalSession.state.in_(SCORED_STATE_VALUES), EvalSession.mode == mode.value],
        columns=(
            EvalSession.model_id,
            Answer.item_id,
            Answer.delivered_at,
            Answer.submitted_at,
            Answer.reported_latency_s,
            Answer.prompt_tokens,
            Answer.completion_tokens,
        ),
    )
    out: dict[uuid.UUID, _Collected] = defaultdict(_Collected)
    for answer in counted:
        score, ratings, row = answer.score, answer.ratings, answer.row
        if score is None:
            continue
        entry = out[row.model_id]
        entry.sessions.setdefault(row.session_id, []).append(score)
        entry.positions.setdefault(row.session_id, {})[row.position] = score
        entry.items[row.item_id].append(score)
        entry.disciplines[row.discipline].append(score)
        entry.panel.append(ratings.judge_columns(judges))
        entry.latencies_s.append(max(0.0, (row.submitted_at - row.delivered_at).total_seconds()))
        if row.reported_latency_s is not None:
            entry.reported_latencies_s.append(row.reported_latency_s)
        if row.prompt_tokens is not None and row.completion_tokens is not None:
            entry.prompt_tokens += row.prompt_tokens
            entry.completion_tokens += row.completion_tokens
            entry.n_with_usage += 1
    return out


async def _models(
    db: AsyncSession, ids: set[uuid.UUID]
) -> dict[uuid.UUID, tuple[RegisteredModel, str]]:
    rows = await db.execute(
        select(RegisteredModel, Organisation.name)
        .join(Organisation, Organisation.id == RegisteredModel.org_id)
        .where(RegisteredModel.id.in_(ids))
    )
    return {model.id: (model, org) for model, org in rows.tuples()}


def _display_names(models: dict[uuid.UUID, tuple[RegisteredModel, str]]) -> dict[uuid.UUID, str]:
    """The model's name, qualified by snapshot and then organisation where names collide."""
    names: dict[uuid.UUID, str] = {}
    counts: dict[str, int] = defaultdict(int)
    for model, _org in models.values():
        counts[model.name] += 1
    for model_id, (model, org) in models.items():
        name = model.name
        if counts[name] > 1:
            name = f"{model.name} ({model.api_snapshot}, {org})"
        names[model_id] = name
    return names


async def leaderboard(
    db: AsyncSession,
    *,
    judges: JudgeAssignment,
    prompt_version: str,
    n_resamples: int,
    threshold: float,
    gap_threshold: float,
    baselines: bool = False,
    diagnostics: bool = False,
    calibration: JudgeCalibrationView | None = None,
) -> LeaderboardData:
    """The leaderboard from the verdicts of the ``judges`` (a panel, or one judge) under
    ``prompt_version`` and the reviewers' scores, with the current anchor designation, the
    contamination report and, on request, Elo and Bradley-Terry ratings (``baselines``)
    and the ReLE diagnostics of the discipline scores (``diagnostics``, over ReLE's
    weighting schemes when the disciplines are the LLMEval-Fair ten).

    Where a panel of several judges scored, the intervals, rank ranges and tie groups
    include the judge's variance: the bootstrap resamples the judges too
    (``judge.ranking.judge_variance``).

    Scored and reviewed adaptive sessions count as sessions of their model by their
    estimates (``_adaptive_estimates``); a model with adaptive sessions only is ranked
    too. Their answers' latencies and tokens count in the model's usage."""
    fixed = await _fixed_scores(
        db, judges=judges, prompt_version=prompt_version, items_needed=baselines
    )
    replay, anchor_set = [
        await _scores_by_model(db, mode=mode, judges=judges, prompt_version=prompt_version)
        for mode in (SessionMode.REPLAY, SessionMode.ANCHOR)
    ]
    adaptive = await _scores_by_model(
        db, mode=SessionMode.ADAPTIVE, judges=judges, prompt_version=prompt_version
    )
    estimated = await _adaptive_estimates(db, counted=adaptive)
    models = await _models(db, set(fixed) | set(replay) | set(anchor_set) | set(estimated))
    names = _display_names(models)
    current = await current_anchor(db)
    anchor_key = str(current.model_id) if current is not None and current.model_id else None
    under_review = await _sessions_under_review(db)
    records = [
        _record(
            model_id,
            models[model_id],
            names[model_id],
            fixed.get(model_id, _Collected()),
            under_review.get(model_id, 0),
            estimated=estimated.get(model_id, []),
            adaptive=adaptive.get(model_id),
        )
        for model_id in [*fixed, *(m for m in estimated if m not in fixed)]
    ]
    board = build_leaderboard(
        records,
        anchor=anchor_key,
        threshold=threshold,
        n_resamples=n_resamples,
        judge_panels=_judge_panels(fixed, judges),
        panel_rule=judges.rule,
    )
    contamination = Contamination(
        replay={str(m): replay_rate(_near_exact(data)) for m, data in replay.items()},
        gap=_gap(board, anchor_set, gap_threshold),
    )
    extra = _baselines(fixed) if baselines else None
    found = board_diagnostics(board) if diagnostics else None
    return LeaderboardData(board, contamination, judges, prompt_version, extra, found, calibration)


async def _fixed_scores(
    db: AsyncSession, *, judges: JudgeAssignment, prompt_version: str, items_needed: bool
) -> dict[uuid.UUID, _Collected]:
    """The fixed sessions' scores: aggregated by the database where that gives exactly
    the same statistics (``server.leaderboard.aggregates``), else row by row."""
    if can_aggregate(db, judges, items_needed=items_needed):
        return await aggregate_fixed_scores(
            db,
            mode=SessionMode.FIXED,
            judges=judges,
            prompt_version=prompt_version,
            make=_Collected,
        )
    return await _scores_by_model(
        db, mode=SessionMode.FIXED, judges=judges, prompt_version=prompt_version
    )


def _judge_panels(
    fixed: dict[uuid.UUID, _Collected], judges: JudgeAssignment
) -> dict[str, npt.NDArray[np.float64]] | None:
    """Per model its answers' scores by every judge, when some answer had several judges:
    the bootstrap then resamples judges too. None: one judge scored everything."""
    if len(judges.every_judge) < 2:
        return None
    panels = {
        str(model_id): np.asarray(data.panel, dtype=np.float64).reshape(
            len(data.panel), len(judges.every_judge)
        )
        for model_id, data in fixed.items()
    }
    several = any((np.isfinite(p).sum(axis=1) > 1).any() for p in panels.values())
    return panels if several else None


async def _adaptive_estimates(
    db: AsyncSession, *, counted: Mapping[uuid.UUID, _Collected]
) -> dict[uuid.UUID, list[EstimatedSession]]:
    """Per model, the estimates of its ``scored`` and ``reviewed`` adaptive sessions,
    oldest first, on the scores the board counts (``counted``: its judges, reviewers
    first); sessions without an estimate yet are left out."""
    rows = (
        await db.execute(
            select(EvalSession.model_id, EvalSession.id)
            .where(
                EvalSession.state.in_(SCORED_STATE_VALUES),
                EvalSession.mode == SessionMode.ADAPTIVE.value,
            )
            .order_by(EvalSession.created_at, EvalSession.id)
        )
    ).all()
    if not rows:
        return {}
    scores = {
        session_id: {position: score / MAX_SCORE for position, score in by_position.items()}
        for data in counted.values()
        for session_id, by_position in data.positions.items()
    }
    found = await session_estimates(db, session_ids=[row.id for row in rows], scores=scores)
    out: dict[uuid.UUID, list[EstimatedSession]] = defaultdict(list)
    for row in rows:
        estimate = found.get(row.id)
        if estimate is not None:
            out[row.model_id].append(_estimated_session(estimate))
    return dict(out)


def _estimated_session(estimate: SessionEstimate) -> EstimatedSession:
    return EstimatedSession(
        score=estimate.score,
        variance=estimate.variance,
        disciplines={
            name: DisciplineEstimate(float(points), float(variance), int(n))
            for name, (points, variance, n) in estimate.disciplines.items()
        },
        n_items=estimate.n_items,
    )


async def _sessions_under_review(db: AsyncSession) -> dict[uuid.UUID, int]:
    """Per model, its fixed and adaptive ``scored`` sessions with open reviews: their
    score may still change when a reviewer scores an answer."""
    rows = await db.execute(
        select(EvalSession.model_id, func.count(distinct(EvalSession.id)))
        .join(ReviewTask, ReviewTask.session_id == EvalSession.id)
        .where(
            ReviewTask.state == ReviewTaskState.OPEN.value,
            EvalSession.state == SessionState.SCORED.value,
            EvalSession.mode.in_(modes_where(lambda traits: traits.ranked)),
        )
        .group_by(EvalSession.model_id)
    )
    return {model_id: count for model_id, count in rows.tuples()}


def _baselines(fixed: dict[uuid.UUID, _Collected]) -> Baselines:
    per_item = {
        str(model_id): {item: sum(s) / len(s) for item, s in data.items.items()}
        for model_id, data in fixed.items()
    }
    comparisons = comparisons_from_items(per_item)
    if not comparisons:
        return Baselines(0, None, None, "no two models share an item")
    ratings = elo(comparisons, rng=0)
    try:
        strengths: BradleyTerryResult | None = bradley_terry(comparisons)
        note = None
    except BradleyTerryError as error:
        strengths, note = None, f"Bradley-Terry: {error}"
    return Baselines(len(comparisons), ratings, strengths, note)


def _record(
    model_id: uuid.UUID,
    info: tuple[RegisteredModel, str],
    name: str,
    data: _Collected,
    under_review: int,
    *,
    estimated: list[EstimatedSession],
    adaptive: _Collected | None,
) -> ModelRecord:
    """The model's record: fixed sessions by their items, adaptive ones by ``estimated``;
    ``adaptive`` (the adaptive sessions' answers) adds to latency and usage only."""
    model, org = info
    usage = [data] if adaptive is None else [data, adaptive]
    return ModelRecord(
        key=str(model_id),
        name=name,
        sessions=list(data.sessions.values()),
        disciplines=dict(data.disciplines),
        latencies_s=[s for part in usage for s in part.latencies_s],
        reported_latencies_s=[s for part in usage for s in part.reported_latencies_s],
        prompt_tokens=sum(part.prompt_tokens for part in usage),
        completion_tokens=sum(part.completion_tokens for part in usage),
        n_with_usage=sum(part.n_with_usage for part in usage),
        usd_per_mtok_in=model.usd_per_mtok_in,
        usd_per_mtok_out=model.usd_per_mtok_out,
        estimated_sessions=estimated,
        extra={
            "model_id": str(model_id),
            "model": model.name,
            "api_snapshot": model.api_snapshot,
            "family": model.family,
            "organisation": org,
            "sessions_under_review": under_review,
        },
    )


def _near_exact(data: _Collected) -> list[bool]:
    """Replay verdicts score ``MAX_SCORE`` for a near-exact completion, 0 otherwise."""
    return [score == MAX_SCORE for scores in data.sessions.values() for score in scores]


def _gap(
    board: Leaderboard, anchor_set: dict[uuid.UUID, _Collected], threshold: float
) -> GapReport | None:
    """Fixed-session score against anchor-set score for the models that have both."""
    private = {str(m): _pooled_estimate(data) for m, data in anchor_set.items()}
    public = {
        row.key: ScoreEstimate(row.absolute.mean, row.absolute.standard_error)
        for row in board.rows
        if row.key in private
    }
    if not public:
        return None
    return generalisation_gap(
        public, {k: v for k, v in private.items() if k in public}, threshold=threshold
    )


def _pooled_estimate(data: _Collected) -> ScoreEstimate:
    """Eq. 1 over every anchor-set item of the model, with the standard error of a mean."""
    scores = [s for session in data.sessions.values() for s in session]
    n = len(scores)
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    scale = 100 / MAX_SCORE
    return ScoreEstimate(mean * scale, math.sqrt(variance / n) * scale)


async def current_anchor(db: AsyncSession) -> RankingAnchor | None:
    """The newest anchor designation (None: none was ever made, the top model anchors)."""
    anchor: RankingAnchor | None = await db.scalar(
        select(RankingAnchor).order_by(RankingAnchor.id.desc()).limit(1)
    )
    return anchor


async def set_anchor(
    db: AsyncSession, *, model_id: uuid.UUID | None, set_by: str, now: datetime
) -> RankingAnchor:
    """Designate the anchor model (None: the top model); every change is kept."""
    if model_id is not None and await db.get(RegisteredModel, model_id) is None:
        raise NotFound(f"no model {model_id}")
    anchor = RankingAnchor(model_id=model_id, set_by=set_by, set_at=now)
    db.add(anchor)
    await db.flush()
    return anchor


async def anchor_history(db: AsyncSession) -> list[RankingAnchor]:
    """Every anchor designation, newest first (the first is the current one)."""
    rows = await db.execute(select(RankingAnchor).order_by(RankingAnchor.id.desc()))
    return list(rows.scalars())


async def configured_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    baselines: bool = False,
    diagnostics: bool = False,
) -> LeaderboardData:
    """``leaderboard`` as ``GET /v1/leaderboard`` builds it: the current prompt version,
    the default judge's calibration, and the resamples and thresholds of ``settings``."""
    return await leaderboard(
        db,
        judges=judges,
        calibration=await calibration_of(db, settings, judges.default),
        prompt_version=PROMPT_VERSION,
        n_resamples=settings.leaderboard_resamples,
        threshold=settings.leaderboard_tie_threshold,
        gap_threshold=settings.contamination_gap_threshold,
        baselines=baselines,
        diagnostics=diagnostics,
    )


SESSION_Z = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


@dataclass(frozen=True, slots=True)
class SessionScore:
    """One scored session's absolute score ``S`` (eq. 1, 0-100) over its scored answers,
    with a normal-approximation 95% interval (mean ± 1.96 standard errors of its item
    scores, clipped to 0-100). An adaptive session's score is its estimate, the one the
    leaderboard counts, with ± 1.96 of its standard error (its raw item mean is biased
    by the informative selection)."""

    session_id: uuid.UUID
    created_at: datetime
    mode: str
    n_scored: int
    score: float
    ci_low: float
    ci_high: float


async def session_scores(
    db: AsyncSession, *, model_id: uuid.UUID, judges: JudgeAssignment, prompt_version: str
) -> list[SessionScore]:
    """Every ``scored``/``reviewed`` session of ``model_id`` that has a scored answer,
    oldest first, with ``S`` from the scores the leaderboard counts
    (``server.scoring.effective``; answers waiting for review are left out). No visibility
    check: the caller has checked the model may be seen."""
    answers = await counted_answers(
        db,
        judges=judges,
        prompt_version=prompt_version,
        where=[EvalSession.model_id == model_id, EvalSession.state.in_(SCORED_STATE_VALUES)],
        columns=(EvalSession.created_at, EvalSession.mode),
    )
    sessions: dict[uuid.UUID, tuple[datetime, str]] = {}
    scores: dict[uuid.UUID, list[int]] = defaultdict(list)
    counted: dict[uuid.UUID, dict[int, float]] = defaultdict(dict)
    for answer in answers:
        row = answer.row
        sessions.setdefault(row.session_id, (row.created_at, row.mode))
        if answer.score is not None:
            scores[row.session_id].append(answer.score)
            counted[row.session_id][row.position] = answer.score / MAX_SCORE
    adaptive = [i for i, (_, mode) in sessions.items() if mode == SessionMode.ADAPTIVE.value]
    estimates = (
        await session_estimates(db, session_ids=adaptive, scores=counted) if adaptive else {}
    )
    return [
        _session_score(session_id, created_at, mode, scores[session_id], estimates.get(session_id))
        for session_id, (created_at, mode) in sessions.items()
        if scores[session_id]
    ]


def _session_score(
    session_id: uuid.UUID,
    created_at: datetime,
    mode: str,
    scores: list[int],
    estimate: SessionEstimate | None = None,
) -> SessionScore:
    n = len(scores)
    scale = 100 / MAX_SCORE
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    half = SESSION_Z * math.sqrt(variance / n) * scale
    value = mean * scale
    if estimate is not None:
        value, half = estimate.score, SESSION_Z * math.sqrt(max(estimate.variance, 0.0))
    return SessionScore(
        session_id=session_id,
        created_at=created_at,
        mode=mode,
        n_scored=n,
        score=value,
        ci_low=max(0.0, value - half),
        ci_high=min(100.0, value + half),
    )


# --------------------------------------------------------------------------- #
# Memoised reads: the same figures while the data they come from is unchanged
# --------------------------------------------------------------------------- #

MEMO_ENTRIES = 32
"""Leaderboards and session-score lists kept per process (least recently used dropped)."""
_memo: OrderedDict[Hashable, tuple[Hashable, Any]] = OrderedDict()


async def data_version(db: AsyncSession) -> Hashable:
    """A value that changes whenever an input of the leaderboard may have: a verdict added
    or removed, a session scored or reviewed, a review task opened or closed, an anchor
    designated, a model registered; with the database's URL.

    On PostgreSQL it is the sum of ``leaderboard_changes``, which the database's triggers
    bump on every such write, whoever makes it (any worker, process or host): sixteen rows,
    whatever the number of verdicts. It is read before the data it labels, so a value
    computed under it is never older than it. Elsewhere (SQLite) it is ``_counted_version``.
    """
    if db.get_bind().dialect.name == "postgresql":
        total = await db.scalar(select(func.sum(LeaderboardChange.n)))
        return (str(db.get_bind().engine.url), "changes", int(total or 0))
    return await _counted_version(db)


async def _counted_version(db: AsyncSession) -> Hashable:
    """The data version from the tables: a verdict added or removed (its highest id and
    count), and the counts behind the other inputs. One statement of index-backed
    aggregates (a count of the verdicts is the dearest)."""
    scored = EvalSession.state.in_(SCORED_STATE_VALUES)
    is_open = ReviewTask.state == ReviewTaskState.OPEN.value
    figures = (
        await db.execute(
            select(
                select(func.max(Verdict.id)).scalar_subquery(),
                select(func.count()).select_from(Verdict).scalar_subquery(),
                select(func.count()).select_from(EvalSession).where(scored).scalar_subquery(),
                select(func.count())
                .select_from(EvalSession)
                .where(EvalSession.state == SessionState.REVIEWED.value)
                .scalar_subquery(),
                select(func.count()).select_from(ReviewTask).where(is_open).scalar_subquery(),
                select(func.count()).select_from(ReviewTask).scalar_subquery(),
                select(func.max(RankingAnchor.id)).scalar_subquery(),
                select(func.count()).select_from(RegisteredModel).scalar_subquery(),
            )
        )
    ).one()
    return (str(db.get_bind().engine.url), *figures)


def _judges_key(judges: JudgeAssignment) -> Hashable:
    return (judges.default, judges.panel, tuple(sorted(judges.by_discipline.items())), judges.rule)


_refreshing: dict[Hashable, asyncio.Task[None]] = {}


async def _memoised(
    db: AsyncSession,
    key: Hashable,
    compute: Callable[[AsyncSession], Awaitable[_T]],
    *,
    refresh_on: AsyncEngine | None = None,
) -> tuple[_T, bool]:
    """``compute(db)``'s value and whether it is fresh, reused while ``data_version`` is
    unchanged. When the data has changed since: with ``refresh_on`` (the server's engine),
    the value computed on the older data comes back at once (not fresh) and one refresh
    per key computes the new one in a thread of its own (``_compute_in_thread``: seconds
    of Python work do not hold the server's event loop); without, it is computed now. A
    value never computed is computed now either way."""
    key = (str(db.get_bind().engine.url), key)  # never another database's board, stale or not
    version = await data_version(db)
    found = _memo.get(key)
    if found is not None and found[0] == version:
        _memo.move_to_end(key)
        return found[1], True
    if found is not None and refresh_on is not None and _has_file(refresh_on):
        _refresh_later(key, compute, refresh_on)
        return found[1], False
    value = await compute(db)
    _remember(key, version, value)
    return value, True


def _has_file(engine: AsyncEngine) -> bool:
    """Whether another engine on the same URL sees the same data (not in-memory SQLite)."""
    return engine.dialect.name != "sqlite" or engine.url.database not in (None, "", ":memory:")


def _remember(key: Hashable, version: Hashable, value: object) -> None:
    """Keep ``value`` as ``key``'s, unless the memo holds one computed on newer data: a
    build that read the data before a change can finish after a request that computed
    the board on it (a refresh thread against an admin's designation), and putting the
    older board back would serve it, stale, on the next page view."""
    found = _memo.get(key)
    if found is not None and found[0] != version and _covers(found[0], version):
        return
    _memo[key] = (version, value)
    _memo.move_to_end(key)
    while len(_memo) > MEMO_ENTRIES:
        _memo.popitem(last=False)


def _refresh_later(
    key: Hashable, compute: Callable[[AsyncSession], Awaitable[Any]], engine: AsyncEngine
) -> None:
    """Compute ``key``'s value on the current data in a thread, once at a time per key."""
    running = _refreshing.get(key)
    if running is not None and not running.done():
        return
    url = engine.url.render_as_string(hide_password=False)

    async def refresh() -> None:
        try:
            version, value = await asyncio.to_thread(_compute_in_thread, compute, url)
        except Exception:
            log.exception("refreshing the cached leaderboard failed")
            return
        _remember(key, version, value)  # on the server's loop: the memo has one writer

    _refreshing[key] = asyncio.create_task(refresh(), name="leaderboard-refresh")


def _compute_in_thread(
    compute: Callable[[AsyncSession], Awaitable[_T]], url: str
) -> tuple[Hashable, _T]:
    """``compute`` and the data version it saw, on an event loop and engine of this
    thread's own (asyncpg connections belong to one loop)."""

    async def run() -> tuple[Hashable, _T]:
        engine = create_engine(url, poolclass=NullPool)  # one connection, closed after
        try:
            async with unit_of_work(engine) as db:
                return await data_version(db), await compute(db)
        finally:
            await engine.dispose()

    return asyncio.run(run())


async def cached_on_data(
    db: AsyncSession, key: Hashable, compute: Callable[[AsyncSession], Awaitable[_T]]
) -> _T:
    """``compute(db)``, computed again only when ``data_version`` changes: for figures of
    the verdicts and reviews that pages show on every view (agreement with bootstraps)."""
    value, _ = await _memoised(db, ("on-data", key), compute)
    return value


async def cached_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    baselines: bool = False,
    diagnostics: bool = False,
    refresh_on: AsyncEngine | None = None,
) -> LeaderboardData:
    """``configured_leaderboard``, computed again only when ``data_version`` changes (the
    judge's calibration is read fresh every time): the console reads the board on every
    page view, and on a big deployment computing it takes seconds. With ``refresh_on``, a
    board computed before the latest change is returned at once with ``stale`` set while
    a thread computes the new one (``_memoised``)."""
    key = _board_key(settings, judges, baselines=baselines, diagnostics=diagnostics)

    async def compute(own: AsyncSession) -> LeaderboardData:
        return await configured_leaderboard(
            own, settings=settings, judges=judges, baselines=baselines, diagnostics=diagnostics
        )

    data, fresh = await _memoised(db, key, compute, refresh_on=refresh_on)
    calibration = await calibration_of(db, settings, judges.default)
    return dataclasses.replace(data, calibration=calibration, stale=not fresh)


@dataclass(frozen=True, slots=True)
class _Build:
    """A computation of one memo key in a thread, giving ``(version, value)``; ``mark``
    orders its start against the version reads of requests (``_marks``)."""

    mark: int
    task: asyncio.Task[tuple[Hashable, Any]]


_builds: dict[Hashable, _Build] = {}
_marks = itertools.count()


async def _fresh(
    db: AsyncSession,
    key: Hashable,
    compute: Callable[[AsyncSession], Awaitable[_T]],
    *,
    engine: AsyncEngine,
) -> _T:
    """``compute``'s value on data at least as new as the data version read now: the
    memo's when its version is that one (one read of ``leaderboard_changes``), else a
    build's in a thread of its own (the server's event loop keeps serving; on SQLite, on
    the request's own connection, computed now). One build at a
    time per key, which every request arriving meanwhile joins; a request takes its value
    if the build read a version no older than its own (``_covers``) or started after the
    request's version read, and otherwise waits for the next build. Never a value older
    than a change committed before the request read the version."""
    key = (str(db.get_bind().engine.url), key)
    version = await data_version(db)
    found = _memo.get(key)
    if found is not None and found[0] == version:
        _memo.move_to_end(key)
        return found[1]  # type: ignore[no-any-return]
    if engine.dialect.name != "postgresql":  # SQLite: a second connection may wait on a lock
        value = await compute(db)
        _remember(key, version, value)
        return value
    mark = next(_marks)
    while True:
        build = _builds.get(key)
        if build is None or build.task.done():
            build = _Build(next(_marks), asyncio.create_task(_build(key, compute, engine)))
            _builds[key] = build
        built, value = await asyncio.shield(build.task)  # a failed build fails its requests
        if build.mark > mark or _covers(built, version):
            return value


def _covers(built: Hashable, seen: Hashable) -> bool:
    """Whether data of version ``built`` include every change counted in ``seen``: the
    change counter only grows (PostgreSQL); other versions only by equality."""
    counted = isinstance(built, tuple) and isinstance(seen, tuple) and len(built) == len(seen) == 3
    if counted and built[:2] == seen[:2] and built[1] == "changes":  # type: ignore[index]
        return bool(built[2] >= seen[2])  # type: ignore[index]
    return built == seen


async def _build(
    key: Hashable, compute: Callable[[AsyncSession], Awaitable[_T]], engine: AsyncEngine
) -> tuple[Hashable, _T]:
    url = engine.url.render_as_string(hide_password=False)
    version, value = await asyncio.to_thread(_compute_in_thread, compute, url)
    _remember(key, version, value)  # on the server's loop: the memo has one writer
    return version, value


async def fresh_leaderboard(
    db: AsyncSession,
    *,
    settings: Settings,
    judges: JudgeAssignment,
    engine: AsyncEngine,
    baselines: bool = False,
    diagnostics: bool = False,
) -> LeaderboardData:
    """``configured_leaderboard`` as ``GET /v1/leaderboard`` serves it: from the memo
    while ``data_version`` is unchanged, else computed off the event loop and waited for
    (``_fresh``): never a board older than the latest verdict, review or anchor the
    request could have seen. The board is the console's (diagnostics included, dropped
    here unless asked for), so the API and the console share one computation; the
    judge's calibration is read fresh every time."""
    key = _board_key(settings, judges, baselines=baselines, diagnostics=True)

    async def compute(own: AsyncSession) -> LeaderboardData:
        return await configured_leaderboard(
            own, settings=settings, judges=judges, baselines=baselines, diagnostics=True
        )

    data = await _fresh(db, key, compute, engine=engine)
    calibration = await calibration_of(db, settings, judges.default)
    return dataclasses.replace(
        data, calibration=calibration, diagnostics=data.diagnostics if diagnostics else None
    )


def _board_key(
    settings: Settings, judges: JudgeAssignment, *, baselines: bool, diagnostics: bool
) -> Hashable:
    return (
        "leaderboard",
        _judges_key(judges),
        PROMPT_VERSION,
        settings.leaderboard_resamples,
        settings.leaderboard_tie_threshold,
        settings.contamination_gap_threshold,
        baselines,
        diagnostics,
    )


async def cached_session_scores(
    db: AsyncSession,
    *,
    model_id: uuid.UUID,
    judges: JudgeAssignment,
    prompt_version: str,
    refresh_on: AsyncEngine | None = None,
) -> list[SessionScore]:
    """``session_scores``, computed again only when ``data_version`` changes (stale while
    refreshing with ``refresh_on``, as ``cached_leaderboard``)."""
    key = ("session_scores", model_id, _judges_key(judges), prompt_version)

    async def compute(own: AsyncSession) -> list[SessionScore]:
        return await session_scores(
            own, model_id=model_id, judges=judges, prompt_version=prompt_version
        )

    scores, _ = await _memoised(db, key, compute, refresh_on=refresh_on)
    return list(scores)
