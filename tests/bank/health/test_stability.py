"""Bootstrap rank stability (Benchmark² (Qian et al.), eq. 7) resampling item families:
against a per-iteration loop with scipy's tau-b, and on constructed cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bank.health.responses import ModelInfo, Responses
from bank.health.stability import (
    bootstrap_interval,
    pairwise_tau_b,
    rank_stability,
    resample_families,
)

EXAMPLES = settings(max_examples=40, deadline=None)
GRADES = [0.0, 1 / 3, 2 / 3, 1.0]


def _responses(matrix: np.ndarray, family: list[int] | np.ndarray | None = None) -> Responses:
    items, models = matrix.shape
    return Responses.from_dense(
        [f"i{i}" for i in range(items)],
        [ModelInfo(f"m{m}") for m in range(models)],
        matrix,
        family,
    )


@st.composite
def _sparse(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    """A small items × models matrix of graded scores with NaN holes, and item families."""
    items = draw(st.integers(1, 10))
    models = draw(st.integers(2, 6))
    cells = draw(
        st.lists(
            st.one_of(st.sampled_from(GRADES), st.just(math.nan)),
            min_size=items * models,
            max_size=items * models,
        )
    )
    family = draw(st.lists(st.integers(0, 4), min_size=items, max_size=items))
    return np.array(cells).reshape(items, models), family


def _reference_stability(
    matrix: np.ndarray, family: list[int], iterations: int, seed: int
) -> float:
    """The same draws, then per-model loops and scipy's tau-b on the common models."""
    families = sorted(set(family))
    rng = np.random.default_rng(seed)
    rankings = []
    for _ in range(iterations):
        drawn = rng.integers(0, len(families), size=len(families))
        multiplicity = {f: int(np.sum(drawn == index)) for index, f in enumerate(families)}
        scores = []
        for m in range(matrix.shape[1]):
            total = weight = 0.0
            for i in range(matrix.shape[0]):
                if np.isfinite(matrix[i, m]):
                    total += multiplicity[family[i]] * matrix[i, m]
                    weight += multiplicity[family[i]]
            scores.append(round(total / weight, 12) if weight else math.nan)
        rankings.append(np.array(scores))
    taus = []
    for a, b in itertools.combinations(rankings, 2):
        both = np.isfinite(a) & np.isfinite(b)
        if both.sum() >= 2 and np.ptp(a[both]) > 0 and np.ptp(b[both]) > 0:
            taus.append(stats.kendalltau(a[both], b[both]).statistic)
    return float(np.mean(taus)) if taus else math.nan


@EXAMPLES
@given(_sparse(), st.integers(0, 3))
def test_stability_matches_a_loop_with_scipy(case: tuple[np.ndarray, list[int]], seed: int) -> None:
    matrix, family = case
    figure = rank_stability(_responses(matrix, family), iterations=8, seed=seed, min_models=2)
    ranked = int(np.sum(np.any(np.isfinite(matrix), axis=0)))
    assert figure.n == ranked
    expected = _reference_stability(matrix, family, 8, seed) if ranked >= 2 else math.nan
    if math.isnan(expected):
        assert figure.value is None
    else:
        assert figure.value == pytest.approx(expected, abs=1e-12)


@EXAMPLES
@given(
    st.integers(2, 7).flatmap(
        lambda m: st.lists(
            st.lists(st.one_of(st.sampled_from(GRADES), st.just(math.nan)), min_size=m, max_size=m),
            min_size=2,
            max_size=5,
        )
    )
)
def test_pairwise_tau_b_matches_scipy(rows: list[list[float]]) -> None:
    rankings = np.array(rows)
    got = pairwise_tau_b(rankings)
    for a, b in itertools.product(range(len(rows)), repeat=2):
        x, y = rankings[a], rankings[b]
        both = np.isfinite(x) & np.isfinite(y)
        defined = both.sum() >= 2 and np.ptp(x[both]) > 0 and np.ptp(y[both]) > 0
        if defined:
            assert got[a, b] == pytest.approx(stats.kendalltau(x[both], y[both]).statistic)
        else:
            assert math.isnan(got[a, b])


