"""Quota planning for the three-stage stratified sample (papers/004 §2.2.1; DESIGN.md).

Pure functions, no I/O. ``plan_quotas`` splits N over

1. disciplines, evenly;
2. question types within a discipline, in proportion to the bank;
3. sub-disciplines within a discipline-type cell, in proportion to the bank,

with integer quotas from largest-remainder rounding (Hamilton's method), so quotas sum
exactly to N. Each cell is capped by what is still available to the organisation; the
part of a share a cell cannot hold moves to its siblings (water-filling), and the plan
records every such move as shortfall.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bank.strata import StratumKey

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class StratumSupply:
    """A stratum's size in the bank (active items) and what the organisation may still get."""

    key: StratumKey
    bank: int
    available: int


@dataclass(slots=True)
class Plan:
    """Integer quotas per stratum and where the plan could not follow the ideal split."""

    n: int
    quotas: dict[StratumKey, int]
    shortfall: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.quotas.values())


def apportion(
    total: int,
    weights: Mapping[K, float],
    caps: Mapping[K, int] | None = None,
    tie_order: Sequence[K] | None = None,
) -> dict[K, int]:
    """Split ``total`` into integers proportional to ``weights``, each at most its cap.

    Largest-remainder rounding: every uncapped share is the floor or the ceiling of its
    exact proportional share, and the shares sum to ``min(total, sum(caps))``. Shares that
    would exceed their cap are fixed at the cap and the rest is re-split among the others.

    Parameters
    ----------
    total : int
        Non-negative amount to split.
    weights : mapping
        Non-negative weight per key; keys with weight 0 get 0.
    caps : mapping, optional
        Upper bound per key (missing keys are unbounded).
    tie_order : sequence, optional
        Priority among equal remainders (earlier wins); defaults to the mapping's order.

    Returns
    -------
    dict
        A share for every key of ``weights``.
    """
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    shares = dict.fromkeys(weights, 0)
    bounds = {k: (caps.get(k, math.inf) if caps is not None else math.inf) for k in weights}
    open_keys = [k for k in weights if weights[k] > 0 and bounds[k] > 0]
    remaining = total if caps is None else min(total, _finite_sum(bounds, open_keys, total))
    while open_keys and remaining > 0:
        weight_sum = sum(weights[k] for k in open_keys)
        capped = [k for k in open_keys if remaining * weights[k] / weight_sum >= bounds[k]]
        if not capped:
            break
        for k in capped:
            shares[k] = int(bounds[k])
            remaining -= int(bounds[k])
        open_keys = [k for k in open_keys if k not in capped]
    if open_keys and remaining > 0:
        shares.update(_largest_remainder(remaining, weights, open_keys, tie_order))
    return shares


def _finite_sum(bounds: Mapping[K, float], keys: Sequence[K], total: int) -> int:
    capacity = sum(bounds[k] for k in keys)
    return total if math.isinf(capacity) else int(capacity)


def _largest_remainder(
    total: int, weights: Mapping[K, float], keys: Sequence[K], tie_order: Sequence[K] | None
) -> dict[K, int]:
    weight_sum = sum(weights[k] for k in keys)
    exact = {k: total * weights[k] / weight_sum for k in keys}
    shares = {k: math.floor(exact[k]) for k in keys}
    leftover = total - sum(shares.values())
    rank = {k: i for i, k in enumerate(tie_order if tie_order is not None else keys)}
    by_remainder = sorted(keys, key=lambda k: (-(exact[k] - shares[k]), rank.get(k, len(rank))))
    for k in by_remainder[:leftover]:
        shares[k] += 1
    return shares


