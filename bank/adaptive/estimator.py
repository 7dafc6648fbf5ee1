"""The stratified mean and its variance with the finite-population correction.

Cochran (1977), eq. 5.1 and theorem 5.3: for strata h of N_h items with
weights W_h = N_h / N, n_h sampled without replacement, sample means ybar_h and sample
variances s_h^2 (ddof 1),

    y_st = sum_h W_h ybar_h,
    Var(y_st) = sum_h W_h^2 (1 - n_h / N_h) s_h^2 / n_h.

``sds`` may replace the sample standard deviations (the policy passes regularised ones,
so that a stratum whose two scores agree does not claim zero variance).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass


@dataclass(slots=True)
class StratumTally:
    """Running sums of one stratum's scores (each in the policy's range, e.g. [0, 1])."""

    size: int
    """N_h: items in the stratum's population."""
    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def add(self, score: float) -> None:
        self.n += 1
        self.total += score
        self.total_sq += score * score

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    @property
    def variance(self) -> float:
        """Sample variance (ddof 1); NaN below two observations."""
        if self.n < 2:
            return math.nan
        return max(self.total_sq - self.total * self.total / self.n, 0.0) / (self.n - 1)

    @property
    def fpc(self) -> float:
        """``1 - n_h / N_h``, the finite-population correction."""
        return 1.0 - self.n / self.size


@dataclass(frozen=True, slots=True)
class StratifiedEstimate:
    """``mean`` (y_st), ``variance`` (Var(y_st), with FPC) and the items behind them."""

    mean: float
    variance: float
    n: int

    @property
    def standard_error(self) -> float:
        return math.sqrt(self.variance)


def stratified_estimate(
    tallies: Mapping[Hashable, StratumTally],
    *,
    sds: Mapping[Hashable, float] | None = None,
) -> StratifiedEstimate:
    """y_st and its variance over ``tallies`` (every stratum of the population).

    Weights are N_h / sum N. A stratum without any scored item makes the estimate
    undefined: the mean is NaN (the policy's pilot observes every stratum first).
    ``sds[h]``, if given, replaces s_h; otherwise a stratum with a single item (s_h
    undefined) counts with s_h = 0.5, the largest sd of scores in [0, 1].
    """
    population = sum(t.size for t in tallies.values())
    if population <= 0:
        raise ValueError("the strata hold no items")
    totals: list[float] = []
    variance = 0.0
    n = 0
    for key, tally in tallies.items():
        w = tally.size / population
        n += tally.n
        if tally.n == 0:
            return StratifiedEstimate(math.nan, math.nan, n)
        sample_variance = tally.variance if tally.n >= 2 else 0.25
        s2 = sds[key] ** 2 if sds is not None else sample_variance
        totals.append(tally.size * tally.mean)
        variance += w * w * tally.fpc * s2 / tally.n
    # sum N_h ybar_h / N, not sum (N_h / N) ybar_h: the weights' rounding made an estimate of
    # all-correct strata 1.0000000000000002 (CI saw 100.00000000000003 points)
    mean = math.fsum(totals) / population
    return StratifiedEstimate(mean, variance, n)
