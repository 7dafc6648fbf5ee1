"""Quota planning for the three-stage stratified sample (LLMEval-Fair (Zhang et al.) §2.2.1).

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
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from bank.stratum_key import StratumKey

DEFAULT_N = 1000
"""The size of a sample when none is asked for."""

K = TypeVar("K", bound=Hashable)


class StratumSupply(NamedTuple):
    """A stratum's size in the bank (active items) and what the organisation may still get
    (a tuple: one per stratum, thousands per sample)."""

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
    if caps is None:
        bounds: Mapping[K, float] = dict.fromkeys(weights, math.inf)
        open_keys = [k for k, w in weights.items() if w > 0]
        remaining = total
    else:
        bounds = {k: caps.get(k, math.inf) for k in weights}
        open_keys = [k for k, w in weights.items() if w > 0 and bounds[k] > 0]
        remaining = min(total, _finite_sum(bounds, open_keys, total))
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
    shares: dict[K, int] = {}
    remainders: dict[K, float] = {}
    for k in keys:
        exact = total * weights[k] / weight_sum
        shares[k] = floor = math.floor(exact)
        remainders[k] = floor - exact
    leftover = total - sum(shares.values())
    if leftover:
        order = tie_order if tie_order is not None else keys
        rank = {k: i for i, k in enumerate(order)}
        last = len(rank)
        by_remainder = sorted(keys, key=lambda k: (remainders[k], rank.get(k, last)))
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
    root = _Node.build(s for s in supply if s.bank > 0)
    if disciplines is not None:
        root.children = {d: root.children.get(d, _Node()) for d in dict.fromkeys(disciplines)}
    plan = Plan(n=n, quotas={})
    _Planner(plan, random.Random(f"ties:{tie_seed}")).split(root, (), n)
    plan.shortfall["unplaced"] = n - plan.total
    return plan


LEVELS = ("by_discipline", "by_type", "by_subdiscipline")


@dataclass(slots=True)
class _Node:
    """A prefix of the discipline / type / sub-discipline tree with summed counts."""

    bank: int = 0
    available: int = 0
    children: dict[str, _Node] = field(default_factory=dict)

    @classmethod
    def build(cls, cells: Iterable[StratumSupply]) -> _Node:
        """The tree of ``cells`` (a key given twice is summed), counts summed upwards.

        Thousands of cells per sample: the loop only places leaves; the sums are taken
        afterwards over the few inner nodes."""
        root = cls()
        disciplines = root.children
        for cell in cells:
            discipline, qtype, sub = cell.key
            bank = cell.bank
            available = max(0, min(cell.available, bank))
            types = disciplines.get(discipline)
            if types is None:
                types = disciplines[discipline] = cls()
            subs = types.children.get(qtype)
            if subs is None:
                subs = types.children[qtype] = cls()
            leaf = subs.children.get(sub)
            if leaf is None:
                subs.children[sub] = cls(bank, available)
            else:
                leaf.bank += bank
                leaf.available += available
        root._sum_children(depth=0)
        return root

    def _sum_children(self, depth: int) -> None:
        """Set the inner nodes' counts to their children's sums (leaves are at depth 3)."""
        if depth == 3:
            return
        for child in self.children.values():
            child._sum_children(depth + 1)
        self.bank = sum(c.bank for c in self.children.values())
        self.available = sum(c.available for c in self.children.values())


@dataclass(slots=True)
class _Planner:
    plan: Plan
    rng: random.Random

    def split(self, node: _Node, prefix: tuple[str, ...], quota: int) -> None:
        """Split ``quota`` over ``node``'s children: evenly at the top, by bank below."""
        children = node.children
        names = sorted(children)
        if not names:
            return
        depth = len(prefix)
        nodes = [children[c] for c in names]
        if depth == 0:
            weights = dict.fromkeys(names, 1.0)
        else:
            weights = {c: float(child.bank) for c, child in zip(names, nodes, strict=True)}
        caps = {c: child.available for c, child in zip(names, nodes, strict=True)}
        tie = names.copy()
        self.rng.shuffle(tie)
        got = apportion(quota, weights, caps, tie)
        weight_sum = sum(weights.values())
        if any(caps[c] * weight_sum < quota * weights[c] for c in names):  # a cap binds
            self._note(LEVELS[depth], prefix, apportion(quota, weights, tie_order=tie), got)
        if depth == 2:
            discipline, qtype = prefix
            quotas = self.plan.quotas
            for name in names:
                if share := got[name]:
                    quotas[StratumKey(discipline, qtype, name)] = share
            return
        for name, child in zip(names, nodes, strict=True):
            if share := got[name]:
                self.split(child, (*prefix, name), share)

    def _note(
        self, level: str, prefix: tuple[str, ...], ideal: Mapping[str, int], got: Mapping[str, int]
    ) -> None:
        """Record cells that got less than their ideal share (their siblings took it)."""
        short = {"/".join((*prefix, k)): ideal[k] - got[k] for k in ideal if got[k] < ideal[k]}
        if short:
            self.plan.shortfall.setdefault(level, {}).update(short)
