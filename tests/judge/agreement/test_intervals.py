"""Kappa with bootstrap intervals and its change between rounds (judge.agreement.intervals,
judge.agreement.round_change, on judge.agreement.resampling).

Point estimates are pinned to ``sklearn.metrics.cohen_kappa_score``, the standard error to
the large-sample variance of Fleiss, Cohen & Everitt (1969) written out here, and the
intervals by their coverage of a known population kappa over simulated raters.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.metrics import cohen_kappa_score
from threadpoolctl import threadpool_limits

from judge.agreement import (
    CalibrationRound,
    KappaInterval,
    ScorePair,
    grouped_kappa_intervals,
    kappa_change,
    kappa_interval,
    kappa_intervals,
)

LABELS = [0, 1, 2, 3]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@contextmanager
def no_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def sk_kappa(a: Any, b: Any, weights: Any = None) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns where it returns NaN
        return float(cohen_kappa_score(a, b, labels=LABELS, weights=weights))


def noisy_rater(gen: np.random.Generator, n: int, agree: float) -> tuple[IntArray, IntArray]:
    """Reference scores and a rater that copies them with probability ``agree``, else
    scores at random."""
    reference = gen.integers(0, 4, size=n)
    rater = np.where(gen.random(n) < agree, reference, gen.integers(0, 4, size=n))
    return reference, rater


# --- the population the coverage is measured on -------------------------------------


def confusion_kernel(p_right: float, spread: float) -> FloatArray:
    """P(rater score | reference score): right with ``p_right``, else off by ``d`` points
    with weight ``exp(-spread * d)``."""
    kernel = np.zeros((4, 4))
    for i in range(4):
        off = np.array([0.0 if j == i else math.exp(-spread * abs(i - j)) for j in range(4)])
        kernel[i] = off / off.sum() * (1 - p_right)
        kernel[i, i] = p_right
    return kernel


# Item families of three kinds: easy items the judge nearly always gets right, mixed ones
# and hard ones where it often errs. A family's answers share its kind, so the judge's
# errors are correlated within families.
FAMILY_SHARES = np.array([0.4, 0.35, 0.25])
FAMILY_JOINTS = np.array(
    [
        np.diag([0.05, 0.1, 0.25, 0.6]) @ confusion_kernel(0.95, 1.5),
        np.diag([0.3, 0.3, 0.25, 0.15]) @ confusion_kernel(0.8, 1.0),
        np.diag([0.4, 0.3, 0.2, 0.1]) @ confusion_kernel(0.5, 0.5),
    ]
).reshape(3, 16)
POPULATION = FAMILY_SHARES @ FAMILY_JOINTS


def population_kappa(joint: FloatArray, weights: Any) -> float:
    """Kappa of a joint distribution of (reference, rater) scores: ``1 - sum(w P) /
    sum(w p_row p_col)``."""
    p = joint.reshape(4, 4)
    i, j = np.indices((4, 4))
    w = (i != j).astype(float) if weights is None else (i - j) ** 2.0
    expected = p.sum(axis=1)[:, None] * p.sum(axis=0)[None, :]
    return float(1 - (w * p).sum() / (w * expected).sum())


def draw_answers(
    gen: np.random.Generator, clustered: bool, n_families: int = 50, size: int = 4
) -> tuple[IntArray, IntArray, IntArray]:
    """Reference and rater scores of ``n_families * size`` answers from the population;
    clustered: every family draws its kind once, else every answer on its own."""
    if clustered:
        kinds = np.repeat(gen.choice(3, size=n_families, p=FAMILY_SHARES), size)
    else:
        kinds = gen.choice(3, size=n_families * size, p=FAMILY_SHARES)
    cdf = np.cumsum(FAMILY_JOINTS[kinds], axis=1)
    cells = np.minimum((gen.random(kinds.size)[:, None] > cdf).sum(axis=1), 15)
    return cells // 4, cells % 4, np.repeat(np.arange(n_families), size)


# --- point estimates and standard errors -------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weights", [None, "quadratic", "linear"])
def test_estimate_is_sklearn_kappa(seed: int, weights: Any) -> None:
    gen = np.random.default_rng(seed)
    reference, rater = noisy_rater(gen, int(gen.integers(5, 400)), float(gen.random()))
    result = kappa_interval(reference, rater, weights=weights, n_resamples=200)
    assert result.estimate == pytest.approx(sk_kappa(reference, rater, weights), abs=1e-12)
    assert result.n == reference.size == result.n_clusters
    assert result.low <= result.estimate <= result.high


def test_both_kinds_are_sklearn_kappa() -> None:
    reference, rater = noisy_rater(np.random.default_rng(1), 300, 0.6)
    both = kappa_intervals(reference, rater, n_resamples=200)
    assert both.plain.estimate == pytest.approx(sk_kappa(reference, rater), abs=1e-12)
    assert both.weighted.estimate == pytest.approx(
        sk_kappa(reference, rater, "quadratic"), abs=1e-12
    )
    assert (both.plain.weights, both.weighted.weights) == (None, "quadratic")


def fleiss_cohen_everitt_se(reference: IntArray, rater: IntArray, weights: Any) -> float:
    """Large-sample standard error of (weighted) kappa, Fleiss, Cohen & Everitt (1969),
    with agreement weights ``1 - d(i, j) / max d``."""
    p = np.zeros((4, 4))
    np.add.at(p, (reference, rater), 1.0)
    n = p.sum()
    p /= n
    i, j = np.indices((4, 4))
    d = (i != j).astype(float) if weights is None else (i - j) ** 2.0
    w = 1 - d / d.max()
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o, p_e = (w * p).sum(), (w * np.outer(rows, cols)).sum()
    kappa = (p_o - p_e) / (1 - p_e)
    w_row = w @ cols  # mean weight of row i over the rater's margin
    w_col = rows @ w  # mean weight of column j over the reference's margin
    terms = p * (w - (w_row[:, None] + w_col[None, :]) * (1 - kappa)) ** 2
    variance = (terms.sum() - (kappa - p_e * (1 - kappa)) ** 2) / (n * (1 - p_e) ** 2)
    return float(math.sqrt(variance))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_standard_error_is_fleiss_cohen_everitt(seed: int, weights: Any) -> None:
    gen = np.random.default_rng(100 + seed)
    reference, rater = noisy_rater(gen, 250, 0.5 + 0.1 * seed)
    result = kappa_interval(reference, rater, weights=weights, n_resamples=10)
    expected = fleiss_cohen_everitt_se(reference, rater, weights)
    assert result.standard_error == pytest.approx(expected, rel=1e-9)


def test_duplicated_answers_in_one_cluster_give_the_original_interval() -> None:
    """An answer repeated m times inside its own cluster adds no information: the cluster
    bootstrap gives exactly the interval of the original answers (the same draws, kappa is
    unchanged by scaling the table) and the same standard error, while treating the copies
    as independent answers narrows the interval by about sqrt(m)."""
    reference, rater = noisy_rater(np.random.default_rng(7), 150, 0.6)
    copies = 4
    original = kappa_intervals(reference, rater, rng=5)
    clustered = kappa_intervals(
        np.repeat(reference, copies),
        np.repeat(rater, copies),
        clusters=np.repeat(np.arange(reference.size), copies).tolist(),
        rng=5,
    )
    naive = kappa_intervals(np.repeat(reference, copies), np.repeat(rater, copies), rng=5)
    for kind in ("plain", "weighted"):
        base, grouped, ignored = (getattr(r, kind) for r in (original, clustered, naive))
        assert grouped.n == copies * base.n and grouped.n_clusters == base.n
        assert grouped.estimate == pytest.approx(base.estimate, abs=1e-12)
        assert grouped.standard_error == pytest.approx(base.standard_error, rel=1e-9)
        assert (grouped.low, grouped.high) == pytest.approx((base.low, base.high), abs=1e-9)
        ratio = (base.high - base.low) / (ignored.high - ignored.low)
        assert ratio == pytest.approx(math.sqrt(copies), rel=0.15)


def test_clustering_widens_the_interval_when_errors_are_correlated() -> None:
    """The judge errs on whole families (hard families wrong, easy ones right): resampling
    families gives a wider interval than resampling answers."""
    gen = np.random.default_rng(11)
    n_families, size = 60, 5
    reference = gen.integers(0, 4, size=n_families * size)
    family_wrong = np.repeat(gen.random(n_families) < 0.35, size)
    rater = np.where(
        family_wrong, (reference + gen.integers(1, 4, size=reference.size)) % 4, reference
    )
    families = np.repeat(np.arange(n_families), size).tolist()
    clustered = kappa_intervals(reference, rater, clusters=families)
    independent = kappa_intervals(reference, rater)
    for kind in ("plain", "weighted"):
        wide, narrow = getattr(clustered, kind), getattr(independent, kind)
        assert wide.estimate == narrow.estimate
        assert wide.high - wide.low > 1.5 * (narrow.high - narrow.low)
        assert wide.standard_error > 1.5 * narrow.standard_error


# --- coverage ----------------------------------------------------------------------------


@pytest.mark.parametrize("clustered", [False, True], ids=["answers", "families"])
def test_coverage_of_the_population_kappa(clustered: bool) -> None:
    """Over 300 samples of 200 answers (50 families of 4) from a population with known
    kappa, the 95% interval covers the population kappa in at least 93% of samples, plain
    and weighted. ``families``: the judge's errors are correlated within families and the
    bootstrap resamples families; ``answers``: independent answers, resampled one by one."""
    gen = np.random.default_rng(2024)
    truth = {kind: population_kappa(POPULATION, kind) for kind in (None, "quadratic")}
    covered = {"plain": 0, "weighted": 0}
    n_samples = 300
    # Hundreds of small products in a row: OpenBLAS's threads only add wake-up latency
    # (several times slower on a busy two-core machine).
    with threadpool_limits(1, user_api="blas"):
        for _ in range(n_samples):
            reference, rater, families = draw_answers(gen, clustered)
            result = kappa_intervals(
                reference, rater, clusters=families.tolist() if clustered else None, rng=gen
            )
            plain, weighted = result.plain, result.weighted
            covered["plain"] += plain.low <= truth[None] <= plain.high
            covered["weighted"] += weighted.low <= truth["quadratic"] <= weighted.high
    for kind, hits in covered.items():
        assert hits / n_samples >= 0.93, (kind, hits / n_samples)


# --- degenerate and invalid input ----------------------------------------------------


def assert_all_nan(result: KappaInterval) -> None:
    assert math.isnan(result.estimate) and math.isnan(result.low) and math.isnan(result.high)
    assert math.isnan(result.standard_error)


def test_degenerate_cases_are_nan_not_errors() -> None:
    with no_warnings():
        empty = kappa_intervals([], [])
        constant = kappa_intervals([2] * 30, [2] * 30, clusters=[i % 5 for i in range(30)])
        one_cluster = kappa_interval([0, 1, 2, 3, 3], [0, 1, 2, 2, 3], clusters=["f"] * 5)
        perfect = kappa_interval([0, 1, 2, 3] * 10, [0, 1, 2, 3] * 10)
        near_perfect = kappa_intervals([0, 1, 2, 3] * 5, [0, 1, 2, 3] * 4 + [0, 1, 2, 2])
    for result in (empty.plain, empty.weighted, constant.plain, constant.weighted):
        assert_all_nan(result)
    assert (empty.plain.n, empty.plain.n_clusters) == (0, 0)
    assert (constant.plain.n, constant.plain.n_clusters) == (30, 5)
    assert one_cluster.estimate == pytest.approx(sk_kappa([0, 1, 2, 3, 3], [0, 1, 2, 2, 3]))
    assert math.isnan(one_cluster.low) and math.isnan(one_cluster.high)
    assert (perfect.estimate, perfect.low, perfect.high, perfect.standard_error) == (1, 1, 1, 0)
    for result in (near_perfect.plain, near_perfect.weighted):
        assert -1 <= result.low < result.estimate < result.high <= 1


def test_to_json_turns_nan_into_none() -> None:
    assert kappa_interval([], []).to_json() == {
        "estimate": None,
        "low": None,
        "high": None,
        "standard_error": None,
        "n": 0,
        "n_clusters": 0,
        "confidence_level": 0.95,
        "weights": None,
        "n_resamples": 2000,
    }
    both = kappa_intervals([0, 1, 2, 3, 1], [0, 1, 2, 3, 2], n_resamples=50).to_json()
    assert both["weighted"]["weights"] == "quadratic"
    assert isinstance(both["plain"]["low"], float)


@pytest.mark.parametrize(
    ("reference", "rater", "options"),
    [
        ([0, 1, 4], [0, 1, 2], {}),
        ([0, 1, 2], [0, 1, -1], {}),
        ([0, 1, 2], [0, 1, 2.0], {}),
        ([0, True, 2], [0, 1, 2], {}),
        ([0, 1, 2], [0, 1], {}),
        ([0, 1, 2], [0, 1, 2], {"clusters": ["a", "b"]}),
        ([0, 1, 2], [0, 1, 2], {"weights": "cubic"}),
        ([0, 1, 2], [0, 1, 2], {"n_resamples": 0}),
        ([0, 1, 2], [0, 1, 2], {"confidence_level": 1.0}),
    ],
)
def test_invalid_input_raises(reference: Any, rater: Any, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        kappa_interval(reference, rater, **options)


def test_same_seed_same_interval_and_level_widens() -> None:
    reference, rater = noisy_rater(np.random.default_rng(3), 200, 0.7)
    first = kappa_interval(reference, rater, rng=9)
    assert kappa_interval(reference, rater, rng=9) == first
    wider = kappa_interval(reference, rater, rng=9, confidence_level=0.99)
    assert wider.low < first.low and wider.high > first.high


def test_thousands_of_answers_are_fast() -> None:
    import time

    reference, rater = noisy_rater(np.random.default_rng(4), 5000, 0.7)
    families = (np.arange(5000) // 5).tolist()
    start = time.perf_counter()
    kappa_intervals(reference, rater)
    kappa_intervals(reference, rater, clusters=families)
    assert time.perf_counter() - start < 2.0  # typically ~0.1 s; generous for loaded CI


# --- groups -----------------------------------------------------------------------------


def test_grouped_intervals_are_the_groups_kappa() -> None:
    gen = np.random.default_rng(5)
    records = []
    judges = []
    for judge, agree in (("judge-b", 0.9), ("judge-a", 0.5)):
        reference, rater = noisy_rater(gen, 120, agree)
        records += [
            ScorePair(int(r), int(s), cluster=i // 3)
            for i, (r, s) in enumerate(zip(reference, rater, strict=True))
        ]
        judges += [judge] * reference.size
    by_key = grouped_kappa_intervals(records, judges, n_resamples=300)
    assert list(by_key) == ["judge-a", "judge-b"]
    for judge, result in by_key.items():
        mine = [r for r, j in zip(records, judges, strict=True) if j == judge]
        ref, rat = [r.reference for r in mine], [r.rater for r in mine]
        assert result.plain.estimate == pytest.approx(sk_kappa(ref, rat), abs=1e-12)
        assert result.weighted.estimate == pytest.approx(sk_kappa(ref, rat, "quadratic"), abs=1e-12)
        assert result.plain.n_clusters == 40
    assert by_key["judge-b"].plain.estimate > by_key["judge-a"].plain.estimate
    keyed = dict(zip(map(id, records), judges, strict=True))
    assert grouped_kappa_intervals(records, lambda r: keyed[id(r)], n_resamples=300) == by_key


def test_answers_without_a_cluster_id_are_their_own_cluster() -> None:
    reference, rater = noisy_rater(np.random.default_rng(12), 90, 0.6)
    alone = kappa_intervals(reference, rater, rng=3)
    assert kappa_intervals(reference, rater, clusters=[None] * 90, rng=3) == alone
    mixed = kappa_intervals(reference, rater, clusters=[None] * 60 + ["f"] * 30, n_resamples=50)
    assert mixed.plain.n_clusters == 61


def test_grouped_records_without_cluster_are_their_own() -> None:
    records = [ScorePair(s % 4, (s * 7) % 4) for s in range(40)]
    result = grouped_kappa_intervals(records, ["all"] * 40, n_resamples=100)
    assert result["all"].plain.n_clusters == 40
    with pytest.raises(ValueError):
        grouped_kappa_intervals(records, ["all"] * 39)


# --- change between rounds ---------------------------------------------------------------


def test_paired_change_of_identical_rounds_is_exactly_zero() -> None:
    reference, rater = noisy_rater(np.random.default_rng(6), 200, 0.7)
    ids = [f"answer-{i}" for i in range(200)]
    order = np.random.default_rng(0).permutation(200)
    round_a = CalibrationRound(reference, rater, answer_ids=ids)
    round_b = CalibrationRound(reference[order], rater[order], answer_ids=[ids[i] for i in order])
    changes = kappa_change(round_a, round_b)
    for change in (changes.plain, changes.weighted):
        assert change.paired
        assert change.kappa_a == change.kappa_b
        assert (change.change, change.low, change.high, change.standard_error) == (0, 0, 0, 0)


def test_change_estimates_and_pairing() -> None:
    gen = np.random.default_rng(8)
    reference = gen.integers(0, 4, size=300)
    worse = np.where(gen.random(300) < 0.6, reference, gen.integers(0, 4, size=300))
    # Round b: the judge fixed some of its errors (the answers it got right stay right).
    better = np.where(gen.random(300) < 0.5, reference, worse)
    ids = list(range(300))
    paired = kappa_change(
        CalibrationRound(reference, worse, answer_ids=ids),
        CalibrationRound(reference, better, answer_ids=ids),
    )
    independent = kappa_change(
        CalibrationRound(reference, worse), CalibrationRound(reference, better)
    )
    for kind, weights in (("plain", None), ("weighted", "quadratic")):
        p, i = getattr(paired, kind), getattr(independent, kind)
        expected = sk_kappa(reference, better, weights) - sk_kappa(reference, worse, weights)
        assert p.change == pytest.approx(expected, abs=1e-12)
        assert i.change == pytest.approx(expected, abs=1e-12)
        assert p.paired and not i.paired
        assert 0 < p.low < p.change < p.high
        # Both rounds share the answers, so pairing removes the common noise.
        assert p.high - p.low < 0.8 * (i.high - i.low)
        assert p.standard_error < i.standard_error


def test_rounds_of_different_answers_are_independent() -> None:
    gen = np.random.default_rng(9)
    ref_a, rat_a = noisy_rater(gen, 150, 0.6)
    ref_b, rat_b = noisy_rater(gen, 180, 0.8)
    changes = kappa_change(
        CalibrationRound(
            ref_a, rat_a, answer_ids=range(150), clusters=[i // 3 for i in range(150)]
        ),
        CalibrationRound(ref_b, rat_b, answer_ids=range(1000, 1180)),
    )
    assert not changes.plain.paired
    assert (changes.plain.n_a, changes.plain.n_b) == (150, 180)
    assert changes.plain.low < changes.plain.change < changes.plain.high
    assert changes.to_json()["weighted"]["weights"] == "quadratic"


def test_change_degenerate_and_invalid() -> None:
    with no_warnings():
        empty = kappa_change(CalibrationRound([], []), CalibrationRound([0, 1, 2], [0, 1, 1]))
    assert math.isnan(empty.plain.change) and math.isnan(empty.plain.low)
    assert math.isnan(empty.plain.kappa_a)
    with pytest.raises(ValueError, match="repeat"):
        kappa_change(
            CalibrationRound([0, 1], [0, 1], answer_ids=["x", "x"]),
            CalibrationRound([0, 1], [0, 1], answer_ids=["x", "y"]),
        )
    with pytest.raises(ValueError, match="different clusters"):
        kappa_change(
            CalibrationRound([0, 1, 2], [0, 1, 2], answer_ids="abc", clusters=[1, 1, 2]),
            CalibrationRound([0, 1, 2], [0, 1, 2], answer_ids="abc", clusters=[1, 2, 2]),
        )
