"""Half-widths for means sampled without replacement (Bardenet & Maillard 2015) and the
check schedule, against their formulas and against brute-force simulation."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.stats import norm

from bank.adaptive.bounds import (
    KAPPA,
    Bound,
    CheckSchedule,
    bernstein_serfling,
    halfwidth,
    normal_halfwidth,
    serfling_rho,
    stratified_bernstein_serfling,
    stratified_hoeffding_serfling,
)
from bank.adaptive.estimator import StratifiedEstimate, StratumTally, stratified_estimate
from bank.adaptive.policy import AdaptiveConfig, AdaptiveState, Policy

FloatArray = NDArray[np.float64]
REPS = 20_000


def _population(kind: str, size: int) -> FloatArray:
    """Adversarial populations in [0, 1]: 0/1 at p = 0.5 (largest variance), 0/1 at
    p = 0.05 (skewed, small variance) and a three-point population."""
    if kind == "bernoulli-0.5":
        return np.repeat([0.0, 1.0], [size - size // 2, size // 2])
    if kind == "bernoulli-0.05":
        ones = max(1, round(0.05 * size))
        return np.repeat([0.0, 1.0], [size - ones, ones])
    if kind == "three-point":
        return np.repeat([0.0, 0.5, 1.0], [size // 5, size - 2 * (size // 5), size // 5])
    raise AssertionError(kind)


def _prefixes(population: FloatArray, reps: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """Cumulative sums and sums of squares along ``reps`` random permutations: the first
    n columns of a permutation are a without-replacement sample of size n."""
    rng = np.random.default_rng(seed)
    perms = rng.permuted(np.tile(population, (reps, 1)), axis=1)
    return np.cumsum(perms, axis=1), np.cumsum(perms**2, axis=1)


def _tally(size: int, scores: list[float]) -> StratumTally:
    tally = StratumTally(size=size)
    for s in scores:
        tally.add(s)
    return tally


# --------------------------------------------------------------------------- formulas


def test_serfling_rho_uses_the_first_branch_up_to_half_the_population() -> None:
    """rho_n = 1 - (n-1)/N for n <= N/2 and (1 - n/N)(1 + 1/n) above (B&M cor. 2.5)."""
    assert serfling_rho(1, 10) == 1.0
    assert serfling_rho(5, 10) == pytest.approx(1 - 4 / 10)
    assert serfling_rho(6, 10) == pytest.approx((1 - 6 / 10) * (1 + 1 / 6))
    assert serfling_rho(10, 10) == 0.0
    assert serfling_rho(3, 7) == pytest.approx(1 - 2 / 7)  # 3 <= 3.5
    assert serfling_rho(4, 7) == pytest.approx((1 - 4 / 7) * (1 + 1 / 4))


@pytest.mark.parametrize(("n", "population"), [(0, 10), (11, 10), (-1, 5), (1, 0)])
def test_serfling_rho_refuses_sizes_outside_one_to_n(n: int, population: int) -> None:
    """n must satisfy 1 <= n <= N."""
    with pytest.raises(ValueError):
        serfling_rho(n, population)


def hoeffding_serfling(n: int, population: int, delta: float, *, value_range: float = 1.0) -> float:
    """Hoeffding-Serfling for the mean of ``n`` of ``population`` values: the stratified
    bound with one stratum (W = 1)."""
    tallies: dict[Hashable, StratumTally] = {"only": _tally(population, [0.5] * n)}
    return stratified_hoeffding_serfling(tallies, delta, value_range=value_range)


def test_hoeffding_serfling_formula() -> None:
    """eps = (b - a) sqrt(rho_n ln(2/delta) / (2n))."""
    assert hoeffding_serfling(25, 100, 0.05) == pytest.approx(
        math.sqrt((1 - 24 / 100) * math.log(40) / 50)
    )
    assert hoeffding_serfling(80, 100, 0.1, value_range=3.0) == pytest.approx(
        3 * math.sqrt(0.2 * 1.0125 * math.log(20) / 160)
    )


@pytest.mark.parametrize("population", [1, 2, 3, 7, 10, 101, 1000])
def test_hoeffding_serfling_decreases_in_n_and_is_zero_at_the_population(
    population: int,
) -> None:
    """More items never widen the interval, and the full population leaves no error."""
    widths = [hoeffding_serfling(n, population, 0.05) for n in range(1, population + 1)]
    assert all(b < a for a, b in itertools.pairwise(widths))
    assert widths[-1] == 0.0


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5])
def test_bounds_refuse_delta_outside_the_open_unit_interval(delta: float) -> None:
    """delta must lie in (0, 1) for every bound and for the schedule's split."""
    with pytest.raises(ValueError):
        hoeffding_serfling(5, 10, delta)
    with pytest.raises(ValueError):
        bernstein_serfling(5, 10, 0.3, delta)
    with pytest.raises(ValueError):
        normal_halfwidth(StratifiedEstimate(0.5, 0.01, 10), delta)
    with pytest.raises(ValueError):
        CheckSchedule(budget=100).delta_per_check(delta)


