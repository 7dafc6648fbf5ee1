"""The run worker: claims slots of queued runs, drives each with ``drive_slot``, renews its
leases, gives slots back as they end and ends runs whose slots have all ended.

One loop per process: inside the API on the embedded default (``server.app``), or in
``proctor run-worker`` processes on any number of hosts (``server.runs.process``). The
database is the record; a wake-up (an event in process, an arq job across hosts) only
shortens the wait, and a worker also looks every ``run_poll_s``. A worker that dies holds
its slots until their leases run out (``run_lease_s``); then another takes them and drives
their sessions on from where the server says they stand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from clients.sdk.types import SessionState
from server.auth.tokens import TokenCodec
from server.config import Settings
from server.database import unit_of_work
from server.ratelimit import Counters
from server.runs import claims
from server.runs.driver import ApiTarget, RunGate, drive_slot
from server.runs.models import Run, RunSlot
from server.runs.slots import SlotEnd, SlotWork
from server.runs.states import ENDED_RUN_STATES, RunState, SlotState
from server.sessions.models import EvalSession
from server.sessions.service import end_session
from server.sessions.states import OPEN_STATE_VALUES

log = logging.getLogger(__name__)
END_CHECK_EVERY = 10
"""Steps between checks for ended runs when this worker gave no slot back (another worker's
slots end runs too)."""
RETRY_OPEN_S = 30.0
"""How long a slot whose session could not open yet (a quota) waits before a new try."""

SlotKey = tuple[uuid.UUID, int]


class RunWorker:
    """Drives run slots, at most ``settings.run_slots_per_worker`` at once."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        settings: Settings,
        codec: TokenCodec,
        api: ApiTarget,
        counters: Counters,
    ) -> None:
        self.engine = engine
        self.counters = counters
        self.settings = settings
        self.codec = codec
        self.api = api
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._tasks: dict[SlotKey, asyncio.Task[None]] = {}
        self._gates: dict[SlotKey, RunGate] = {}
        self._work_done = asyncio.Event()
        self._released = False
        """A slot was given back since the runs were last checked for their end."""
        self._steps = 0

    @property
    def driving(self) -> int:
        return len(self._tasks)

    async def run_forever(self, wake: asyncio.Event) -> None:
        """Work until cancelled; then the slots in hand are given back."""
        try:
            while True:
                try:
                    await self.step()
                except Exception:
                    log.exception("run worker step failed")
                with contextlib.suppress(TimeoutError):
                    wait = asyncio.ensure_future(self._either(wake))
                    await asyncio.wait_for(wait, timeout=self._pause_s())
                wake.clear()
                self._work_done.clear()
        finally:
            await self.give_back()

    def _pause_s(self) -> float:
        return min(self.settings.run_poll_s, self.settings.run_lease_s / 3)

    async def _either(self, wake: asyncio.Event) -> None:
        waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(self._work_done.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def step(self) -> None:
        """Renew the leases held (and stop slots of paused or cancelled runs), claim free
        slots up to capacity, end the runs that are over."""
        now = datetime.now(UTC)
        await self._renew(now)
        free = self.settings.run_slots_per_worker - len(self._tasks)
        async with unit_of_work(self.engine) as db:
            claimed = await claims.claim_slots(
                db, owner=self.owner, n=free, now=now, lease_s=self.settings.run_lease_s
            )
        for work in claimed:
            key = (work.run_id, work.index)
            self._tasks[key] = asyncio.create_task(self._drive(work), name=f"run-slot-{key}")
        self._steps += 1
        if self._released or self._steps % END_CHECK_EVERY == 1:
            self._released = False
            await self._end_runs(now)

    async def _renew(self, now: datetime) -> None:
        if not self._tasks:
            return
        until = now + timedelta(seconds=self.settings.run_lease_s)
        async with unit_of_work(self.engine) as db:
            states = await claims.renew(db, owner=self.owner, slots=list(self._tasks), until=until)
        for (run_id, _), gate in list(self._gates.items()):
            state = states.get(run_id)
            if state in (RunState.PAUSED.value, RunState.CANCELLED.value):
                gate.stop_reason = str(state)
                gate.stop.set()

    async def _drive(self, work: SlotWork) -> None:
        key = (work.run_id, work.index)
        failures: Counter[str] = Counter()
        not_before = None
        try:
            end = await drive_slot(
                work,
                engine=self.engine,
                settings=self.settings,
                codec=self.codec,
                api=self.api,
                counters=self.counters,
                gate_of=lambda gate: self._gates.__setitem__(key, gate),
            )
            gate = self._gates.get(key)
            failures = gate.failures if gate is not None else failures
            if end.state is SlotState.WAITING and end.stop is None:
                not_before = datetime.now(UTC) + timedelta(seconds=RETRY_OPEN_S)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("run %s slot %d failed", work.run_id, work.index)
            end = SlotEnd(SlotState.FAILED, error=f"internal error: {type(error).__name__}")
        finally:
            self._tasks.pop(key, None)
            self._gates.pop(key, None)
        async with unit_of_work(self.engine) as db:
            await claims.release(
                db, owner=self.owner, work=work, end=end, failures=failures, not_before=not_before
            )
        self._released = True
        self._work_done.set()

    async def _end_runs(self, now: datetime) -> None:
        async with unit_of_work(self.engine) as db:
            await claims.ended_runs(db, now=now)
            await close_open_sessions(db, now=now)

    async def give_back(self) -> None:
        """Stop driving; the slots in hand go back to ``waiting`` for another worker (a
        call in flight is lost, its item asked again by whoever takes the slot)."""
        keys = list(self._tasks)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not keys:
            return
        try:
            async with unit_of_work(self.engine) as db:
                await claims.give_back(db, owner=self.owner, slots=keys)
        except Exception:  # their leases run out instead
            log.warning("could not give back %d run slots; their leases will expire", len(keys))


async def close_open_sessions(db: AsyncSession, *, now: datetime) -> int:
    """Abort the sessions still open of runs that have ended (stopped by the cost cap, or
    opened by a slot just as its run was cancelled): their undelivered items go back to the
    pool and their quota slot is free. How many."""
    rows = await db.scalars(
        select(EvalSession)
        .join(RunSlot, RunSlot.session_id == EvalSession.id)
        .join(Run, Run.id == RunSlot.run_id)
        .where(
            Run.state.in_([state.value for state in ENDED_RUN_STATES]),
            EvalSession.state.in_(list(OPEN_STATE_VALUES)),
        )
        .with_for_update(of=EvalSession, skip_locked=True)
    )
    sessions = rows.all()
    for session in sessions:
        await end_session(db, record=session, target=SessionState.ABORTED, now=now)
    return len(sessions)
