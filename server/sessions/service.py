"""Sessions: their lifecycle. Creation under quotas (the mode draws the sample), abort,
expiry, and what lists and counts them.

Delivery (``server.sessions.delivery``) and answers (``server.sessions.answers``) drive an
open session under its lease (``server.sessions.lease``); quotas are
``server.sessions.quotas``. Services flush; the request's unit of work commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.exposure import record_exposure, release_undelivered
from bank.locks import lock_org_sampling
from server.auth.permissions import Permission, Principal
from server.errors import Conflict, Forbidden, InvalidInput, SessionClosed
from server.registry.service import get_model
from server.scoring.assignment import JudgeAssignment
from server.sessions.lease import get_session
from server.sessions.limits import SessionLimits
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import SessionMode, mode_spec
from server.sessions.modes.base import DrawRequest
from server.sessions.options import AdaptiveRequest, SessionOptions
from server.sessions.quotas import check_org_quotas
from server.sessions.states import (
    OPEN_STATE_VALUES,
    SessionState,
    require_session_transition,
)

__all__ = [
    "abort_session",
    "count_by_state",
    "create_session",
    "end_session",
    "expire_overdue",
    "get_session",
    "list_sessions",
    "session_counts",
    "session_token_ids",
]


def check_may_open(
    principal: Principal, *, mode: SessionMode, n_items: int | None, limits: SessionLimits
) -> None:
    """Refuse (403) a mode ``principal``'s role may not open and a non-default ``n_items``
    from a role that may not size sessions, (422) an ``n_items`` out of range. Runs ask
    this before they are queued, sessions when they open."""
    spec = mode_spec(mode)
    needed = spec.traits.open_permission
    if needed is not None and not principal.can(needed):
        raise Forbidden(spec.refusal)
    if n_items is not None and n_items != limits.default_items:
        if not principal.can(Permission.SESSIONS_SIZE):
            raise Forbidden("only admins and evaluators may choose n_items")
        if not 1 <= n_items <= limits.max_items:
            raise InvalidInput(f"n_items must be between 1 and {limits.max_items}, got {n_items}")


async def create_session(
    db: AsyncSession,
    *,
    principal: Principal,
    model_id: uuid.UUID,
    n_items: int | None,
    limits: SessionLimits,
    now: datetime,
    judges: JudgeAssignment,
    mode: SessionMode = SessionMode.FIXED,
    adaptive_request: AdaptiveRequest | None = None,
    item_set: str | None = None,
) -> EvalSession:
    """Allocate a fresh sample for ``model_id``'s organisation and open a session on it.

    ``mode`` (``server.sessions.modes``) draws the sample: the stratified sample of the
    whole bank, the anchor set, the named ``item_set``, or an adaptive session's pool
    (``n_items`` is its budget; ``adaptive_request`` its policy; ``judges`` decide the
    scores its item histories read). Refuses (403) a
    non-default ``n_items`` from roles that may not size sessions and a mode from roles
    without its ``open_permission``, (404) an item set that does not exist (only to roles
    that may use sets), (409) more open sessions than ``limits.max_concurrent``, and (429)
    more sessions per period."""
    spec = mode_spec(mode)
    options = SessionOptions(adaptive=adaptive_request, item_set=item_set)
    spec.check_options(options)
    check_may_open(principal, mode=mode, n_items=n_items, limits=limits)
    n = n_items or limits.default_items
    model = await get_model(db, principal=principal, model_id=model_id)
    org_id = model.org_id
    # One organisation's sessions are created one at a time, so the quota checks and the
    # sample (which must avoid families other open sessions hold) see a settled state.
    await lock_org_sampling(db, org_id)
    await expire_overdue(db, now=now, org_id=org_id)
    await check_org_quotas(db, org_id=org_id, limits=limits, now=now)
    # The sample's drawn_at: under the lock, after this transaction's own expiries gave
    # their families back, before the draw reads the bank and exposure state.
    sample, drawn = await spec.draw(db, DrawRequest(org_id, n, options, drawn_at=utcnow()))
    if not drawn.items:
        raise Conflict(await spec.why_empty(db, options=options))
    record = EvalSession(
        org_id=org_id,
        model_id=model.id,
        sample_id=sample.id,
        mode=spec.mode,
        state=SessionState.CREATED.value,
        n_items=len(drawn.items),
        n_delivered=0,
        n_completed=0,
        pending_window=limits.pending_window,
        deadline_at=now + timedelta(seconds=limits.deadline_s),
        created_by=principal.subject,
        created_at=now,
    )
    db.add(record)
    await db.flush()
    await record_exposure(
        db,
        org_id=org_id,
        item_ids=[i.id for i in drawn.items],
        session_id=record.id,
        delivered=False,
    )
    await spec.opened(db, record=record, options=options, limits=limits, judges=judges)
    return record


def session_counts(record: EvalSession) -> dict[str, int]:
    """How many items are allocated (not yet delivered), pending and completed."""
    undelivered = record.n_items - record.n_delivered
    released = SessionState(record.state) in {SessionState.EXPIRED, SessionState.ABORTED}
    return {
        "allocated": 0 if released else undelivered,
        "pending": record.n_delivered - record.n_completed,
        "completed": record.n_completed,
        "released": undelivered if released else 0,
    }


async def end_session(
    db: AsyncSession, *, record: EvalSession, target: SessionState, now: datetime
) -> int:
    """Move ``record`` to ``target`` (expired or aborted), returning its never-delivered
    items to the pool; returns how many families were released."""
    require_session_transition(record.state, target)
    record.state = target.value
    record.ended_at = now
    record.lease_jti = None
    record.lease_expires_at = None
    await db.flush()
    return await release_undelivered(db, org_id=record.org_id, session_id=record.id)


async def abort_session(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID, now: datetime
) -> EvalSession:
    """Abort an open session (row locked first); ``SessionClosed`` if it already ended."""
    record = await get_session(db, principal=principal, session_id=session_id)
    locked = (
        await db.execute(
            select(EvalSession)
            .where(EvalSession.id == record.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    if locked.state not in OPEN_STATE_VALUES:
        raise SessionClosed(f"session {session_id} is {locked.state}")
    await end_session(db, record=locked, target=SessionState.ABORTED, now=now)
    return locked


async def expire_overdue(
    db: AsyncSession, *, now: datetime, org_id: uuid.UUID | None = None
) -> int:
    """Expire every open session past its deadline (of ``org_id``, or of everyone); returns
    how many. Rows another transaction holds are skipped and left for the next sweep."""
    statement = (
        select(EvalSession)
        .where(EvalSession.state.in_(OPEN_STATE_VALUES), EvalSession.deadline_at <= now)
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    )
    if org_id is not None:
        statement = statement.where(EvalSession.org_id == org_id)
    overdue = (await db.execute(statement)).scalars().all()
    # By organisation: each release takes its organisation's sampling lock, and two
    # sweeps taking them in one order cannot deadlock.
    for record in sorted(overdue, key=lambda r: str(r.org_id)):
        await end_session(db, record=record, target=SessionState.EXPIRED, now=now)
    return len(overdue)


async def list_sessions(
    db: AsyncSession,
    *,
    principal: Principal,
    org_id: uuid.UUID | None = None,
    state: SessionState | None = None,
    limit: int = 100,
    offset: int = 0,
    model_id: uuid.UUID | None = None,
    mode: SessionMode | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    states: Collection[SessionState] | None = None,
) -> list[EvalSession]:
    """Sessions visible to ``principal``, newest first: ``limit`` of them from ``offset``,
    of organisation ``org_id`` (ignored for roles without ``Permission.ANY_ORG``, who see
    their own organisation's only), in ``state`` (and in one of ``states``), of model
    ``model_id``, in ``mode``, and created at or after ``created_after`` and before
    ``created_before``."""
    statement = (
        select(EvalSession)
        .order_by(EvalSession.created_at.desc(), EvalSession.id.desc())
        .limit(limit)
        .offset(offset)
    )
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    elif org_id is not None:
        statement = statement.where(EvalSession.org_id == org_id)
    if state is not None:
        statement = statement.where(EvalSession.state == state.value)
    if states is not None:
        statement = statement.where(EvalSession.state.in_([s.value for s in states]))
    if model_id is not None:
        statement = statement.where(EvalSession.model_id == model_id)
    if mode is not None:
        statement = statement.where(EvalSession.mode == mode.value)
    if created_after is not None:
        statement = statement.where(EvalSession.created_at >= created_after)
    if created_before is not None:
        statement = statement.where(EvalSession.created_at < created_before)
    return list((await db.execute(statement)).scalars().all())


async def count_by_state(db: AsyncSession, *, principal: Principal) -> dict[SessionState, int]:
    """How many sessions ``principal`` may see are in each state (every state listed)."""
    statement = select(EvalSession.state, func.count()).group_by(EvalSession.state)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    counts = {SessionState(state): n for state, n in (await db.execute(statement)).tuples()}
    return {state: counts.get(state, 0) for state in SessionState}


async def session_token_ids(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> list[str]:
    """The ids (``jti``) of the tokens this server knows to have driven session
    ``session_id``: the holder of its lease and every token that submitted one of its
    answers (``Answer.submitted_by``), sorted; ``NotFound`` if ``principal`` may not see the
    session.

    Tokens are stateless (JWT) and no token issued is recorded, session-scoped or not: a
    token scoped to this session that never drove it is not found here. Such a token can
    only read this session and drive it while it is open; aborting the session refuses
    every token's work on it. A token found here may be one of the organisation's unscoped
    tokens, which then drove other sessions too."""
    record = await get_session(db, principal=principal, session_id=session_id)
    submitters = select(Answer.submitted_by).where(Answer.session_id == record.id).distinct()
    found = set((await db.execute(submitters)).scalars())
    if record.lease_jti is not None:
        found.add(record.lease_jti)
    return sorted(found)