def test_bernstein_serfling_formula() -> None:
    """eps = s sqrt(2 rho ln(5/delta') / n) + kappa (b-a) ln(5/delta') / n, delta' = delta/2,
    kappa = 7/3 + 3/sqrt(2)."""
    assert math.isclose(KAPPA, 7 / 3 + 3 / math.sqrt(2))
    log_term = math.log(10 / 0.05)
    expected = 0.3 * math.sqrt(2 * (1 - 39 / 200) * log_term / 40) + KAPPA * log_term / 40
    assert bernstein_serfling(40, 200, 0.3, 0.05) == pytest.approx(expected)
    # zero sd leaves only the range term, which scales with the range
    assert bernstein_serfling(40, 200, 0.0, 0.05, value_range=2.0) == pytest.approx(
        2 * KAPPA * log_term / 40
    )


def test_normal_halfwidth_is_the_normal_quantile_times_the_standard_error() -> None:
    """z_{1 - delta/2} * SE, with z from scipy.stats.norm.ppf."""
    est = StratifiedEstimate(mean=0.6, variance=0.0004, n=300)
    for delta in (0.01, 0.05, 0.1, 0.5):
        assert normal_halfwidth(est, delta) == pytest.approx(
            float(norm.ppf(1 - delta / 2)) * 0.02, rel=1e-12
        )
    assert normal_halfwidth(est, 0.05) == pytest.approx(1.959964 * 0.02, rel=1e-6)


def test_halfwidth_dispatches_to_the_named_bound() -> None:
    """halfwidth(bound, ...) equals the corresponding function's value."""
    tallies: dict[Hashable, StratumTally] = {
        "a": _tally(50, [1, 0, 1, 1, 0, 1]),
        "b": _tally(30, [0, 0, 1, 0]),
    }
    est = stratified_estimate(tallies)
    assert halfwidth(Bound.HOEFFDING_SERFLING, tallies, est, 0.1) == pytest.approx(
        stratified_hoeffding_serfling(tallies, 0.1)
    )
    assert halfwidth(Bound.BERNSTEIN_SERFLING, tallies, est, 0.1) == pytest.approx(
        stratified_bernstein_serfling(tallies, 0.1)
    )
    assert halfwidth(Bound.NORMAL, tallies, est, 0.1) == pytest.approx(normal_halfwidth(est, 0.1))


@pytest.mark.parametrize(("n", "population"), [(1, 10), (5, 10), (6, 10), (99, 100), (7, 7)])
def test_stratified_hoeffding_serfling_with_one_stratum_is_the_plain_bound(
    n: int, population: int
) -> None:
    """One stratum (W = 1): the stratified half-width is B&M corollary 2.5,
    ``sqrt(rho_n ln(2/delta) / (2n))``."""
    tallies: dict[Hashable, StratumTally] = {"only": _tally(population, [0.5] * n)}
    assert stratified_hoeffding_serfling(tallies, 0.05) == pytest.approx(
        math.sqrt(serfling_rho(n, population) * math.log(2 / 0.05) / (2 * n))
    )


