"""The queries of the run workers: claim slots fairly, renew and release their leases, end
runs whose slots have all ended.

Fair share: of the slots free to take, a worker takes first those of the organisation with
the fewest sessions being driven now, then of its run with the fewest, then the oldest run's;
and never more at once for a model than its endpoint's ``concurrency`` (counted over every
worker: each slot has at most one call in flight). A claim is one conditional UPDATE, so two
workers never hold one slot.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.model_endpoints.models import ModelEndpoint
from server.runs.models import Run, RunSlot
from server.runs.slots import SlotEnd, SlotWork
from server.runs.states import CLAIMABLE_RUN_STATES, ENDED_SLOT_STATES, RunState, SlotState

CANDIDATES = 500
"""Free slots read per claim, at most."""
_CLAIMABLE = [state.value for state in CLAIMABLE_RUN_STATES]
_LIVE_SLOTS = [SlotState.WAITING.value, SlotState.DRIVING.value]


def _free(now: datetime) -> Any:
    return and_(
        RunSlot.state.in_(_LIVE_SLOTS),
        or_(RunSlot.lease_expires_at.is_(None), RunSlot.lease_expires_at < now),
    )


async def claim_slots(
    db: AsyncSession, *, owner: str, n: int, now: datetime, lease_s: float
) -> list[SlotWork]:
    """Claim up to ``n`` slots for ``owner`` (see the module docstring)."""
    if n <= 0:
        return []
    rows = (
        await db.execute(
            select(RunSlot, Run)
            .join(Run, Run.id == RunSlot.run_id)
            .where(Run.state.in_(_CLAIMABLE), _free(now))
            # within a run, sessions already open come first: a dead worker's sessions are
            # resumed before new ones open (they hold quota, deadlines and pending items)
            .order_by(Run.created_at, RunSlot.run_id, RunSlot.session_id.is_(None), RunSlot.index)
            .limit(CANDIDATES)
        )
    ).all()
    if not rows:
        return []
    by_org, by_run, by_model = await _driving(db, now)
    limits = await _concurrency(db, {run.model_id for _, run in rows})
    left: list[tuple[RunSlot, Run]] = [(slot, run) for slot, run in rows]
    claimed: list[SlotWork] = []
    while left and len(claimed) < n:
        # the next slot goes to the organisation, then the run, with the fewest driven now
        slot, run = min(
            left, key=lambda row: (by_org[row[1].org_id], by_run[row[1].id], row[1].created_at)
        )
        left.remove((slot, run))
        if by_model[run.model_id] >= limits.get(run.model_id, 0):
            continue
        if not await _take(db, slot, owner=owner, now=now, lease_s=lease_s):
            continue
        by_org[run.org_id] += 1
        by_run[run.id] += 1
        by_model[run.model_id] += 1
        claimed.append(_work(slot, run))
    started = {work.run_id for work in claimed}
    if started:
        await db.execute(
            update(Run)
            .where(Run.id.in_(started), Run.state == RunState.QUEUED.value)
            .values(state=RunState.RUNNING.value, started_at=func.coalesce(Run.started_at, now))
        )
    return claimed


async def _driving(
    db: AsyncSession, now: datetime
) -> tuple[Counter[uuid.UUID], Counter[uuid.UUID], Counter[uuid.UUID]]:
    """Slots being driven now, by organisation, run and model."""
    rows = await db.execute(
        select(Run.org_id, Run.id, Run.model_id, func.count())
        .join(RunSlot, RunSlot.run_id == Run.id)
        .where(RunSlot.state == SlotState.DRIVING.value, RunSlot.lease_expires_at >= now)
        .group_by(Run.org_id, Run.id, Run.model_id)
    )
    by_org: Counter[uuid.UUID] = Counter()
    by_run: Counter[uuid.UUID] = Counter()
    by_model: Counter[uuid.UUID] = Counter()
    for org_id, run_id, model_id, count in rows.tuples():
        by_org[org_id] += count
        by_run[run_id] += count
        by_model[model_id] += count
    return by_org, by_run, by_model


async def _concurrency(db: AsyncSession, model_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    rows = await db.execute(
        select(ModelEndpoint.model_id, ModelEndpoint.concurrency).where(
            ModelEndpoint.model_id.in_(list(model_ids))
        )
    )
    return dict(rows.tuples().all())


async def _take(
    db: AsyncSession, slot: RunSlot, *, owner: str, now: datetime, lease_s: float
) -> bool:
    taken = await db.execute(
        update(RunSlot)
        .where(RunSlot.run_id == slot.run_id, RunSlot.index == slot.index, _free(now))
        .values(
            state=SlotState.DRIVING.value,
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_s),
        )
    )
    return bool(cast(Any, taken).rowcount == 1)


def _work(slot: RunSlot, run: Run) -> SlotWork:
    return SlotWork(
        run_id=run.id,
        index=slot.index,
        session_id=slot.session_id,
        model_id=run.model_id,
        org_id=run.org_id,
        created_by=run.created_by,
        created_role=run.created_role,
        mode=run.mode,
        n_items=run.n_items,
        cost_cap_usd=run.cost_cap_usd,
    )


async def renew(
    db: AsyncSession, *, owner: str, slots: Iterable[tuple[uuid.UUID, int]], until: datetime
) -> dict[uuid.UUID, str]:
    """Extend ``owner``'s leases on ``slots`` to ``until``; the state of each of their runs
    (a paused or cancelled run's slots are to stop)."""
    by_run: defaultdict[uuid.UUID, list[int]] = defaultdict(list)
    for run_id, index in slots:
        by_run[run_id].append(index)
    if not by_run:
        return {}
    for run_id, indexes in by_run.items():  # one statement per run, not per slot
        await db.execute(
            update(RunSlot)
            .where(
                RunSlot.run_id == run_id,
                RunSlot.index.in_(indexes),
                RunSlot.lease_owner == owner,
            )
            .values(lease_expires_at=until)
        )
    run_ids = set(by_run)
    rows = await db.execute(select(Run.id, Run.state).where(Run.id.in_(run_ids)))
    return dict(rows.tuples().all())


async def release(
    db: AsyncSession,
    *,
    owner: str,
    work: SlotWork,
    end: SlotEnd,
    failures: Counter[str],
    not_before: datetime | None = None,
) -> None:
    """Give ``work``'s slot back in its new state (a waiting slot not before
    ``not_before``), and add its failures to the run's."""
    await db.execute(
        update(RunSlot)
        .where(
            RunSlot.run_id == work.run_id,
            RunSlot.index == work.index,
            RunSlot.lease_owner == owner,
            RunSlot.state == SlotState.DRIVING.value,
        )
        .values(
            state=end.state.value,
            lease_owner=None,
            lease_expires_at=not_before,
            error=end.error,
        )
    )
    if not failures and end.stop is None:
        return
    run = (
        await db.execute(select(Run).where(Run.id == work.run_id).with_for_update())
    ).scalar_one()
    merged = Counter(run.failures or {})
    merged.update(failures)
    run.failures = dict(merged)
    if end.stop is not None and end.state is SlotState.STOPPED:
        run.stop_reason = run.stop_reason or end.stop
        # no other slot of the run opens a session past the cap
        await db.execute(
            update(RunSlot)
            .where(RunSlot.run_id == run.id, RunSlot.state == SlotState.WAITING.value)
            .values(state=SlotState.STOPPED.value)
        )


async def give_back(
    db: AsyncSession, *, owner: str, slots: Iterable[tuple[uuid.UUID, int]]
) -> None:
    """``owner``'s slots back to ``waiting``, free at once (a worker that stops)."""
    for run_id, index in slots:
        await db.execute(
            update(RunSlot)
            .where(
                RunSlot.run_id == run_id,
                RunSlot.index == index,
                RunSlot.lease_owner == owner,
                RunSlot.state == SlotState.DRIVING.value,
            )
            .values(state=SlotState.WAITING.value, lease_owner=None, lease_expires_at=None)
        )


async def ended_runs(db: AsyncSession, *, now: datetime) -> list[Run]:
    """Running runs whose every slot has ended, moved to ``finished`` (or ``failed`` if no
    slot was driven to its end); returned for their open sessions to be closed."""
    live = (
        select(RunSlot.run_id)
        .where(RunSlot.state.notin_([state.value for state in ENDED_SLOT_STATES]))
        .distinct()
    )
    runs = (
        await db.scalars(
            select(Run)
            .where(Run.state == RunState.RUNNING.value, Run.id.notin_(live))
            .with_for_update()
        )
    ).all()
    for run in runs:
        states = await db.scalars(select(RunSlot.state).where(RunSlot.run_id == run.id))
        outcome = set(states)
        failed = outcome == {SlotState.FAILED.value}
        run.state = (RunState.FAILED if failed else RunState.FINISHED).value
        run.ended_at = now
        if failed and run.stop_reason is None:
            first = await db.scalar(
                select(RunSlot.error)
                .where(RunSlot.run_id == run.id, RunSlot.error.is_not(None))
                .order_by(RunSlot.index)
                .limit(1)
            )
            run.stop_reason = first
    return list(runs)
