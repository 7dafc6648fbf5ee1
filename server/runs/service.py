"""Starting, reading, pausing, resuming and cancelling runs (keyword-only services; the
routes, the console and ``proctor runs`` go through these).

Who may: whoever may open sessions of the model (vendors and evaluators for their
organisation's models, admins for any), under the same rules sessions have: a mode or an
``n_items`` the role may not choose is refused here, before anything is queued; quotas,
exposure and fresh samples apply when each session opens. A run of another organisation
is ``NotFound``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from clients.sdk.types import SessionMode
from server.auth.permissions import Permission, Principal
from server.errors import InvalidInput, SessionClosed
from server.model_endpoints.service import get_endpoint
from server.orgs.service import get_visible
from server.runs.models import Run, RunSlot
from server.runs.schemas import RunIn
from server.runs.states import (
    ENDED_RUN_STATES,
    RunState,
    require_run_transition,
)
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.service import abort_session, check_may_open
from server.sessions.states import OPEN_STATE_VALUES


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run with its slots and the sessions they opened."""

    run: Run
    slots: Sequence[RunSlot]
    sessions: dict[uuid.UUID, EvalSession]


async def start_run(
    db: AsyncSession, *, principal: Principal, body: RunIn, limits: SessionLimits
) -> Run:
    """Queue a run of ``body.sessions`` sessions of the model (which must have an
    endpoint: ``NotFound`` otherwise). A cost cap needs the model's prices and the
    endpoint's ``max_tokens`` (422 otherwise): without them a call's cost has no bound."""
    check_may_open(principal, mode=SessionMode(body.mode), n_items=body.n_items, limits=limits)
    record = await get_endpoint(db, principal=principal, model_id=body.model_id)
    if body.cost_cap_usd is not None:
        model, endpoint = record.model, record.endpoint
        if model.usd_per_mtok_in is None or model.usd_per_mtok_out is None:
            raise InvalidInput("a cost cap needs the model's prices (usd_per_mtok_in and _out)")
        if endpoint.max_tokens is None:
            raise InvalidInput("a cost cap needs the endpoint's max_tokens (a call's bound)")
    run = Run(
        org_id=record.model.org_id,
        model_id=record.model.id,
        created_by=principal.subject,
        created_role=principal.role.value,
        mode=SessionMode(body.mode).value,
        sessions=body.sessions,
        n_items=body.n_items,
        cost_cap_usd=body.cost_cap_usd,
        state=RunState.QUEUED.value,
        failures={},
    )
    db.add(run)
    await db.flush()
    db.add_all(RunSlot(run_id=run.id, index=i) for i in range(body.sessions))
    await db.flush()
    return run


async def get_run(db: AsyncSession, *, principal: Principal, run_id: uuid.UUID) -> RunRecord:
    """The run with its slots and sessions if ``principal`` may see it; else ``NotFound``."""
    run = await get_visible(db, Run, run_id, principal=principal, noun="run")
    return await _record(db, run)


async def list_runs(
    db: AsyncSession,
    *,
    principal: Principal,
    state: RunState | None = None,
    model_id: uuid.UUID | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[RunRecord]:
    """The runs ``principal`` may see (every organisation's for admins and auditors),
    newest first."""
    statement = select(Run).order_by(Run.created_at.desc(), Run.id).limit(limit).offset(offset)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(Run.org_id == principal.org_id)
    if state is not None:
        statement = statement.where(Run.state == state.value)
    if model_id is not None:
        statement = statement.where(Run.model_id == model_id)
    return await _records(db, (await db.scalars(statement)).all())


async def pause_run(
    db: AsyncSession, *, principal: Principal, run_id: uuid.UUID, now: datetime
) -> RunRecord:
    """Stop sending items to the model; the slots are given back as their items end."""
    return await _move(db, principal=principal, run_id=run_id, target=RunState.PAUSED, now=now)


async def resume_run(
    db: AsyncSession, *, principal: Principal, run_id: uuid.UUID, now: datetime
) -> RunRecord:
    """Queue a paused run again: workers take its slots and drive on where they were."""
    return await _move(db, principal=principal, run_id=run_id, target=RunState.QUEUED, now=now)


async def cancel_run(
    db: AsyncSession, *, principal: Principal, run_id: uuid.UUID, now: datetime
) -> RunRecord:
    """End the run: its open sessions are aborted (their undelivered items go back to the
    pool), nothing more is sent to the model."""
    record = await _move(db, principal=principal, run_id=run_id, target=RunState.CANCELLED, now=now)
    for session in record.sessions.values():
        if session.state in OPEN_STATE_VALUES:
            with contextlib.suppress(SessionClosed):  # it ended meanwhile
                await abort_session(db, principal=principal, session_id=session.id, now=now)
    # The slots are left to the workers (a cancelled run's are never claimed again): the
    # workers lock a slot, then its run; a cancel locking the run and then its slots
    # could deadlock with them.
    await db.flush()
    return await _record(db, record.run)


async def _move(
    db: AsyncSession, *, principal: Principal, run_id: uuid.UUID, target: RunState, now: datetime
) -> RunRecord:
    run = await get_visible(db, Run, run_id, principal=principal, noun="run")
    locked = (
        await db.execute(
            select(Run)
            .where(Run.id == run.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    require_run_transition(locked.state, target)
    locked.state = target.value
    if target in ENDED_RUN_STATES:
        locked.ended_at = now
        locked.stop_reason = locked.stop_reason or f"{target.value} by {principal.role.value}"
    await db.flush()
    return await _record(db, locked)


async def _record(db: AsyncSession, run: Run) -> RunRecord:
    (record,) = await _records(db, [run])
    return record


async def _records(db: AsyncSession, runs: Sequence[Run]) -> list[RunRecord]:
    """``runs`` with their slots and sessions, in two queries whatever their number."""
    if not runs:
        return []
    statement = select(RunSlot).where(RunSlot.run_id.in_([run.id for run in runs]))
    slots_of: defaultdict[uuid.UUID, list[RunSlot]] = defaultdict(list)
    for slot in (await db.scalars(statement.order_by(RunSlot.run_id, RunSlot.index))).all():
        slots_of[slot.run_id].append(slot)
    ids = [s.session_id for slots in slots_of.values() for s in slots if s.session_id is not None]
    sessions: dict[uuid.UUID, EvalSession] = {}
    if ids:
        found = await db.scalars(select(EvalSession).where(EvalSession.id.in_(ids)))
        sessions = {session.id: session for session in found}
    return [
        RunRecord(run, slots_of[run.id], _sessions_of(slots_of[run.id], sessions)) for run in runs
    ]


def _sessions_of(
    slots: Sequence[RunSlot], sessions: dict[uuid.UUID, EvalSession]
) -> dict[uuid.UUID, EvalSession]:
    return {s.session_id: sessions[s.session_id] for s in slots if s.session_id in sessions}
