"""A run's lifecycle and the state of each of its session slots.

The run states are the wire vocabulary of ``clients.sdk.types``; every allowed move is
listed here and nowhere else, and services call ``require_run_transition`` before changing
a run, so a forbidden move is a ``Conflict``.
"""

from __future__ import annotations

from enum import StrEnum

from clients.sdk.types import ENDED_RUN_STATES, RunState
from server.errors import Conflict

__all__ = [
    "CLAIMABLE_RUN_STATES",
    "ENDED_RUN_STATES",
    "RUN_TRANSITIONS",
    "RunState",
    "SlotState",
    "require_run_transition",
]

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset(
        {RunState.RUNNING, RunState.PAUSED, RunState.CANCELLED, RunState.FAILED}
    ),
    RunState.RUNNING: frozenset(
        {RunState.PAUSED, RunState.FINISHED, RunState.FAILED, RunState.CANCELLED}
    ),
    RunState.PAUSED: frozenset({RunState.QUEUED, RunState.CANCELLED}),
    RunState.FINISHED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

CLAIMABLE_RUN_STATES: frozenset[RunState] = frozenset({RunState.QUEUED, RunState.RUNNING})
"""Runs whose slots a worker may take."""


class SlotState(StrEnum):
    """One session of a run: ``waiting`` for a worker (or again, after a pause or a lost
    worker), ``driving``, or ended: ``done`` (driven to its end), ``stopped`` (the cost cap),
    ``failed`` (a failure no retry mends: a bad key, an unknown model)."""

    WAITING = "waiting"
    DRIVING = "driving"
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"


ENDED_SLOT_STATES = frozenset({SlotState.DONE, SlotState.STOPPED, SlotState.FAILED})


def require_run_transition(current: RunState | str, target: RunState) -> RunState:
    """``current`` as a ``RunState`` if the run may move to ``target``; else ``Conflict``."""
    state = RunState(current)
    if target not in RUN_TRANSITIONS[state]:
        raise Conflict(f"a {state.value} run cannot become {target.value}")
    return state
