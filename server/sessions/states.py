"""The session lifecycle and the per-item quota state machine (papers/004 §2.2.2, app. H).

Every allowed transition is listed here and nowhere else; services call ``require_*`` before
changing anything, so a forbidden move is a ``Conflict`` rather than a silent corruption.
"""

from __future__ import annotations

from enum import StrEnum

from server.errors import Conflict


class SessionState(StrEnum):
    CREATED = "created"
    """Items allocated, none delivered yet."""
    ACTIVE = "active"
    ANSWERED = "answered"
    """Every item answered; waiting for scores."""
    SCORED = "scored"
    EXPIRED = "expired"
    ABORTED = "aborted"


class ItemState(StrEnum):
    ALLOCATED = "allocated"
    PENDING = "pending"
    """Delivered, not yet answered."""
    COMPLETED = "completed"
    RELEASED = "released"
    """Allocated, never delivered, returned to the pool when the session ended early."""


SESSION_TRANSITIONS: dict[SessionState, frozenset[SessionState]] = {
    SessionState.CREATED: frozenset(
        {SessionState.ACTIVE, SessionState.EXPIRED, SessionState.ABORTED}
    ),
    SessionState.ACTIVE: frozenset(
        {SessionState.ANSWERED, SessionState.EXPIRED, SessionState.ABORTED}
    ),
    SessionState.ANSWERED: frozenset({SessionState.SCORED}),
    SessionState.SCORED: frozenset(),
    SessionState.EXPIRED: frozenset(),
    SessionState.ABORTED: frozenset(),
}

ITEM_TRANSITIONS: dict[ItemState, frozenset[ItemState]] = {
    ItemState.ALLOCATED: frozenset({ItemState.PENDING, ItemState.RELEASED}),
    ItemState.PENDING: frozenset({ItemState.COMPLETED}),
    ItemState.COMPLETED: frozenset(),
    ItemState.RELEASED: frozenset(),
}

OPEN_STATES = frozenset({SessionState.CREATED, SessionState.ACTIVE})
"""States in which items are delivered and answered (and which count against quotas)."""
OPEN_STATE_VALUES = frozenset(s.value for s in OPEN_STATES)
"""``OPEN_STATES`` as stored in the ``state`` column."""
ENDED_EARLY = frozenset({SessionState.EXPIRED, SessionState.ABORTED})


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
    if SessionState(session_state) in ENDED_EARLY:
        return ItemState.RELEASED
    return ItemState.ALLOCATED