def test_identical_rankings_under_every_resample_give_one() -> None:
    rng = np.random.default_rng(3)
    levels = np.linspace(0.1, 0.9, 6)  # each model scores its own level on every item
    matrix = np.tile(levels, (40, 1))
    matrix[rng.random(matrix.shape) < 0.5] = np.nan  # sparse: rankings on common models
    figure = rank_stability(_responses(matrix, rng.integers(0, 15, 40)), iterations=50)
    assert figure.value == pytest.approx(1.0)
    assert figure.n == 6


def _noisy(items: int = 30, models: int = 6, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ability = np.linspace(0.35, 0.65, models)
    return (rng.random((items, models)) < ability).astype(float)


def test_a_seed_makes_it_deterministic() -> None:
    responses = _responses(_noisy())
    first = rank_stability(responses, seed=11)
    assert first == rank_stability(responses, seed=11)
    assert first.value is not None and 0 < first.value < 1
    assert first != rank_stability(responses, seed=12)


def test_a_family_of_identical_variants_is_resampled_as_one_unit() -> None:
    """k identical variants of each question, grouped as a family, resample exactly like
    the single questions; split by item they would look like k independent questions."""
    base = _noisy(items=25)
    k = 4
    variants = np.repeat(base, k, axis=0)
    family = np.repeat(np.arange(25), k)
    as_families = rank_stability(_responses(variants, family), seed=5)
    single = rank_stability(_responses(base), seed=5)
    by_item = rank_stability(_responses(variants), seed=5)
    assert as_families.value == pytest.approx(single.value, abs=1e-12)
    assert by_item.value is not None and single.value is not None
    assert by_item.value > single.value + 0.05  # k times the items: falsely stable


def test_selected_items_are_the_only_ones_resampled() -> None:
    matrix = _noisy(items=40)
    family = np.arange(40) // 2
    responses = _responses(matrix, family)
    chosen = np.zeros(40, bool)
    chosen[::3] = True
    assert rank_stability(responses, items=chosen, seed=2) == rank_stability(
        responses.select(items=chosen), seed=2
    )


def test_too_few_models_or_iterations_is_missing() -> None:
    matrix = _noisy(models=4)
    matrix[:, 2:] = np.nan  # two models have no cell at all
    figure = rank_stability(_responses(matrix))
    assert figure.value is None and figure.n == 2 and figure.reason
    assert rank_stability(_responses(matrix), min_models=2).value is not None
    assert rank_stability(_responses(_noisy()), iterations=1).value is None
    nothing = rank_stability(_responses(_noisy()), items=np.zeros(30, bool))
    assert nothing.value is None and nothing.n == 0


def test_a_resample_draws_whole_families() -> None:
    matrix = _noisy(items=12)
    matrix[np.random.default_rng(0).random(matrix.shape) < 0.3] = np.nan
    family = [0, 0, 0, 1, 2, 2, 3, 4, 4, 4, 4, 5]
    responses = _responses(matrix, family)
    original = responses.dense()
    resample = resample_families(responses, np.random.default_rng(9))
    new_family = resample.family
    assert np.unique(new_family).size == 6
    assert np.all(np.diff(new_family) >= 0)
    for copy in np.unique(new_family):
        rows = np.flatnonzero(new_family == copy)
        labels = [resample.item_ids[r] for r in rows]
        source = [int(label[1:]) for label in labels]
        # the copy is one whole original family, its items in order, with their cells
        assert len({family[s] for s in source}) == 1
        assert source == [i for i in range(12) if family[i] == family[source[0]]]
        np.testing.assert_array_equal(resample.dense()[rows], original[source])


def test_bootstrap_interval_of_a_statistic() -> None:
    responses = _responses(_noisy(items=60), np.arange(60) // 3)

    def mean_score(r: Responses) -> float:
        return float(np.mean(r.score))

    interval = bootstrap_interval(mean_score, responses, iterations=200, seed=1)
    assert interval == bootstrap_interval(mean_score, responses, iterations=200, seed=1)
    assert interval.value == pytest.approx(float(np.nanmean(_noisy(items=60))))
    assert interval.low < interval.value < interval.high
    assert interval.high - interval.low < 0.2
    assert interval.iterations == 200

    undefined = bootstrap_interval(lambda r: math.nan, responses, iterations=5)
    assert math.isnan(undefined.low) and undefined.iterations == 0
