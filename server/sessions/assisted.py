"""The database side of ``model-assisted`` sessions (:mod:`bank.adaptive.assisted`).

The session's pool is its sample (positions 0..n-1, delivered strictly in order). Each
delivery draws the next item with the policy's probabilities and stores how it was drawn
(:class:`~server.sessions.models.AdaptiveDraw`: probability, predictions, weight), because
the estimator needs the probabilities as they were *when* the item was drawn, which
depend on the verdicts that had arrived by then. :func:`restore` rebuilds the policy's
state from the pool, the stored draws and the verdicts so far; it is pure.

The rank-aware stopping rule's neighbours (:func:`neighbours`) are the other models'
fixed-session means with a binomial standard error, each answer counted as the
leaderboard counts it: the full leaderboard's bootstrap is too slow for the delivery
path, and on 0/1-like scores the two agree closely.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.adaptive.assisted import AssistedState, Draw
from bank.adaptive.assisted import PoolItem as AssistedItem
from bank.adaptive.difference import StratumDraw
from bank.adaptive.policy import AdaptiveConfig
from bank.adaptive.stopping import Neighbour
from clients.sdk.types import SessionMode
from judge.prompts import PROMPT_VERSION
from judge.ranking.scores import MAX_SCORE
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import OneJudgeScore, counted_answers
from server.sessions.models import AdaptiveDraw, Answer, EvalSession
from server.sessions.states import SessionState

SCORED_STATES = (SessionState.SCORED.value, SessionState.REVIEWED.value)
NEIGHBOUR_MODE = SessionMode.FIXED
"""The neighbours are the other models' fixed-session means: an adaptive session's own
item mean is biased by its informative selection."""


@dataclass(frozen=True, slots=True)
class PoolRow:
    """One position of the session's pool."""

    position: int
    item_id: uuid.UUID
    discipline: str
    qtype: str


def restore(
    config: AdaptiveConfig,
    pool: Sequence[PoolRow],
    *,
    parameters: Mapping[str, Sequence[float]],
    draws: Mapping[int, AdaptiveDraw],
    scores: Mapping[int, float],
    n_delivered: int,
) -> AssistedState:
    """The policy's state: every delivered position drawn as stored, then the scores in
    position order (pool index = position)."""
    items = [
        AssistedItem(
            (row.discipline, row.qtype),
            row.discipline,
            *_ab(parameters.get(str(row.item_id))),
        )
        for row in pool
    ]
    state = AssistedState.start(config, items)
    for position in range(n_delivered):
        stored = draws.get(position)
        if stored is None:
            raise LookupError(f"delivered position {position} has no stored draw")
        record = StratumDraw(
            stored.probability, stored.predicted, stored.unseen_predicted, stored.weight
        )
        state.add_draw(Draw(position, items[position].stratum, record))
    for position in sorted(scores):
        if position < n_delivered:
            state.record(position, scores[position], refresh=False)
    state.refresh_ability()
    return state


def _ab(values: Sequence[float] | None) -> tuple[float | None, float | None]:
    if values is None or len(values) != 2:
        return None, None
    return float(values[0]), float(values[1])


async def load_draws(db: AsyncSession, *, session_id: uuid.UUID) -> dict[int, AdaptiveDraw]:
    rows = (
        await db.scalars(select(AdaptiveDraw).where(AdaptiveDraw.session_id == session_id))
    ).all()
    return {row.position: row for row in rows}


def stored_draw(session_id: uuid.UUID, position: int, draw: Draw) -> AdaptiveDraw:
    """The row recording ``draw``, delivered at ``position``."""
    return AdaptiveDraw(
        session_id=session_id,
        position=position,
        probability=draw.record.probability,
        predicted=draw.record.predicted,
        unseen_predicted=draw.record.unseen_predicted,
        weight=draw.record.weight,
    )


async def neighbours(
    db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
) -> list[Neighbour]:
    """Every other model with a scored fixed session: the mean of its sessions' mean
    scores on [0, 1] (each answer with the score the leaderboard counts,
    ``server.scoring.effective``) and sqrt(S (1 - S) / items) as its standard error.
    With one judge the database averages (``OneJudgeScore``); else every counting
    verdict is read."""
    if len(judges.every_judge) == 1:
        sessions = await _session_means_in_sql(db, record=record, judge=judges.default)
    else:
        sessions = await _session_means(db, record=record, judges=judges)
    out = []
    for by_session in sessions.values():
        mean = fmean(total / n for total, n in by_session)
        items = sum(n for _, n in by_session)
        score = min(max(mean / MAX_SCORE, 0.0), 1.0)
        out.append(Neighbour(score, math.sqrt(score * (1.0 - score) / max(items, 1))))
    return out


def _neighbour_sessions(record: EvalSession) -> list[ColumnElement[bool]]:
    return [
        EvalSession.model_id != record.model_id,
        EvalSession.mode == NEIGHBOUR_MODE,
        EvalSession.state.in_(SCORED_STATES),
    ]


async def _session_means(
    db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
) -> dict[uuid.UUID, list[tuple[float, int]]]:
    """Model -> (total score, scored answers) of each of its neighbour sessions."""
    counted = await counted_answers(
        db,
        judges=judges,
        prompt_version=PROMPT_VERSION,
        where=_neighbour_sessions(record),
        columns=(EvalSession.model_id,),
        ordered=False,
        in_thread=True,
    )
    totals: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = defaultdict(lambda: defaultdict(list))
    for answer in counted:
        if answer.score is not None:
            totals[answer.row.model_id][answer.row.session_id].append(answer.score)
    return {
        model: [(sum(scores), len(scores)) for scores in by_session.values()]
        for model, by_session in totals.items()
    }


async def _session_means_in_sql(
    db: AsyncSession, *, record: EvalSession, judge: str
) -> dict[uuid.UUID, list[tuple[float, int]]]:
    """``_session_means`` for a one-judge board, summed by the database."""
    sessions = (
        select(EvalSession.id, EvalSession.model_id)
        .where(*_neighbour_sessions(record))
        .subquery("s")
    )
    rule = OneJudgeScore(judge, PROMPT_VERSION, sessions)
    statement = (
        select(sessions.c.model_id, func.sum(rule.score), func.count(rule.score))
        .select_from(Answer)
        .join(sessions, sessions.c.id == Answer.session_id)
    )
    rows = await db.execute(
        rule.join(statement)
        .where(rule.score.is_not(None))
        .group_by(sessions.c.model_id, sessions.c.id)
    )
    out: dict[uuid.UUID, list[tuple[float, int]]] = defaultdict(list)
    for model_id, total, n in rows.tuples():
        out[model_id].append((float(total), int(n)))
    return out
