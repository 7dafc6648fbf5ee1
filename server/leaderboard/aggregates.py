"""The fixed sessions' input to the leaderboard, aggregated by PostgreSQL.

``server.leaderboard.inputs.scores_by_model`` reads every counting verdict and decides
each answer's score in Python: a million verdicts cost seconds of row handling. When one
judge scores everything (the assignment has a single judge) and no per-item figure is
asked for (Elo and Bradley-Terry need the items), the statistics need less than the rows:

* the bootstrap (``judge.ranking.stability.hierarchical_bootstrap``) reads a fixed
  session only through how many of its items scored 0, 1, 2 and 3 (its multinomial stage
  draws from those counts), so a session is its four counts, in the sessions' order;
* a discipline's pooled score and standard error are the mean and standard deviation of
  its item scores: its counts per score again;
* latency's median and 95th percentile depend on the multiset of per-answer times, not
  their order; tokens are sums.

This module asks PostgreSQL for one row per (session, discipline, score) with the count,
the token sums and the answers' latencies, with each answer's score decided in SQL exactly
as ``server.scoring.effective`` decides it for a single judge (``OneJudgeScore``: the
reviewers' mean rounded half to even when a person scored the answer, else the judge's
score, else the answer waits for review and is left out). The result has the shape of
the row-by-row reader's (``server.leaderboard.inputs.Collected``), so everything
downstream is unchanged.
Exactness: session counts, token sums, latencies (``EXTRACT(EPOCH ...)`` and
``timedelta.total_seconds`` both round the exact microsecond count once) and discipline
means are identical; a discipline's standard error is summed in another order, so it may
differ in its last bit or so.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import Double, and_, cast, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.sqltypes import NullType

from bank.models import Item
from judge.ranking.scores import MAX_SCORE
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import OneJudgeScore
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import SessionMode
from server.sessions.states import SCORED_STATE_VALUES

__all__ = ["aggregate_fixed_scores", "can_aggregate"]

SCORES = np.arange(MAX_SCORE + 1)


def can_aggregate(db: AsyncSession, judges: JudgeAssignment, *, items_needed: bool) -> bool:
    """Whether ``aggregate_fixed_scores`` gives exactly what the row-by-row reader gives:
    on PostgreSQL, one judge, no per-item figures."""
    return (
        db.get_bind().dialect.name == "postgresql"
        and len(judges.every_judge) == 1
        and not items_needed
    )


async def aggregate_fixed_scores(
    db: AsyncSession,
    *,
    mode: SessionMode,
    judges: JudgeAssignment,
    prompt_version: str,
    make: Callable[[], Any],
) -> dict[uuid.UUID, Any]:
    """Per model (in the order of its first scored session, oldest first) a ``make()``
    record (``Collected``) filled from the aggregates: ``sessions`` (session id -> its
    item scores, sorted), ``disciplines``, ``latencies_s`` and the token sums. ``items``,
    ``positions`` and ``panel`` stay empty (see ``can_aggregate``)."""
    (judge,) = judges.every_judge
    scored = (
        select(EvalSession.id, EvalSession.model_id, EvalSession.created_at)
        .where(EvalSession.state.in_(SCORED_STATE_VALUES), EvalSession.mode == mode.value)
        .subquery("s")
    )
    rule = OneJudgeScore(judge, prompt_version, scored)
    score = rule.score.label("score")
    latency = func.greatest(
        0.0,
        cast(func.extract("epoch", Answer.submitted_at - Answer.delivered_at), Double()),
    )
    usage = and_(Answer.prompt_tokens.is_not(None), Answer.completion_tokens.is_not(None))
    # One big statement: compiling it to machine code costs more than it saves.
    await db.execute(text("SET LOCAL jit = off"))
    statement = (
        select(
            scored.c.model_id,
            scored.c.id,
            Item.discipline,
            score,
            func.count().label("n"),
            func.coalesce(func.sum(Answer.prompt_tokens).filter(usage), 0).label("prompt"),
            func.coalesce(func.sum(Answer.completion_tokens).filter(usage), 0).label("completion"),
            func.count().filter(usage).label("with_usage"),
            func.array_agg(latency, type_=NullType()).label(
                "latencies"
            ),  # asyncpg decodes the array
            func.array_agg(Answer.reported_latency_s, type_=NullType())
            .filter(Answer.reported_latency_s.is_not(None))
            .label("reported"),  # NULL when no answer of the group has one
        )
        .select_from(Answer)
        .join(scored, scored.c.id == Answer.session_id)
        .join(Item, Item.id == Answer.item_id)
    )
    rows = await db.execute(
        rule.join(statement)
        .where(score.is_not(None))
        .group_by(scored.c.created_at, scored.c.id, scored.c.model_id, Item.discipline, score)
        .order_by(scored.c.created_at, scored.c.id)
    )
    return _assemble(rows, make)


def _assemble(rows: Any, make: Callable[[], Any]) -> dict[uuid.UUID, Any]:
    counts: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
    by_discipline: dict[uuid.UUID, dict[str, list[int]]] = {}
    latencies: dict[uuid.UUID, list[float]] = {}
    reported: dict[uuid.UUID, list[float]] = {}
    out: dict[uuid.UUID, Any] = {}
    for row in rows:
        model_id, session_id, discipline, score, n, prompt, completion, with_usage, times = row[:9]
        entry = out.get(model_id)
        if entry is None:
            entry = out[model_id] = make()
            counts[model_id], by_discipline[model_id], latencies[model_id] = {}, {}, []
            reported[model_id] = []
        sessions, disciplines = counts[model_id], by_discipline[model_id]
        if session_id not in sessions:
            sessions[session_id] = [0] * (MAX_SCORE + 1)
        if discipline not in disciplines:
            disciplines[discipline] = [0] * (MAX_SCORE + 1)
        sessions[session_id][score] += n
        disciplines[discipline][score] += n
        latencies[model_id] += times
        reported[model_id] += row.reported or []
        entry.prompt_tokens += int(prompt)
        entry.completion_tokens += int(completion)
        entry.n_with_usage += with_usage
    for model_id, entry in out.items():
        entry.sessions = {
            session: np.repeat(SCORES, found) for session, found in counts[model_id].items()
        }
        entry.disciplines = {
            name: np.repeat(SCORES, found) for name, found in by_discipline[model_id].items()
        }
        entry.latencies_s = latencies[model_id]
        entry.reported_latencies_s = reported[model_id]
    return out
