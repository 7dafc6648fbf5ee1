"""The adaptive policy: which stratum the next item comes from, and when to stop.

One :class:`AdaptiveState` per session, fed by the caller (the replay or the server):

1. ``next_stratum()`` names the stratum the next item must come from, or None when the
   budget is spent or every stratum is exhausted; the caller draws an unseen item of that
   stratum uniformly at random and calls ``allocated(key)``.
2. ``scored(key, score)`` records a score in [0, 1] when it arrives (objective items at
   once, judged items later); allocated but unscored items count toward the allocation,
   not toward the estimate.
3. ``decision()`` says whether to stop: it evaluates the interval only at the check
   points of the :class:`~bank.adaptive.bounds.CheckSchedule` (each at ``delta / K``),
   so the stated confidence holds over every check made.

The allocation is Neyman's in its greedy form (:func:`~bank.adaptive.allocation.marginal_gain`):
each next item goes to the stratum whose variance term it reduces most per unit cost,
with each stratum's standard deviation shrunk toward a prior and floored
(:func:`~bank.adaptive.allocation.shrunk_sd`). Every stratum first gets ``pilot`` items.

Policies (:class:`Policy`): ``uniform`` draws from the whole population as one stratum;
``proportional`` stratifies and allocates by W_h; ``neyman`` allocates by W_h S_h /
sqrt(c_h) with the pooled session sd as prior; ``neyman-irt`` sub-divides each stratum
into difficulty bands from the bank's history (2PL, :mod:`bank.adaptive.irt`) and takes
each band's prior sd from the model's current ability estimate, sqrt(p (1 - p)) for
the band's mean predicted score p:
the items the model is sure to pass or fail get few draws, the informative ones many.
Within a stratum items are drawn uniformly, so the stratified estimator stays unbiased
(design-based); informative items are preferred by the allocation across bands, not by
choosing items inside a stratum, which would bias the mean. ``full`` is the fixed
session: the whole budget in proportion, no stopping.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from bank.adaptive.allocation import bounded_sd, marginal_gain, shrunk_sd
from bank.adaptive.bounds import Bound, CheckSchedule, halfwidth
from bank.adaptive.estimator import StratifiedEstimate, StratumTally, stratified_estimate
from bank.adaptive.irt import ItemParameters, estimate_ability
from bank.adaptive.selection import DEFAULT_FLOOR


class Policy(StrEnum):
    FULL = "full"
    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    NEYMAN = "neyman"
    NEYMAN_IRT = "neyman-irt"
    MODEL_ASSISTED = "model-assisted"
    """IRT-predicted, content-balanced randomised selection with the model-assisted
    (difference) estimator and rank-aware stopping: :mod:`bank.adaptive.assisted`."""


class StopReason(StrEnum):
    PRECISE = "precise"
    """The interval's half-width fell to the target."""
    BUDGET = "budget"
    """The budget is spent (or the population exhausted) and every item is scored."""
    SETTLED = "settled"
    """The model's place among its leaderboard neighbours is settled (``model-assisted``)."""


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    """How an adaptive session samples and stops. Half-widths are on the [0, 1] scale."""

    policy: Policy = Policy.NEYMAN_IRT
    budget: int = 1000
    target_halfwidth: float = 0.05
    delta: float = 0.05
    bound: Bound = Bound.HOEFFDING_SERFLING
    pilot: int = 2
    check_every: int = 10
    prior_weight: float = 4.0
    sd_floor: float = 0.1
    bands: int = 5
    """Difficulty bands per stratum for ``neyman-irt``."""
    selection_floor: float = DEFAULT_FLOOR
    """``model-assisted``: added to every item's selection size (the exposure control of
    :func:`bank.adaptive.selection.selection_probabilities`)."""

    def __post_init__(self) -> None:
        if self.budget < 1 or self.pilot < 0 or self.check_every < 1 or self.bands < 1:
            raise ValueError("budget, check_every and bands must be positive, pilot >= 0")
        if self.selection_floor <= 0:
            raise ValueError("selection_floor must be positive")
        if self.target_halfwidth <= 0:
            raise ValueError("target_halfwidth must be positive")
        if not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1)")

    @property
    def schedule(self) -> CheckSchedule:
        return CheckSchedule(budget=self.budget, every=self.check_every, start=self.check_every)


@dataclass(frozen=True, slots=True)
class Decision:
    """Where the session stands after a check."""

    estimate: StratifiedEstimate
    halfwidth: float
    stop: StopReason | None


