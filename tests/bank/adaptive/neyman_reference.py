"""Cochran's integer Neyman allocation, written out: the reference that the greedy
allocation of :mod:`bank.adaptive.policy` (item after item by
:func:`bank.adaptive.allocation.marginal_gain`) is checked against."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

from bank.sampling.plan import apportion

K = TypeVar("K", bound=Hashable)


def neyman_allocation(
    total: int,
    *,
    weights: Mapping[K, float],
    sds: Mapping[K, float],
    costs: Mapping[K, float] | None = None,
    sizes: Mapping[K, int] | None = None,
    minimum: Mapping[K, int] | None = None,
) -> dict[K, int]:
    """Integer Neyman allocation of ``total`` items: ``n_h ∝ W_h S_h / sqrt(c_h)``.

    ``total`` counts items; for a cost budget C pass ``C / mean cost``. Each stratum gets
    at least ``minimum[h]`` (the pilot) and at most ``sizes[h]`` (its population); the
    rest follows the Neyman shares with largest-remainder rounding, so the result sums to
    ``min(total, sum(sizes))`` when the minimums fit. Raises ValueError on a negative
    weight, sd or non-positive cost.
    """
    costs = costs or {}
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    for name, mapping in (("sizes", sizes), ("minimum", minimum)):
        negative = [key for key, v in (mapping or {}).items() if v < 0]
        if negative:
            raise ValueError(f"{name} must be >= 0: stratum {negative[0]!r}")
    shares: dict[K, float] = {}
    for key, w in weights.items():
        c = costs.get(key, 1.0)
        if w < 0 or sds[key] < 0 or c <= 0:
            raise ValueError(f"stratum {key!r}: weights and sds must be >= 0 and costs > 0")
        shares[key] = w * sds[key] / math.sqrt(c)
    base = {
        key: min(minimum.get(key, 0) if minimum else 0, sizes[key] if sizes else total)
        for key in weights
    }
    rest = total - sum(base.values())
    if rest < 0:
        raise ValueError(
            f"the pilot needs {sum(base.values())} items, more than the {total} allowed"
        )
    if sum(shares.values()) == 0:
        shares = {key: float(w) for key, w in weights.items()}
    caps = {key: (sizes[key] - base[key]) for key in weights} if sizes else None
    extra = apportion(rest, shares, caps)
    left = rest - sum(extra.values())
    if left > 0 and caps is not None:
        # strata with a share were capped and the rest have S_h = 0: fill them by weight
        room = {key: caps[key] - extra.get(key, 0) for key in weights}
        more = apportion(left, {key: float(w) for key, w in weights.items()}, room)
        extra = {key: extra.get(key, 0) + more.get(key, 0) for key in weights}
    return {key: base[key] + extra.get(key, 0) for key in weights}
