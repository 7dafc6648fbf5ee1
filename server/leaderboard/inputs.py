"""The leaderboard's inputs, read from the database.

For every model: the 0-3 scores of its scored sessions by discipline (the score each
answer counts with: ``server.scoring.effective``), the end-to-end time of every answer and
the tokens clients reported (``Collected``); the estimates of its adaptive sessions
(``server.sessions.adaptive.session_estimates``: an unbiased estimate of the session's
score on its pool and its variance, as ``judge.ranking.stability.EstimatedSession``; their
raw item scores are biased by the informative selection and never enter a score); its
sessions still under review; and the registered model with its organisation. Fixed
sessions feed the ranking by their item scores, adaptive sessions by their estimates;
replay and anchor-set sessions feed only the contamination report
(``server.leaderboard.service`` assembles the board from these).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from judge.ranking.leaderboard import DisciplineEstimate, EstimatedSession
from judge.ranking.scores import MAX_SCORE
from server.leaderboard.aggregates import aggregate_fixed_scores, can_aggregate
from server.orgs.models import Organisation
from server.registry.models import RegisteredModel
from server.review.models import ReviewTask
from server.review.states import ReviewTaskState
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.sessions.adaptive import SessionEstimate, session_estimates
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import SessionMode, modes_where
from server.sessions.states import SCORED_STATE_VALUES, SessionState


@dataclass
class Collected:
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


async def scores_by_model(
    db: AsyncSession, *, mode: SessionMode, judges: JudgeAssignment, prompt_version: str
) -> dict[uuid.UUID, Collected]:
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
    out: dict[uuid.UUID, Collected] = defaultdict(Collected)
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


async def fixed_scores(
    db: AsyncSession, *, judges: JudgeAssignment, prompt_version: str, items_needed: bool
) -> dict[uuid.UUID, Collected]:
    """The fixed sessions' scores: aggregated by the database where that gives exactly
    the same statistics (``server.leaderboard.aggregates``), else row by row."""
    if can_aggregate(db, judges, items_needed=items_needed):
        return await aggregate_fixed_scores(
            db,
            mode=SessionMode.FIXED,
            judges=judges,
            prompt_version=prompt_version,
            make=Collected,
        )
    return await scores_by_model(
        db, mode=SessionMode.FIXED, judges=judges, prompt_version=prompt_version
    )


async def adaptive_estimates(
    db: AsyncSession, *, counted: Mapping[uuid.UUID, Collected]
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


async def sessions_under_review(db: AsyncSession) -> dict[uuid.UUID, int]:
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


async def registered(
    db: AsyncSession, ids: set[uuid.UUID]
) -> dict[uuid.UUID, tuple[RegisteredModel, str]]:
    """The registered models of ``ids``, each with its organisation's name."""
    rows = await db.execute(
        select(RegisteredModel, Organisation.name)
        .join(Organisation, Organisation.id == RegisteredModel.org_id)
        .where(RegisteredModel.id.in_(ids))
    )
    return {model.id: (model, org) for model, org in rows.tuples()}