def test_stratified_hoeffding_serfling_formula_for_two_strata() -> None:
    """eps = (b-a) sqrt(ln(2/delta)/2 * sum W_h^2 rho_h / n_h)."""
    tallies: dict[Hashable, StratumTally] = {
        "a": _tally(60, [1.0] * 10),
        "b": _tally(40, [0.0] * 30),
    }
    expected = math.sqrt(
        math.log(2 / 0.05)
        / 2
        * (0.36 * serfling_rho(10, 60) / 10 + 0.16 * serfling_rho(30, 40) / 30)
    )
    assert stratified_hoeffding_serfling(tallies, 0.05) == pytest.approx(expected)
    assert stratified_hoeffding_serfling(tallies, 0.05, value_range=3.0) == pytest.approx(
        3 * expected
    )


def test_stratified_bernstein_serfling_splits_delta_and_caps_each_stratum() -> None:
    """One Bernstein-Serfling interval per stratum at delta/H with the ddof-0 sd, capped
    at the range, summed with weights W_h."""
    a = [1.0, 0.0, 1.0, 1.0] * 25  # n = 100 of 400
    b = [0.0, 1.0]  # n = 2: the Bernstein term exceeds the range
    tallies: dict[Hashable, StratumTally] = {"a": _tally(400, a), "b": _tally(100, b)}
    eps_a = bernstein_serfling(100, 400, float(np.std(a)), 0.05 / 2)
    assert eps_a < 1.0
    assert bernstein_serfling(2, 100, 0.5, 0.05 / 2) > 1.0
    expected = 0.8 * eps_a + 0.2 * 1.0
    assert stratified_bernstein_serfling(tallies, 0.05) == pytest.approx(expected)
    single: dict[Hashable, StratumTally] = {"only": _tally(400, a)}
    assert stratified_bernstein_serfling(single, 0.05) == pytest.approx(
        bernstein_serfling(100, 400, float(np.std(a)), 0.05)
    )


def test_stratified_bounds_are_infinite_with_an_empty_stratum() -> None:
    """No item in a stratum: nothing is known about its mean."""
    tallies: dict[Hashable, StratumTally] = {"a": _tally(10, [1.0, 0.0]), "b": _tally(10, [])}
    assert stratified_hoeffding_serfling(tallies, 0.05) == math.inf
    assert stratified_bernstein_serfling(tallies, 0.05) == math.inf


# --------------------------------------------------------------------------- simulation

SAMPLE_SIZES = [2, 5, 10, 25, 50, 51, 75, 90, 99]


@pytest.mark.parametrize("kind", ["bernoulli-0.5", "bernoulli-0.05", "three-point"])
@pytest.mark.parametrize("delta", [0.1, 0.05])
def test_single_stratum_bounds_cover_at_least_one_minus_delta(kind: str, delta: float) -> None:
    """Brute force: over 20,000 without-replacement samples from a population of 100 and
    every sample size (both branches of rho_n), the share of samples with
    |mean - mu| > eps is at most delta, for Hoeffding-Serfling and Bernstein-Serfling."""
    population = _population(kind, 100)
    mu = float(population.mean())
    sums, squares = _prefixes(population, REPS, seed=7)
    for n in SAMPLE_SIZES:
        means = sums[:, n - 1] / n
        sd0 = np.sqrt(np.maximum(squares[:, n - 1] / n - means**2, 0.0))
        errors = np.abs(means - mu)
        hs = hoeffding_serfling(n, 100, delta)
        assert float(np.mean(errors > hs)) <= delta, (kind, n, "HS")
        bs = np.array([bernstein_serfling(n, 100, float(s), delta) for s in np.unique(sd0)])
        eps = bs[np.searchsorted(np.unique(sd0), sd0)]
        assert float(np.mean(errors > eps)) <= delta, (kind, n, "BS")


def test_hoeffding_serfling_is_not_absurdly_loose() -> None:
    """At delta = 0.5 on the 0/1 p = 0.5 population, the HS interval misses in about 9%
    of samples (a ratio of ~0.2 to delta), not never; half its width misses more than
    delta = 0.05 allows, so the simulation above can detect an invalid bound."""
    population = _population("bernoulli-0.5", 100)
    sums, _ = _prefixes(population, REPS, seed=11)
    for n in (10, 25, 40):
        errors = np.abs(sums[:, n - 1] / n - 0.5)
        miss = float(np.mean(errors > hoeffding_serfling(n, 100, 0.5)))
        assert 0.03 < miss < 0.5, (n, miss)
        half = float(np.mean(errors > hoeffding_serfling(n, 100, 0.05) / 2))
        assert half > 0.05, (n, half)


