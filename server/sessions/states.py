"""The session lifecycle and the per-item quota state machine.

The states themselves are the wire vocabulary of ``clients.sdk.types``; every allowed
transition is listed here and nowhere else; services call ``require_*`` before
changing anything, so a forbidden move is a ``Conflict`` rather than a silent corruption.
"""

from __future__ import annotations

from clients.sdk.types import (
    ALL_ANSWERED_STATES,
    ENDED_EARLY_STATES,
    OPEN_STATES,
    ItemState,
    SessionState,
)
from server.errors import Conflict

__all__ = [
    "ALL_ANSWERED_STATES",
    "ENDED_EARLY_STATES",
    "ITEM_TRANSITIONS",
    "OPEN_STATES",
    "OPEN_STATE_VALUES",
    "SCORED_STATES",
    "SCORED_STATE_VALUES",
    "SESSION_TRANSITIONS",
    "ItemState",
    "SessionState",
    "item_state",
    "require_item_transition",
    "require_session_transition",
]


SESSION_TRANSITIONS: dict[SessionState, frozenset[SessionState]] = {
    SessionState.CREATED: frozenset(
        {SessionState.ACTIVE, SessionState.EXPIRED, SessionState.ABORTED}
    ),
    SessionState.ACTIVE: frozenset(
        {SessionState.ANSWERED, SessionState.EXPIRED, SessionState.ABORTED}
    ),
    SessionState.ANSWERED: frozenset({SessionState.SCORED}),
    SessionState.SCORED: frozenset({SessionState.REVIEWED}),
    SessionState.REVIEWED: frozenset(),
    SessionState.EXPIRED: frozenset(),
    SessionState.ABORTED: frozenset(),
}

ITEM_TRANSITIONS: dict[ItemState, frozenset[ItemState]] = {
    ItemState.ALLOCATED: frozenset({ItemState.PENDING, ItemState.RELEASED}),
    ItemState.PENDING: frozenset({ItemState.COMPLETED}),
    ItemState.COMPLETED: frozenset(),
    ItemState.RELEASED: frozenset(),
}

SCORED_STATES: frozenset[SessionState] = frozenset({SessionState.SCORED, SessionState.REVIEWED})
"""Sessions whose every answer has a verdict or waits for a person: their figures are the
session's aggregate result, and the leaderboard reads them."""
SCORED_STATE_VALUES = frozenset(s.value for s in SCORED_STATES)

OPEN_STATE_VALUES = frozenset(s.value for s in OPEN_STATES)
"""``OPEN_STATES`` (which count against quotas) as stored in the ``state`` column."""


def require_session_transition(current: str, target: SessionState) -> None:
    """Raise ``Conflict`` unless a session may go from ``current`` to ``target``."""
    if target not in SESSION_TRANSITIONS[SessionState(current)]:
        raise Conflict(f"a {current} session cannot become {target.value}")


def require_item_transition(current: ItemState, target: ItemState) -> None:
    """Raise ``Conflict`` unless an item may go from ``current`` to ``target``."""
    if target not in ITEM_TRANSITIONS[current]:
        raise Conflict(f"an item that is {current.value} cannot become {target.value}")


def item_state(
    position: int, *, n_delivered: int, n_completed: int, session_state: str
) -> ItemState:
    """The state of the item at ``position``: delivery and answers go strictly in order, so
    the two counters determine it."""
    if position < n_completed:
        return ItemState.COMPLETED
    if position < n_delivered:
        return ItemState.PENDING
    if SessionState(session_state) in ENDED_EARLY_STATES:
        return ItemState.RELEASED
    return ItemState.ALLOCATED
