"""The stratified mean and its variance with the finite-population correction."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.adaptive.estimator import StratumTally, stratified_estimate

unit_scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=0, max_size=60)


def _tally(size: int, scores: list[float] | np.ndarray) -> StratumTally:
    tally = StratumTally(size=size)
    for score in scores:
        tally.add(float(score))
    return tally


@given(scores=unit_scores)
def test_stratum_tally_mean_and_variance_match_numpy(scores: list[float]) -> None:
    """mean is the sample mean, variance the ddof-1 sample variance (NaN below 2 items)."""
    tally = _tally(100, scores)
    assert tally.n == len(scores)
    if not scores:
        assert math.isnan(tally.mean)
    else:
        assert tally.mean == pytest.approx(float(np.mean(scores)), abs=1e-12)
    if len(scores) < 2:
        assert math.isnan(tally.variance)
    else:
        assert tally.variance == pytest.approx(float(np.var(scores, ddof=1)), abs=1e-9)
        assert tally.variance >= 0.0


def test_stratum_tally_fpc() -> None:
    """fpc = 1 - n/N: 1 before any item, 0 when the stratum is exhausted."""
    tally = StratumTally(size=4)
    assert tally.fpc == 1.0
    for score in (0.0, 1.0, 1.0):
        tally.add(score)
    assert tally.fpc == pytest.approx(0.25)
    tally.add(0.5)
    assert tally.fpc == 0.0


def _cochran(
    populations: list[int], samples: list[np.ndarray], sds: list[float] | None = None
) -> tuple[float, float]:
    """Cochran eq. 5.1 and theorem 5.3, computed directly with numpy."""
    w = np.array(populations, dtype=float) / sum(populations)
    means = np.array([s.mean() for s in samples])
    s2 = np.array([s.var(ddof=1) for s in samples]) if sds is None else np.array(sds) ** 2
    n = np.array([s.size for s in samples], dtype=float)
    fpc = 1 - n / np.array(populations)
    return float(w @ means), float(np.sum(w**2 * fpc * s2 / n))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), h=st.integers(1, 6))
def test_stratified_estimate_matches_cochrans_formula(seed: int, h: int) -> None:
    """y_st = sum W_h ybar_h and Var = sum W_h^2 (1 - n_h/N_h) s_h^2 / n_h, W_h = N_h / N."""
    rng = np.random.default_rng(seed)
    sizes = [int(x) for x in rng.integers(2, 200, size=h)]
    samples = [rng.random(int(rng.integers(2, size + 1))) for size in sizes]
    tallies: dict[Hashable, StratumTally] = {
        f"s{i}": _tally(size, s) for i, (size, s) in enumerate(zip(sizes, samples, strict=True))
    }
    est = stratified_estimate(tallies)
    mean, variance = _cochran(sizes, samples)
    assert est.mean == pytest.approx(mean, abs=1e-12)
    assert est.variance == pytest.approx(variance, rel=1e-9, abs=1e-15)
    assert est.n == sum(s.size for s in samples)
    assert est.standard_error == pytest.approx(math.sqrt(variance), rel=1e-9, abs=1e-15)


def test_stratified_estimate_sds_override_replaces_the_sample_sds() -> None:
    """``sds[h]`` replaces s_h in the variance; the mean is unchanged."""
    a, b = np.array([0.0, 1.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0])
    tallies: dict[Hashable, StratumTally] = {"a": _tally(40, a), "b": _tally(10, b)}
    sds: dict[Hashable, float] = {"a": 0.6, "b": 0.2}
    est = stratified_estimate(tallies, sds=sds)
    mean, variance = _cochran([40, 10], [a, b], sds=[0.6, 0.2])
    assert est.mean == pytest.approx(mean)
    assert est.variance == pytest.approx(variance)
    # the all-ones stratum contributes nothing without the override:
    plain = stratified_estimate(tallies)
    assert plain.variance == pytest.approx(0.8**2 * (1 - 4 / 40) * a.var(ddof=1) / 4)
    assert plain.variance < est.variance


def test_stratified_estimate_single_item_stratum_counts_with_sd_one_half() -> None:
    """A stratum with one scored item has no s_h; it counts with s_h = 0.5 (s_h^2 = 0.25)."""
    tallies: dict[Hashable, StratumTally] = {"a": _tally(10, [1.0]), "b": _tally(10, [0.0, 1.0])}
    est = stratified_estimate(tallies)
    expected = 0.25 * (0.9 * 0.25 / 1) + 0.25 * (0.8 * 0.5 / 2)
    assert est.variance == pytest.approx(expected)
    assert est.mean == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)


def test_stratified_estimate_is_nan_when_a_stratum_has_no_item() -> None:
    """A stratum without a scored item makes mean and variance undefined (NaN)."""
    tallies: dict[Hashable, StratumTally] = {"a": _tally(10, [1.0, 0.0]), "b": _tally(5, [])}
    est = stratified_estimate(tallies)
    assert math.isnan(est.mean)
    assert math.isnan(est.variance)


def test_stratified_estimate_refuses_an_empty_population() -> None:
    """No items at all is an error, not a NaN."""
    with pytest.raises(ValueError):
        stratified_estimate({})
    with pytest.raises(ValueError):
        stratified_estimate({"a": StratumTally(size=0)})


def test_exhausted_strata_contribute_no_variance() -> None:
    """With n_h = N_h the stratum mean is the population mean: the FPC zeroes its term."""
    tallies: dict[Hashable, StratumTally] = {
        "a": _tally(3, [0.0, 1.0, 1.0]),
        "b": _tally(3, [0.0, 1.0]),
    }
    est = stratified_estimate(tallies)
    assert est.variance == pytest.approx(0.25 * (1 - 2 / 3) * 0.5 / 2)


POPULATIONS = [
    # two strata of 5 and 4 items, n = 2 and 3 (the design of the brief)
    ([[0.1, 0.4, 0.9, 1.0, 0.35], [0.0, 0.7, 0.2, 0.65]], [2, 3]),
    # 0/1 scores, three strata, one of them exhausted
    ([[1.0, 0.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.25, 0.5, 1.0, 0.0]], [3, 2, 4]),
    # a three-point population, unequal sizes
    ([[0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0, 1.0]], [4, 2]),
]


def _all_samples(strata: list[list[float]], n: list[int]) -> list[tuple[float, float]]:
    """(y_st, estimated variance) of every without-replacement stratified sample."""
    per_stratum = [list(itertools.combinations(pop, k)) for pop, k in zip(strata, n, strict=True)]
    out = []
    for combo in itertools.product(*per_stratum):
        tallies: dict[Hashable, StratumTally] = {
            i: _tally(len(pop), list(sample))
            for i, (pop, sample) in enumerate(zip(strata, combo, strict=True))
        }
        est = stratified_estimate(tallies)
        out.append((est.mean, est.variance))
    return out


@pytest.mark.parametrize(("strata", "n"), POPULATIONS)
def test_fpc_variance_is_unbiased_for_the_true_sampling_variance(
    strata: list[list[float]], n: list[int]
) -> None:
    """Exhaustive enumeration of every stratified without-replacement sample: y_st is
    unbiased for the population mean, and the mean of the estimated variances equals the
    true variance of y_st over all samples (to 1e-12)."""
    outcomes = np.array(_all_samples(strata, n))
    y_st, estimated = outcomes[:, 0], outcomes[:, 1]
    population_mean = sum(float(np.sum(p)) for p in strata) / sum(len(p) for p in strata)
    true_variance = float(np.mean((y_st - y_st.mean()) ** 2))
    assert y_st.mean() == pytest.approx(population_mean, abs=1e-12)
    assert float(estimated.mean()) == pytest.approx(true_variance, abs=1e-12)
    # ... and the true variance is Cochran's with the population S_h^2 (ddof 1):
    total = sum(len(p) for p in strata)
    theory = sum(
        (len(p) / total) ** 2 * (1 - k / len(p)) * np.var(p, ddof=1) / k
        for p, k in zip(strata, n, strict=True)
    )
    assert true_variance == pytest.approx(float(theory), abs=1e-12)


def test_enumeration_detects_a_variance_without_the_fpc() -> None:
    """The exhaustive check can fail: the same estimator without the finite-population
    correction overstates the true variance of the 5+4 design by far more than 1e-12."""
    strata, n = POPULATIONS[0]
    true_variance = float(np.var(np.array(_all_samples(strata, n))[:, 0]))
    weights = [len(p) / sum(len(q) for q in strata) for p in strata]
    no_fpc = [
        sum(w * w * float(np.var(s, ddof=1)) / len(s) for w, s in zip(weights, combo, strict=True))
        for combo in itertools.product(
            *[itertools.combinations(p, k) for p, k in zip(strata, n, strict=True)]
        )
    ]
    assert float(np.mean(no_fpc)) - true_variance > 1e-3


@given(sizes=st.lists(st.integers(1, 500), min_size=1, max_size=12))
def test_strata_all_right_or_all_wrong_estimate_exactly_one_or_zero(sizes: list[int]) -> None:
    """A weighted mean of equal stratum means is that mean exactly, not one ulp above (the
    estimate of a model right on every item is 100 points, never 100.00000000000003)."""
    for score in (0.0, 1.0):
        tallies: dict[Hashable, StratumTally] = {}
        for h, size in enumerate(sizes):
            tally = StratumTally(size=size)
            for _ in range(min(size, 3)):
                tally.add(score)
            tallies[h] = tally
        assert stratified_estimate(tallies).mean == score