@pytest.mark.parametrize("delta", [0.1, 0.05])
def test_stratified_bounds_cover_a_two_stratum_design(delta: float) -> None:
    """Two strata (60 items of 0/1 at p = 0.5, 40 three-point items): over 20,000
    stratified samples per design, y_st misses mu by more than the stratified HS or
    Bernstein-Serfling half-width in at most a delta share of samples."""
    pop_a, pop_b = _population("bernoulli-0.5", 60), _population("three-point", 40)
    w_a, w_b = 0.6, 0.4
    mu = w_a * float(pop_a.mean()) + w_b * float(pop_b.mean())
    sums_a, sq_a = _prefixes(pop_a, REPS, seed=3)
    sums_b, sq_b = _prefixes(pop_b, REPS, seed=4)
    for n_a, n_b in [(2, 2), (5, 5), (20, 10), (40, 30), (55, 35)]:
        mean_a, mean_b = sums_a[:, n_a - 1] / n_a, sums_b[:, n_b - 1] / n_b
        errors = np.abs(w_a * mean_a + w_b * mean_b - mu)
        hs = stratified_hoeffding_serfling(
            {"a": _tally(60, [0.5] * n_a), "b": _tally(40, [0.5] * n_b)}, delta
        )
        assert float(np.mean(errors > hs)) <= delta, (n_a, n_b, "HS")
        # Bernstein-Serfling, as the function computes it, per sample (vectorised):
        eps = np.zeros(REPS)
        for w, n, size, mean, sq in (
            (w_a, n_a, 60, mean_a, sq_a[:, n_a - 1]),
            (w_b, n_b, 40, mean_b, sq_b[:, n_b - 1]),
        ):
            sd0 = np.sqrt(np.maximum(sq / n - mean**2, 0.0))
            levels = np.unique(sd0)
            per = np.array(
                [min(bernstein_serfling(n, size, float(s), delta / 2), 1.0) for s in levels]
            )
            eps += w * per[np.searchsorted(levels, sd0)]
        assert float(np.mean(errors > eps)) <= delta, (n_a, n_b, "BS")
    # the vectorised sum is the function's value on one concrete sample
    sample_a, sample_b = [1.0, 0.0, 1.0, 1.0, 0.0], [0.5, 0.5, 1.0, 0.0, 0.5]
    tallies: dict[Hashable, StratumTally] = {"a": _tally(60, sample_a), "b": _tally(40, sample_b)}
    direct = sum(
        w * min(bernstein_serfling(5, size, float(np.std(s)), delta / 2), 1.0)
        for w, size, s in ((w_a, 60, sample_a), (w_b, 40, sample_b))
    )
    assert stratified_bernstein_serfling(tallies, delta) == pytest.approx(direct)


# --------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize(
    ("budget", "every", "start", "checks"),
    [
        (100, 10, 10, 11),
        (105, 10, 10, 11),
        (109, 10, 10, 11),
        (110, 10, 10, 12),
        (5, 10, 10, 1),
        (30, 7, 2, 6),
        (1, 1, 1, 2),
    ],
)
def test_check_schedule_counts_its_checks(budget: int, every: int, start: int, checks: int) -> None:
    """K = the (budget - start) // every + 1 check points up to the budget (none if start >
    budget) plus one for the final interval; is_check is true exactly at start, start +
    every, ... (K - 1 of them up to the budget)."""
    schedule = CheckSchedule(budget=budget, every=every, start=start)
    assert schedule.checks == checks
    points = [n for n in range(1, budget + 1) if schedule.is_check(n)]
    assert points == list(range(start, budget + 1, every))
    if start <= budget:
        assert len(points) == checks - 1
    assert schedule.delta_per_check(0.05) == pytest.approx(0.05 / checks)


@pytest.mark.parametrize(("budget", "every", "start"), [(0, 10, 10), (10, 0, 10), (10, 10, 0)])
def test_check_schedule_refuses_non_positive_parameters(
    budget: int, every: int, start: int
) -> None:
    """budget, every and start must be positive."""
    with pytest.raises(ValueError):
        CheckSchedule(budget=budget, every=every, start=start)


