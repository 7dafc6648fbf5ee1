"""Answers: the first answer to the pending item stands, and goes to scoring at once."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Exposure, Item, SampleItem
from judge.prompts import PROMPT_VERSION
from server.auth.permissions import Principal
from server.errors import AlreadyAnswered, NotPending
from server.observability import metrics
from server.scoring.assignment import JudgeAssignment
from server.scoring.service import enqueue_answer
from server.sessions import single_statement
from server.sessions.delivery import require_drive_permission, state_of
from server.sessions.lease import drive, require_open
from server.sessions.limits import SessionLimits
from server.sessions.models import Answer
from server.sessions.modes import mode_spec
from server.sessions.states import (
    ItemState,
    SessionState,
    require_item_transition,
    require_session_transition,
)
from server.sessions.submission import AnswerSubmission


async def submit_answer(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    submission: AnswerSubmission,
    limits: SessionLimits,
    now: datetime,
    judges: JudgeAssignment | None = None,
) -> Answer:
    """Accept ``submission``, the answer to the pending item at its position; the first
    answer stands.

    It is stored with any reasoning trace inside the answer moved apart
    (``AnswerSubmission.with_trace_apart``). With ``judges``, the answer is put in the
    scoring outbox for each judge of its panel in the same transaction
    (``server.scoring``), so an accepted answer is always scored.

    ``AlreadyAnswered`` (409) for a position answered before, ``NotPending`` (409) for any
    other item than the oldest pending one.

    On PostgreSQL the common answer is one statement (``single_statement.answer``);
    whatever it does not cover goes the general way, which decides as before."""
    stored = submission.with_trace_apart()
    position, item_id = stored.position, stored.item_id
    accepted = Answer(
        session_id=session_id,
        position=position,
        item_id=item_id,
        answer=stored.answer,
        reasoning=stored.reasoning,
        submitted_by=principal.jti,
        submitted_at=now,
        prompt_tokens=stored.prompt_tokens,
        completion_tokens=stored.completion_tokens,
        finish_reason=stored.finish_reason,
        reported_latency_s=stored.model_latency_s,
    )
    if single_statement.applies(db) and await single_statement.answer(
        db,
        principal=principal,
        session_id=session_id,
        now=now,
        lease_idle_s=limits.lease_idle_s,
        submission=stored,
    ):
        metrics.on_commit(db, metrics.ANSWERS.inc)
        await _enqueue(db, judges=judges, session_id=session_id, position=position, item_id=item_id)
        return accepted
    record = await drive(db, principal=principal, session_id=session_id, limits=limits, now=now)
    require_drive_permission(mode_spec(record.mode), principal)
    state = state_of(record, position) if position >= 0 else None
    if state is ItemState.COMPLETED:
        raise AlreadyAnswered(f"position {position} was answered already; the first answer stands")
    require_open(record, now)
    if state is not ItemState.PENDING or position != record.n_completed:
        raise NotPending(
            f"position {position} is not the pending item (expected position {record.n_completed}"
            + (")" if record.n_delivered > record.n_completed else "; call next first)")
        )
    row = (
        await db.execute(
            select(SampleItem.item_id, Exposure.delivered_at)
            .join(
                Exposure,
                and_(Exposure.org_id == record.org_id, Exposure.family_id == SampleItem.family_id),
            )
            .where(SampleItem.sample_id == record.sample_id, SampleItem.position == position)
        )
    ).one()
    if row.item_id != item_id:
        raise NotPending(f"item {item_id} is not the item at position {position}")
    require_item_transition(state, ItemState.COMPLETED)
    accepted.delivered_at = row.delivered_at or now
    db.add(accepted)
    metrics.on_commit(db, metrics.ANSWERS.inc)
    record.n_completed = position + 1
    if record.n_completed == record.n_items:
        require_session_transition(record.state, SessionState.ANSWERED)
        record.state = SessionState.ANSWERED.value
        record.ended_at = now
    await db.flush()
    await _enqueue(db, judges=judges, session_id=record.id, position=position, item_id=item_id)
    return accepted


async def _enqueue(
    db: AsyncSession,
    *,
    judges: JudgeAssignment | None,
    session_id: uuid.UUID,
    position: int,
    item_id: uuid.UUID,
) -> None:
    """Put the answer at ``position`` in the scoring outbox for each judge of its panel."""
    if judges is None:
        return
    discipline = (
        await db.scalar(select(Item.discipline).where(Item.id == item_id))
        if judges.by_discipline
        else None
    )
    for judge in judges.judges_for(discipline):
        await enqueue_answer(
            db, session_id=session_id, position=position, judge=judge, prompt_version=PROMPT_VERSION
        )
