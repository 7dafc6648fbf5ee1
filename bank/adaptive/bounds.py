"""Confidence half-widths for means sampled without replacement, and when to stop.

Scores lie in ``[a, b]`` (the policy uses [0, 1]: a judged 0-3 score is divided by 3).
References: R. Bardenet and O.-A. Maillard, "Concentration inequalities for sampling
without replacement", Bernoulli 21(3), 2015 (B&M below); R. J. Serfling, Ann. Statist. 2,
1974.

* Hoeffding-Serfling — B&M corollary 2.5, two-sided, for one stratum:
  ``eps = (b - a) sqrt(rho_n ln(2/delta) / (2 n))`` with ``rho_n = 1 - (n-1)/N`` for
  ``n <= N/2`` and ``(1 - n/N)(1 + 1/n)`` above (:func:`serfling_rho`). It depends on n
  only, not on the data.
* :func:`bernstein_serfling` — B&M theorem 3.5 (empirical Bernstein-Serfling), two-sided:
  ``eps = s_n sqrt(2 rho_n ln(5/delta') / n) + kappa (b - a) ln(5/delta') / n`` with
  ``delta' = delta / 2`` and ``kappa = 7/3 + 3/sqrt(2)``. Adapts to a small variance, but
  its second term makes it wider than Hoeffding-Serfling below a few thousand items.
* :func:`stratified_hoeffding_serfling` — the stratified mean ``sum_h W_h ybar_h`` is a sum
  of independent per-stratum means; Serfling's bound is a bound on the moment generating
  function (B&M eq. 2.3), so the MGFs multiply and
  ``eps = (b - a) sqrt(ln(2/delta) / 2 * sum_h W_h^2 rho_h / n_h)``.
* :func:`stratified_bernstein_serfling` — one empirical Bernstein-Serfling interval per
  stratum at ``delta / H`` (union bound), combined as ``sum_h W_h eps_h``.
* :func:`normal_halfwidth` — ``z_{1 - delta/2} * standard error``: asymptotic only, but the
  one that follows the variance closely; its coverage is measured by the replay.

A stopping rule checks its interval again and again. :class:`CheckSchedule` checks every
``every`` scored items up to the budget and spends ``delta / K`` per interval (K the number
of scheduled checks plus one for the final report), so by the union bound the stated
confidence holds over all checks and the final interval at once, whichever check stops
the session.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from bank.adaptive.estimator import StratifiedEstimate, StratumTally

KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)
"""The constant of B&M theorem 3.5."""


class Bound(StrEnum):
    """Which interval a stopping rule uses."""

    HOEFFDING_SERFLING = "hoeffding-serfling"
    BERNSTEIN_SERFLING = "bernstein-serfling"
    NORMAL = "normal"


def serfling_rho(n: int, population: int) -> float:
    """B&M's finite-population factor rho_n (corollary 2.5)."""
    _check_sizes(n, population)
    if n <= population / 2:
        return 1.0 - (n - 1) / population
    return (1.0 - n / population) * (1.0 + 1.0 / n)


def bernstein_serfling(
    n: int, population: int, sample_sd: float, delta: float, *, value_range: float = 1.0
) -> float:
    """Two-sided empirical Bernstein-Serfling half-width (B&M theorem 3.5 at ``delta/2``
    per side); ``sample_sd`` is the ddof-0 standard deviation of the ``n`` values."""
    _check_delta(delta)
    rho = serfling_rho(n, population)
    log_term = math.log(5.0 / (delta / 2.0))
    return sample_sd * math.sqrt(2.0 * rho * log_term / n) + KAPPA * value_range * log_term / n


def stratified_hoeffding_serfling(
    tallies: Mapping[Hashable, StratumTally], delta: float, *, value_range: float = 1.0
) -> float:
    """Hoeffding-Serfling half-width of the stratified mean (MGFs of strata multiply)."""
    _check_delta(delta)
    population = sum(t.size for t in tallies.values())
    total = 0.0
    for tally in tallies.values():
        if tally.n == 0:
            return math.inf
        w = tally.size / population
        total += w * w * serfling_rho(tally.n, tally.size) / tally.n
    return value_range * math.sqrt(math.log(2.0 / delta) / 2.0 * total)


def stratified_bernstein_serfling(
    tallies: Mapping[Hashable, StratumTally], delta: float, *, value_range: float = 1.0
) -> float:
    """Empirical Bernstein-Serfling per stratum at ``delta / H``, summed with weights."""
    _check_delta(delta)
    population = sum(t.size for t in tallies.values())
    per_stratum = delta / len(tallies)
    total = 0.0
    for tally in tallies.values():
        if tally.n == 0:
            return math.inf
        sd0 = math.sqrt(max(tally.total_sq / tally.n - tally.mean**2, 0.0))
        eps = bernstein_serfling(tally.n, tally.size, sd0, per_stratum, value_range=value_range)
        total += tally.size / population * min(eps, value_range)
    return total


def normal_halfwidth(estimate: StratifiedEstimate, delta: float) -> float:
    """``z_{1-delta/2}`` times the estimate's standard error (asymptotic)."""
    _check_delta(delta)
    from scipy.stats import norm  # scipy.stats takes ~1 s to import: not at every CLI start

    return float(norm.ppf(1.0 - delta / 2.0)) * estimate.standard_error


def halfwidth(
    bound: Bound,
    tallies: Mapping[Hashable, StratumTally],
    estimate: StratifiedEstimate,
    delta: float,
    *,
    value_range: float = 1.0,
) -> float:
    """The half-width ``bound`` gives the stratified estimate at level ``delta``."""
    if bound is Bound.HOEFFDING_SERFLING:
        return stratified_hoeffding_serfling(tallies, delta, value_range=value_range)
    if bound is Bound.BERNSTEIN_SERFLING:
        return stratified_bernstein_serfling(tallies, delta, value_range=value_range)
    return normal_halfwidth(estimate, delta)


@dataclass(frozen=True, slots=True)
class CheckSchedule:
    """Check the stopping rule after every ``every`` scored items, from ``start`` up to
    ``budget``; each check spends ``delta / checks`` of the error probability."""

    budget: int
    every: int = 10
    start: int = 10

    def __post_init__(self) -> None:
        if self.budget < 1 or self.every < 1 or self.start < 1:
            raise ValueError("budget, every and start must be positive")

    @property
    def checks(self) -> int:
        """K: the check points up to the budget, plus one for the final interval reported
        when the session ends off the grid (budget or population spent, late scores in)."""
        grid = 0 if self.start > self.budget else (self.budget - self.start) // self.every + 1
        return grid + 1

    def is_check(self, n_scored: int) -> bool:
        return n_scored >= self.start and (n_scored - self.start) % self.every == 0

    def delta_per_check(self, delta: float) -> float:
        _check_delta(delta)
        return delta / self.checks


def _check_sizes(n: int, population: int) -> None:
    if not 1 <= n <= population:
        raise ValueError(f"need 1 <= n <= population, got n={n}, population={population}")


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