def test_sequential_hoeffding_serfling_holds_over_every_check_at_once() -> None:
    """The union bound: along 20,000 without-replacement sequences from a 0/1 p = 0.5
    population of 300, with a check every 10 items up to a budget of 200 (K = 20 + 1) at
    delta/K each, the share of sequences in which ANY check's HS interval misses mu is
    at most delta (measured: about 0.004 at delta = 0.1). Misses do occur and the joint
    miss rate exceeds every single check's, so the multiplicity the split pays for is real."""
    population = _population("bernoulli-0.5", 300)
    schedule = CheckSchedule(budget=200, every=10, start=10)
    assert schedule.checks == 21
    sums, _ = _prefixes(population, REPS, seed=5)
    points = [n for n in range(1, 201) if schedule.is_check(n)]
    for delta in (0.1, 0.05):
        per_check = schedule.delta_per_check(delta)
        any_miss = np.zeros(REPS, dtype=bool)
        single: list[float] = []
        for n in points:
            errors = np.abs(sums[:, n - 1] / n - 0.5)
            miss = errors > hoeffding_serfling(n, 300, per_check)
            single.append(float(miss.mean()))
            any_miss |= miss
        assert 0.0 < float(any_miss.mean()) <= delta
        assert float(any_miss.mean()) >= 2 * max(single)


Session = list[tuple[dict[str, int], float, float]]


def _policy_sessions(
    bound: Bound, sessions: int, delta: float, seed: int
) -> tuple[list[Session], float]:
    """Run ``full`` sessions (no early stop) of the policy on a two-stratum population;
    every decision's (items per stratum, estimate, half-width)."""
    rng = np.random.default_rng(seed)
    pops = {"a": _population("bernoulli-0.5", 120), "b": _population("bernoulli-0.05", 80)}
    mu = (120 * float(pops["a"].mean()) + 80 * float(pops["b"].mean())) / 200
    config = AdaptiveConfig(
        policy=Policy.FULL, budget=100, check_every=10, bound=bound, delta=delta, pilot=2
    )
    out = []
    for _ in range(sessions):
        queues = {k: list(rng.permutation(v)) for k, v in pops.items()}
        state = AdaptiveState.start(config, {k: len(v) for k, v in pops.items()})
        decisions: Session = []
        while (key := state.next_stratum()) is not None:
            state.allocated(key)
            decision = state.scored(key, float(queues[str(key)].pop()))
            if decision is not None:
                counts = {str(k): s.tally.n for k, s in state.strata.items()}
                decisions.append((counts, decision.estimate.mean, decision.halfwidth))
        out.append(decisions)
    return out, mu


def test_policy_sequential_checks_hold_jointly_for_hoeffding_serfling() -> None:
    """Through AdaptiveState itself (``full``, two strata of 120 and 80, a check every
    10 items up to 100, so K = 10 + 1): each check's half-width is the stratified HS at
    delta/K; over 300 sessions the share in which any check's interval misses mu is at
    most delta; the normal intervals at the same checks are narrower."""
    delta = 0.1
    hs_runs, mu = _policy_sessions(Bound.HOEFFDING_SERFLING, 300, delta, seed=1)
    normal_runs, _ = _policy_sessions(Bound.NORMAL, 300, delta, seed=1)
    per_check = CheckSchedule(budget=100, every=10, start=10).delta_per_check(delta)
    assert per_check == pytest.approx(delta / 11)
    for run in hs_runs:
        assert [sum(counts.values()) for counts, _, _ in run] == list(range(10, 101, 10))
        for counts, _, width in run:
            tallies: dict[Hashable, StratumTally] = {
                k: _tally(size, [0.5] * counts[k]) for k, size in (("a", 120), ("b", 80))
            }
            assert width == pytest.approx(stratified_hoeffding_serfling(tallies, per_check))
    missed = [any(abs(m - mu) > w for _, m, w in run) for run in hs_runs]
    assert float(np.mean(missed)) <= delta
    for hs_run, normal_run in zip(hs_runs, normal_runs, strict=True):
        for (counts, m_hs, w_hs), (counts2, m_n, w_n) in zip(hs_run, normal_run, strict=True):
            assert counts == counts2 and m_hs == m_n  # same seed, same draws
            assert w_n < w_hs
