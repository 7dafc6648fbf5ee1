"""Review rules: which items a reviewer should look at, and why.

Each rule is one vectorised boolean mask over the items of an ``ItemStatistics``; an item
may fire several rules. A figure that is NaN (too few responses, no within-family pair,
...) never fires a rule: missing evidence is not evidence of a problem. Thresholds are
compared with a 1e-9 tolerance, so floating-point noise cannot flip an exact tie.

The rules:

* ``saturated``: nearly every model gets it right (p >= 0.95), a ceiling effect that
  leaves the item little power to separate models (Capability Alignment, §1);
* ``floor``: nearly every model fails it (p <= 0.05), the floor effect;
* ``negative_discrimination``: even the upper end of the 95% interval of the
  point-biserial correlation with ability is below 0, so stronger models do worse;
* ``low_cas``: CAS_i = H2(p) * max(0, rho) (Capability Alignment, eq. 2) below 0.1 on an
  item that is neither saturated nor at the floor (those already explain a low CAS);
* ``family_inversion``: at least one within-family inversion, a larger model failing where
  a smaller one of its family succeeds (Benchmark² (Qian et al.), eq. 5);
* ``judge_disagreement``: the judges disagree on at least 25% of the item's judged
  responses (with at least 2 of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np

from bank.health.responses import BoolArray, FloatArray, IntArray
from bank.health.results import ItemStatistics

TOLERANCE = 1e-9
"""Added to every threshold comparison, so an exact tie is decided by the rule."""


class FlagRule(StrEnum):
    """A reason to review an item."""

    SATURATED = "saturated"
    FLOOR = "floor"
    NEGATIVE_DISCRIMINATION = "negative_discrimination"
    LOW_CAS = "low_cas"
    FAMILY_INVERSION = "family_inversion"
    JUDGE_DISAGREEMENT = "judge_disagreement"


@dataclass(frozen=True, slots=True)
class FlagThresholds:
    """The thresholds of the review rules (every comparison with a 1e-9 tolerance)."""

    saturated_p: float = 0.95
    """``saturated`` fires when p >= this."""
    floor_p: float = 0.05
    """``floor`` fires when p <= this."""
    negative_discrimination_high: float = 0.0
    """``negative_discrimination`` fires when the upper end of the point-biserial's 95%
    interval is < this."""
    low_cas: float = 0.1
    """``low_cas`` fires when CAS_i < this on an item that fires neither ``saturated`` nor
    ``floor`` (there H2(p) is small, and the saturation rule is the better explanation)."""
    family_inversions: int = 1
    """``family_inversion`` fires at this many within-family inversions or more (Benchmark²
    (Qian et al.) flags items with any inversion)."""
    judge_disagreement: float = 0.25
    """``judge_disagreement`` fires when the share of judged responses on which the judges
    disagree is >= this ..."""
    judged_minimum: int = 2
    """... and the item has at least this many judged responses."""

    def __post_init__(self) -> None:
        for name in ("saturated_p", "floor_p", "judge_disagreement"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], not {value}")
        if not np.isfinite(self.negative_discrimination_high) or not np.isfinite(self.low_cas):
            raise ValueError("thresholds must be finite")
        if self.family_inversions < 1 or self.judged_minimum < 1:
            raise ValueError("family_inversions and judged_minimum must be at least 1")

    def to_dict(self) -> dict[str, float | int]:
        """The thresholds, JSON-ready (a report states the ones it used)."""
        return asdict(self)


def flag_masks(
    stats: ItemStatistics,
    thresholds: FlagThresholds | None = None,
    *,
    judge_disagreement: FloatArray | None = None,
    judged: IntArray | None = None,
) -> dict[FlagRule, BoolArray]:
    """One boolean mask over the items per rule (in ``FlagRule`` order).

    ``judge_disagreement`` (per item, the share of its judged responses on which the judges
    disagree) and ``judged`` (per item, how many responses more than one judge scored) come
    together or not at all; without them ``judge_disagreement`` fires on no item. NaN never
    fires a rule. Raises ``ValueError`` for arrays of the wrong length.
    """
    limits = thresholds or FlagThresholds()
    n_items = stats.p.shape[0]
    with np.errstate(invalid="ignore"):
        saturated = stats.p >= limits.saturated_p - TOLERANCE
        floor = stats.p <= limits.floor_p + TOLERANCE
        negative = stats.point_biserial_high < limits.negative_discrimination_high - TOLERANCE
        low_cas = (stats.cas < limits.low_cas - TOLERANCE) & ~saturated & ~floor
    inversions = np.asarray(stats.inversions) >= limits.family_inversions
    masks = {
        FlagRule.SATURATED: saturated,
        FlagRule.FLOOR: floor,
        FlagRule.NEGATIVE_DISCRIMINATION: negative,
        FlagRule.LOW_CAS: low_cas,
        FlagRule.FAMILY_INVERSION: inversions,
        FlagRule.JUDGE_DISAGREEMENT: _disagreement(n_items, limits, judge_disagreement, judged),
    }
    for rule, mask in masks.items():
        if mask.shape != (n_items,):
            raise ValueError(f"{rule}: {mask.shape[0]} values for {n_items} items")
    return masks


def _disagreement(
    n_items: int,
    limits: FlagThresholds,
    share: FloatArray | None,
    judged: IntArray | None,
) -> BoolArray:
    if (share is None) != (judged is None):
        raise ValueError("judge_disagreement and judged come together")
    if share is None or judged is None:
        return np.zeros(n_items, dtype=bool)
    share = np.asarray(share, dtype=np.float64)
    judged = np.asarray(judged)
    if share.shape != (n_items,) or judged.shape != (n_items,):
        raise ValueError(f"judge_disagreement and judged need one value per item ({n_items})")
    with np.errstate(invalid="ignore"):
        high = share >= limits.judge_disagreement - TOLERANCE
    return np.asarray(high & (judged >= limits.judged_minimum), dtype=bool)


def flag_items(
    stats: ItemStatistics,
    thresholds: FlagThresholds | None = None,
    *,
    judge_disagreement: FloatArray | None = None,
    judged: IntArray | None = None,
) -> dict[int, tuple[FlagRule, ...]]:
    """Item index -> the rules it fires (in ``FlagRule`` order), for flagged items only.

    Arguments as ``flag_masks``. Built from the masks by grouping items on their pattern
    of rules (at most 2**6 patterns), so a million items take one pass of numpy.
    """
    masks = flag_masks(stats, thresholds, judge_disagreement=judge_disagreement, judged=judged)
    rules = list(masks)
    code = np.zeros(stats.p.shape[0], dtype=np.int64)
    for bit, rule in enumerate(rules):
        code |= masks[rule].astype(np.int64) << bit
    flagged = np.flatnonzero(code)
    patterns = {
        int(value): tuple(rule for bit, rule in enumerate(rules) if int(value) >> bit & 1)
        for value in np.unique(code[flagged])
    }
    return dict(
        zip(flagged.tolist(), map(patterns.__getitem__, code[flagged].tolist()), strict=True)
    )


def rule_counts(masks: Mapping[FlagRule, BoolArray]) -> dict[str, int]:
    """How many items fire each rule (every rule listed, 0 included), and ``any``: how
    many fire at least one."""
    counts = {str(rule): int(np.count_nonzero(masks.get(rule, ()))) for rule in FlagRule}
    stacked = [np.asarray(mask, dtype=bool) for mask in masks.values()]
    counts["any"] = int(np.count_nonzero(np.logical_or.reduce(stacked))) if stacked else 0
    return counts


def parse_thresholds(values: Mapping[str, object]) -> FlagThresholds:
    """``FlagThresholds`` with the named fields replaced (from a setting or the command
    line); ``ValueError`` naming an unknown field or a value that is not a number in range."""
    known = FlagThresholds.__dataclass_fields__
    changes: dict[str, float | int] = {}
    for name, raw in values.items():
        if name not in known:
            raise ValueError(f"unknown threshold {name!r} (known: {', '.join(known)})")
        integer = name in ("family_inversions", "judged_minimum")
        try:
            number = float(str(raw))
        except ValueError:
            raise ValueError(f"{name}: {raw!r} is not a number") from None
        if not np.isfinite(number) or (integer and number != int(number)):
            raise ValueError(f"{name}: {raw!r} is not a {'whole ' if integer else ''}number")
        changes[name] = int(number) if integer else number
    return FlagThresholds(**changes)  # type: ignore[arg-type]
