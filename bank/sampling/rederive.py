"""Re-deriving a recorded sample from its seed: the pure part (no I/O).

An auditor re-runs a sample's draw on the bank and exposure state as of the instant it was
drawn (``bank.sampling.as_of`` rebuilds that state and runs the live draw's planning and
selection on it) and compares the result with what was recorded. This module holds what
needs no database: an item's status at a past instant from its status history, and the
comparison of the re-derived sample with the stored one in drawn order.

The stored order is ``SampleItem.drawn_position`` (the order the draw gave, which an
adaptive session's swaps of undelivered positions never change), falling back to
``position`` for samples recorded before drawn positions existed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Any


class Outcome(StrEnum):
    """What a re-derivation found."""

    MATCH = "match"
    """The re-derived sample is the stored one, item for item in drawn order."""
    MISMATCH = "mismatch"
    """They differ (``Comparison.first_difference`` says where)."""
    NOT_REDERIVABLE = "not_rederivable"
    """The record lacks what a re-derivation needs (``reason`` says what)."""


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One stored position of a sample."""

    position: int
    """Where the item sits now (delivery order)."""
    drawn_position: int | None
    """Where the draw put it; None on samples drawn before drawn positions were kept."""
    item_id: uuid.UUID

    @property
    def drawn_index(self) -> int:
        return self.position if self.drawn_position is None else self.drawn_position


def drawn_order(stored: Sequence[StoredItem]) -> list[StoredItem]:
    """``stored`` in the order the draw gave (drawn position, else position)."""
    return sorted(stored, key=lambda s: (s.drawn_index, s.position))


@dataclass(frozen=True, slots=True)
class Difference:
    """The first index (in drawn order) where the re-derived and stored samples differ."""

    index: int
    """0-based index in drawn order."""
    position: int | None
    """The stored item's current position (None when the stored sample is shorter)."""
    expected: uuid.UUID | None
    """The re-derived item (None when the re-derived sample is shorter)."""
    stored: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The re-derived sample against the stored one."""

    outcome: Outcome
    n_expected: int
    n_stored: int
    first_difference: Difference | None
    same_set: bool
    """The same items, whatever their order."""
    shortfall_equal: bool
    """The re-derived shortfall is the recorded one."""


def compare(
    expected: Sequence[uuid.UUID],
    stored: Sequence[StoredItem],
    *,
    expected_shortfall: Mapping[str, Any] | None = None,
    stored_shortfall: Mapping[str, Any] | None = None,
) -> Comparison:
    """Compare the re-derived item ids ``expected`` (in drawn order) with ``stored``.

    A match needs the same items in the same drawn order and the same shortfall."""
    ordered = drawn_order(stored)
    first: Difference | None = None
    for index in range(max(len(expected), len(ordered))):
        want = expected[index] if index < len(expected) else None
        have = ordered[index] if index < len(ordered) else None
        if have is None or want != have.item_id:
            position = None if have is None else have.position
            first = Difference(index, position, want, None if have is None else have.item_id)
            break
    shortfall_equal = dict(expected_shortfall or {}) == dict(stored_shortfall or {})
    same_set = set(expected) == {s.item_id for s in stored}
    ok = first is None and shortfall_equal
    return Comparison(
        outcome=Outcome.MATCH if ok else Outcome.MISMATCH,
        n_expected=len(expected),
        n_stored=len(stored),
        first_difference=first,
        same_set=same_set,
        shortfall_equal=shortfall_equal,
    )


def status_at(current: str, changes_after: Sequence[tuple[str, str]]) -> str:
    """An item's status at instant T from its ``current`` status and its status changes
    made after T, in order, as ``(from_status, to_status)``: the first one's
    ``from_status``, or ``current`` when nothing changed since."""
    return changes_after[0][0] if changes_after else current


def history_breaks(current: str, changes_after: Sequence[tuple[str, str]]) -> bool:
    """Whether the changes do not chain (each ``to`` the next ``from``, the last ``to``
    the current status): a status changed without its history row, or an edited row."""
    if not changes_after:
        return False
    for (_, to), (following, _) in pairwise(changes_after):
        if to != following:
            return True
    return changes_after[-1][1] != current


def missing_delivered(
    delivered: Sequence[StoredItem], rederived: Sequence[uuid.UUID]
) -> StoredItem | None:
    """The first delivered item (by position) not in the re-derived sample, or None."""
    expected = set(rederived)
    for item in sorted(delivered, key=lambda s: s.position):
        if item.item_id not in expected:
            return item
    return None