@dataclass(slots=True)
class _Stratum:
    tally: StratumTally
    weight: float
    cost: float = 1.0
    allocated: int = 0
    allocation_sd: float = 1.0
    """S_h used by the allocation."""
    estimate_sd: float = 0.5
    """The regularised S_h used by the estimate's variance."""
    pilot_sd: float = 0.5
    """The bounded sd of the shrunk mean (``neyman`` freezes it when the pilot is in)."""
    items: ItemParameters | None = None
    """The stratum's items' parameters (``neyman-irt``), for its predicted mean."""


@dataclass(slots=True)
class AdaptiveState:
    """One session's allocation and estimate; see the module docstring for the protocol."""

    config: AdaptiveConfig
    strata: dict[Hashable, _Stratum]
    scored_items: list[tuple[float, float, float]] = field(default_factory=list)
    """(a, b, score) of every scored item with known parameters (``neyman-irt``)."""
    theta: float = 0.0
    pilot_done: bool = False
    last: Decision | None = None

    @classmethod
    def start(
        cls,
        config: AdaptiveConfig,
        sizes: Mapping[Hashable, int],
        *,
        costs: Mapping[Hashable, float] | None = None,
        item_parameters: Mapping[Hashable, ItemParameters] | None = None,
    ) -> AdaptiveState:
        """A fresh state over strata of the given population ``sizes`` (all > 0);
        ``costs[h]`` is c_h (default 1), ``item_parameters[h]`` the stratum's items'
        2PL parameters (``neyman-irt``)."""
        total = sum(sizes.values())
        if total <= 0 or any(size <= 0 for size in sizes.values()):
            raise ValueError("every stratum needs at least one item")
        if any(c <= 0 for c in (costs or {}).values()):
            raise ValueError("costs must be positive")
        strata = {
            key: _Stratum(
                tally=StratumTally(size=size),
                weight=size / total,
                cost=(costs or {}).get(key, 1.0),
                items=(item_parameters or {}).get(key),
            )
            for key, size in sizes.items()
        }
        state = cls(config=config, strata=strata)
        state._refresh()
        return state

    @property
    def n_allocated(self) -> int:
        return sum(s.allocated for s in self.strata.values())

    @property
    def n_scored(self) -> int:
        return sum(s.tally.n for s in self.strata.values())

    def next_stratum(self) -> Hashable | None:
        """The stratum the next item should come from; None when no more may be drawn."""
        if self.n_allocated >= self.config.budget or (self.last and self.last.stop):
            return None
        best: Hashable | None = None
        best_gain = -1.0
        for key, s in self.strata.items():
            if s.allocated >= s.tally.size:
                continue
            if s.allocated < self.config.pilot:
                gain = math.inf
            else:
                gain = marginal_gain(s.weight, s.allocation_sd, s.allocated, s.cost)
            if gain > best_gain:
                best, best_gain = key, gain
        return best

    def allocated(self, key: Hashable) -> None:
        self.strata[key].allocated += 1

    def scored(
        self, key: Hashable, score: float, *, item: tuple[float, float] | None = None
    ) -> Decision | None:
        """Record ``score`` (in [0, 1]) for an item of stratum ``key``; ``item`` is its
        (a, b) for the ability estimate. Returns the decision when this was a check point
        or the last outstanding item, else None."""
        self.record(key, score, item=item)
        if self.last is not None and self.last.stop is not None:
            return None  # decided already; late scores only refine the final estimate
        n = self.n_scored
        exhausted = n == self.n_allocated and self.next_stratum() is None
        if self.config.schedule.is_check(n) or exhausted:
            return self.decision(final=exhausted)
        return None

    def record(
        self, key: Hashable, score: float, *, item: tuple[float, float] | None = None
    ) -> None:
        """Record a score without evaluating the stopping rule (a caller that rebuilds
        the state from stored scores, then checks once, uses this)."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"scores must be in [0, 1], got {score}")
        self.strata[key].tally.add(score)
        if item is not None:
            self.scored_items.append((item[0], item[1], score))
        if not self.pilot_done and self._pilot_scored():
            self.pilot_done = True
            self._refresh()
            if self.config.policy is Policy.NEYMAN:  # two-stage: the pilot's S_h, frozen
                for s in self.strata.values():
                    s.allocation_sd = s.pilot_sd

    def check_index(self) -> int:
        """How many check points the scored items have passed (0 before the first)."""
        schedule = self.config.schedule
        n = self.n_scored
        return 0 if n < schedule.start else (n - schedule.start) // schedule.every + 1

    def decision(self, *, final: bool = False) -> Decision:
        """The estimate and its half-width now; with ``final`` (every allocated item
        scored and no more to draw) the session stops for its budget, otherwise it stops
        when the half-width is at most the target (never for ``full``)."""
        self._refresh()
        tallies = {key: s.tally for key, s in self.strata.items()}
        sds = {key: s.estimate_sd for key, s in self.strata.items()}
        estimate = stratified_estimate(tallies, sds=sds)
        delta = self.config.schedule.delta_per_check(self.config.delta)
        width = halfwidth(self.config.bound, tallies, estimate, delta)
        stop: StopReason | None = None
        if final:
            stop = StopReason.BUDGET
        elif self.config.policy is not Policy.FULL and width <= self.config.target_halfwidth:
            stop = StopReason.PRECISE
        self.last = Decision(estimate, width, stop)
        return self.last

    def _pilot_scored(self) -> bool:
        return all(s.tally.n >= min(self.config.pilot, s.tally.size) for s in self.strata.values())

    def _refresh(self) -> None:
        """Update the ability estimate and every stratum's two standard deviations.

        Allocation: equal for ``uniform``/``proportional``/``full``; for ``neyman`` the
        pilot's, frozen once every stratum's pilot is scored (two-stage); for
        ``neyman-irt`` sqrt(p (1 - p)) of the stratum's predicted mean p at the current
        ability, which no stratum's own outcomes feed (an allocation that chases each
        stratum's observed mean starves strata that started badly and biases the
        estimate: -0.7 points on the MMLU-Pro replay). Estimate: the sample sd pooled
        with ``prior_weight`` pseudo-observations of the bounded sd of the shrunk mean,
        floored, so a stratum whose few scores agree does not claim zero variance."""
        cfg = self.config
        pooled = self._pooled_mean()
        if self.scored_items:
            a, b, y = (np.array(column) for column in zip(*self.scored_items, strict=True))
            self.theta = estimate_ability(y, ItemParameters(a, b))
        for s in self.strata.values():
            predicted = (
                float(np.mean(s.items.p_correct(self.theta))) if s.items is not None else pooled
            )
            mean = s.tally.mean if s.tally.n else predicted
            bounded = bounded_sd(
                mean,
                s.tally.n,
                prior_mean=predicted,
                prior_weight=cfg.prior_weight,
                floor=cfg.sd_floor,
            )
            sample_sd = math.sqrt(s.tally.variance) if s.tally.n >= 2 else 0.0
            s.estimate_sd = shrunk_sd(
                sample_sd,
                s.tally.n,
                prior_sd=bounded,
                prior_weight=cfg.prior_weight,
                floor=cfg.sd_floor,
            )
            if cfg.policy is Policy.NEYMAN_IRT:
                s.allocation_sd = bounded_sd(
                    predicted, 0, prior_mean=predicted, prior_weight=1.0, floor=cfg.sd_floor
                )
            s.pilot_sd = bounded
            # uniform, proportional, full: equal sds (1.0) give proportional allocation.

    def _pooled_mean(self) -> float:
        """The mean of all scores so far (0.5 before any)."""
        n = self.n_scored
        if n == 0:
            return 0.5
        return sum(s.tally.total for s in self.strata.values()) / n


def difficulty_bands(difficulty: Sequence[float] | NDArray[np.float64], bands: int) -> list[int]:
    """Band index (0 = easiest) of each item: equal-count bands of ``difficulty``."""
    values = np.asarray(difficulty, dtype=np.float64)
    if bands <= 1 or values.size == 0:
        return [0] * values.size
    edges = np.quantile(values, np.linspace(0, 1, bands + 1)[1:-1])
    return [int(i) for i in np.searchsorted(edges, values, side="right")]


def assign_strata(
    base: Sequence[Hashable],
    *,
    policy: Policy,
    bands: int,
    difficulty: Sequence[float | None] | None = None,
) -> list[Hashable]:
    """The policy's stratum of each item, given its base stratum (e.g. discipline × type).

    ``uniform`` puts every item in one stratum; ``neyman-irt`` splits each base stratum
    into ``bands`` equal-count difficulty bands of the items with a known difficulty,
    and puts the items without one (no history yet) in a band of their own, ``"new"``;
    the other policies keep the base strata."""
    if policy is Policy.UNIFORM:
        return ["all"] * len(base)
    if policy is not Policy.NEYMAN_IRT or difficulty is None:
        return list(base)
    members: dict[Hashable, list[int]] = {}
    for j, key in enumerate(base):
        if difficulty[j] is not None:
            members.setdefault(key, []).append(j)
    out: list[Hashable] = [(key, "new") for key in base]
    for key, idx in members.items():
        values = [float(difficulty[j]) for j in idx]  # type: ignore[arg-type]
        for j, band in zip(idx, difficulty_bands(values, bands), strict=True):
            out[j] = (key, band)
    return out
