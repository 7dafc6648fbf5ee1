"""Delivery: the next item of a session, strictly in order, each recorded as exposed.

A retry while the pending window is full gets the same item again; the mode decides what
the client sees of an item (``ModeSpec.view``) and whether delivery goes on
(``ModeSpec.goes_on``). On PostgreSQL the common delivery is one statement
(``server.sessions.single_statement``).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.exposure import mark_delivered, release_undelivered
from bank.models import Item, SampleItem
from server.auth.permissions import Principal
from server.errors import Conflict, Forbidden
from server.observability import metrics
from server.scoring.assignment import JudgeAssignment
from server.scoring.service import finish_sessions
from server.sessions import single_statement
from server.sessions.lease import drive, is_open, require_open
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.modes import DeliveredItem, ModeSpec, mode_spec
from server.sessions.states import (
    ALL_ANSWERED_STATES,
    ItemState,
    SessionState,
    item_state,
    require_item_transition,
    require_session_transition,
)


async def next_item(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
    judges: JudgeAssignment,
) -> DeliveredItem | None:
    """The item to work on: the oldest pending one if the pending window is full (a retry
    gets the same item), else the next allocated one, which becomes pending and is recorded
    as exposed. None when every item has been delivered and answered. A steered mode
    decides whether delivery goes on, reading scores as ``judges`` decide them.

    On PostgreSQL the common delivery is one statement (``single_statement.deliver``);
    whatever it does not cover goes the general way below."""
    if single_statement.applies(db):
        delivered = await _deliver_in_one_statement(
            db, principal=principal, session_id=session_id, limits=limits, now=now
        )
        if delivered is not None:
            return delivered
    retry = await _retry_without_writing(
        db, principal=principal, session_id=session_id, limits=limits, now=now
    )
    if retry is not None:
        return retry
    record = await drive(db, principal=principal, session_id=session_id, limits=limits, now=now)
    if SessionState(record.state) in ALL_ANSWERED_STATES:
        return None
    require_open(record, now)
    spec = mode_spec(record.mode)
    require_drive_permission(spec, principal)
    pending = record.n_delivered - record.n_completed
    if pending >= record.pending_window or record.n_delivered >= record.n_items:
        if not pending:
            return None
        item, _ = await _load_item(db, record=record, position=record.n_completed)
        return item
    if not await spec.goes_on(db, record=record, judges=judges):
        await _stop_delivering(db, record=record, now=now, limits=limits)
        if pending:
            item, _ = await _load_item(db, record=record, position=record.n_completed)
            return item
        return None
    position = record.n_delivered
    require_item_transition(state_of(record, position), ItemState.PENDING)
    if record.state == SessionState.CREATED.value:
        require_session_transition(record.state, SessionState.ACTIVE)
        record.state = SessionState.ACTIVE.value
    record.n_delivered = position + 1
    item, family_id = await _load_item(db, record=record, position=position)
    if not await mark_delivered(db, org_id=record.org_id, family_id=family_id):
        raise Conflict(f"item at position {position} is not reserved for this session")
    await db.flush()
    metrics.on_commit(db, metrics.ITEMS_DELIVERED.inc)
    return item


def require_drive_permission(spec: ModeSpec, principal: Principal) -> None:
    """``Forbidden`` unless ``principal`` may drive sessions of ``spec``'s mode (the
    request rolls back, so a refused token keeps no lease)."""
    needed = spec.traits.drive_permission
    if needed is not None and not principal.can(needed):
        raise Forbidden(spec.drive_refusal)


async def _deliver_in_one_statement(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> DeliveredItem | None:
    """The next item, delivered by ``single_statement.deliver``; None if that statement did
    not apply (nothing was written)."""
    row = await single_statement.deliver(
        db, principal=principal, session_id=session_id, now=now, lease_idle_s=limits.lease_idle_s
    )
    if row is None:
        return None
    if not row.n_marked:  # rolled back with the request, like the general path's refusal
        raise Conflict(f"item at position {row.position} is not reserved for this session")
    metrics.on_commit(db, metrics.ITEMS_DELIVERED.inc)
    return mode_spec(row.mode).view(row, position=row.position)


async def _stop_delivering(
    db: AsyncSession, *, record: EvalSession, now: datetime, limits: SessionLimits
) -> None:
    """End delivery where it is (the mode's choice): the session keeps what was
    delivered, the undelivered rest of its sample goes back to the organisation, and a
    session whose delivered items are all answered is ``answered``, and handed to
    scoring to finish in one call (every answer may be scored already, in which case no
    worker will come back to finish it; scoring opens its review tasks)."""
    record.n_items = record.n_delivered
    await release_undelivered(db, org_id=record.org_id, session_id=record.id)
    if record.n_completed == record.n_items and record.state != SessionState.ANSWERED.value:
        require_session_transition(record.state, SessionState.ANSWERED)
        record.state = SessionState.ANSWERED.value
        record.ended_at = now
        await db.flush()
        if await finish_sessions(db, session_ids={record.id}, now=now, review=limits.review):
            record.state = SessionState.SCORED.value
    await db.flush()


async def _retry_without_writing(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> DeliveredItem | None:
    """The pending item again, read without locking or writing, when this token holds a
    fresh lease (more than half its idle time left) and the pending window is full: the
    common retry costs no commit, and one statement (the session and its oldest pending
    item read together). None when the full path must decide."""
    row = (
        await db.execute(
            select(
                EvalSession.lease_expires_at,
                EvalSession.n_delivered,
                EvalSession.n_completed,
                EvalSession.n_items,
                EvalSession.pending_window,
                EvalSession.state,
                EvalSession.deadline_at,
                EvalSession.mode,
                *_ITEM_COLUMNS,
            )
            .outerjoin(
                SampleItem,
                and_(
                    SampleItem.sample_id == EvalSession.sample_id,
                    SampleItem.position == EvalSession.n_completed,
                ),
            )
            .outerjoin(Item, Item.id == SampleItem.item_id)
            .where(EvalSession.id == session_id, EvalSession.lease_jti == principal.jti)
        )
    ).one_or_none()
    if row is None or row.lease_expires_at is None or row.id is None:
        return None
    fresh = (row.lease_expires_at - now).total_seconds() > limits.lease_idle_s / 2
    pending = row.n_delivered - row.n_completed
    full = pending >= row.pending_window or row.n_delivered >= row.n_items
    if not (fresh and pending and full and is_open(row.state, row.deadline_at, now)):
        return None
    return mode_spec(row.mode).view(row, position=row.n_completed)


_ITEM_COLUMNS = (
    Item.id,
    Item.question,
    Item.options,
    Item.qtype,
    Item.discipline,
    Item.language,
    SampleItem.family_id,
)
"""What ``ModeSpec.view`` needs of an item."""


async def _load_item(
    db: AsyncSession, *, record: EvalSession, position: int
) -> tuple[DeliveredItem, uuid.UUID]:
    """The client's view of the item at ``position``, and its family."""
    row = (
        await db.execute(
            select(*_ITEM_COLUMNS)
            .join(SampleItem, SampleItem.item_id == Item.id)
            .where(SampleItem.sample_id == record.sample_id, SampleItem.position == position)
        )
    ).one()
    return mode_spec(record.mode).view(row, position=position), row.family_id


def state_of(record: EvalSession, position: int) -> ItemState:
    return item_state(
        position,
        n_delivered=record.n_delivered,
        n_completed=record.n_completed,
        session_state=record.state,
    )
