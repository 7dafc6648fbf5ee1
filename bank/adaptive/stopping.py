"""The rank-aware stopping rule: stop when the model's place among its neighbours is settled.

The leaderboard's neighbours of the session's estimate are the nearest model above and the
nearest below (by score, the session's own model left out). With the session's estimate S
and standard error s, and a neighbour's score S_n and standard error s_n, the normal
approximation gives P(S beats S_n) = Phi((S - S_n) / sqrt(s^2 + s_n^2)). The place is
settled when the model beats the one below and is beaten by the one above each with
probability at least 1 - delta_check / 2 (one side each, so the check spends delta_check
in all, and over the :class:`~bank.adaptive.bounds.CheckSchedule` the stated confidence
holds over every check made). A model with no neighbour on one side needs only the other;
with no neighbour at all the rule never fires (there is no place to settle).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Neighbour:
    """Another model on the leaderboard: its score and standard error on [0, 1]."""

    score: float
    standard_error: float = 0.0


def beat_probability(estimate: float, standard_error: float, other: Neighbour) -> float:
    """P(the session's model scores above ``other``) under the normal approximation."""
    spread = math.hypot(standard_error, other.standard_error)
    if spread == 0.0:
        return 1.0 if estimate > other.score else 0.0 if estimate < other.score else 0.5
    return 0.5 * math.erfc(-(estimate - other.score) / (spread * math.sqrt(2.0)))


def rank_settled(
    estimate: float, standard_error: float, neighbours: Sequence[Neighbour], delta: float
) -> bool:
    """True when the estimate's place among ``neighbours`` holds at level ``delta``."""
    if not neighbours or math.isnan(estimate):
        return False
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    above = [n for n in neighbours if n.score >= estimate]
    below = [n for n in neighbours if n.score < estimate]
    need = 1.0 - delta / 2.0
    if above:
        nearest = min(above, key=lambda n: n.score)
        if 1.0 - beat_probability(estimate, standard_error, nearest) < need:
            return False
    if below:
        nearest = max(below, key=lambda n: n.score)
        if beat_probability(estimate, standard_error, nearest) < need:
            return False
    return True