def plan_quotas(
    n: int,
    supply: Sequence[StratumSupply],
    *,
    disciplines: Sequence[str] | None = None,
    tie_seed: str = "",
) -> Plan:
    """Plan integer quotas per stratum summing to ``n`` (or to all that is available).

    Parameters
    ----------
    n : int
        Sample size N.
    supply : sequence of StratumSupply
        Every stratum with its bank size and its availability to the organisation.
    disciplines : sequence of str, optional
        The evaluated disciplines (default: every discipline with active items).
    tie_seed : str
        Seeds the order among equal remainders so no discipline is always the lucky one.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cells = [s for s in supply if s.bank > 0 and (disciplines is None or s.key[0] in disciplines)]
    tree = _Tree(cells)
    names = sorted(tree.disciplines) if disciplines is None else list(dict.fromkeys(disciplines))
    tie = _shuffled(names, tie_seed)
    ideal = apportion(n, dict.fromkeys(names, 1.0), tie_order=tie)
    got = apportion(n, dict.fromkeys(names, 1.0), {d: tree.available((d,)) for d in names}, tie)
    plan = Plan(n=n, quotas={})
    _note(plan, "by_discipline", ideal, got)
    for discipline in names:
        _split(plan, tree, (discipline,), got[discipline], tie_seed)
    plan.shortfall["unplaced"] = n - plan.total
    return plan


def _split(plan: Plan, tree: _Tree, prefix: tuple[str, ...], quota: int, tie_seed: str) -> None:
    """Split ``quota`` over the children of ``prefix`` in proportion to the bank."""
    children = tree.children(prefix)
    if not children:
        return
    weights = {c: float(tree.bank((*prefix, c))) for c in children}
    caps = {c: tree.available((*prefix, c)) for c in children}
    tie = _shuffled(children, tie_seed + "/".join(prefix))
    ideal = apportion(quota, weights, tie_order=tie)
    got = apportion(quota, weights, caps, tie)
    level = "by_type" if len(prefix) == 1 else "by_subdiscipline"
    _note(
        plan,
        level,
        {_path(prefix, c): v for c, v in ideal.items()},
        {_path(prefix, c): v for c, v in got.items()},
    )
    for child, share in got.items():
        key = (*prefix, child)
        if len(key) == 3:
            if share:
                plan.quotas[StratumKey(*key)] = share
        else:
            _split(plan, tree, key, share, tie_seed)


def _path(prefix: tuple[str, ...], child: str) -> str:
    return "/".join((*prefix, child))


def _note(plan: Plan, level: str, ideal: Mapping[Any, int], got: Mapping[Any, int]) -> None:
    """Record cells that got less than their ideal share (their siblings took it)."""
    short = {str(k): ideal[k] - got[k] for k in ideal if got[k] < ideal[k]}
    if short:
        plan.shortfall.setdefault(level, {}).update(short)


def _shuffled(keys: Sequence[str], seed: str) -> list[str]:
    order = list(keys)
    random.Random(f"ties:{seed}").shuffle(order)
    return order


class _Tree:
    """Bank sizes and availability summed over discipline / type / sub-discipline prefixes."""

    def __init__(self, cells: Sequence[StratumSupply]) -> None:
        self._bank: dict[tuple[str, ...], int] = defaultdict(int)
        self._available: dict[tuple[str, ...], int] = defaultdict(int)
        self._children: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for cell in cells:
            key = (cell.key.discipline, cell.key.qtype, cell.key.subdiscipline)
            for depth in range(1, 4):
                prefix = key[:depth]
                if prefix not in self._bank:
                    self._children[prefix[:-1]].append(prefix[-1])
                self._bank[prefix] += cell.bank
                self._available[prefix] += max(0, min(cell.available, cell.bank))

    @property
    def disciplines(self) -> list[str]:
        return self._children[()]

    def children(self, prefix: tuple[str, ...]) -> list[str]:
        return sorted(self._children.get(prefix, []))

    def bank(self, prefix: tuple[str, ...]) -> int:
        return self._bank.get(prefix, 0)

    def available(self, prefix: tuple[str, ...]) -> int:
        return self._available.get(prefix, 0)
