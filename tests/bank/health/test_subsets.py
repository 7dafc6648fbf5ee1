"""Selective subsets: the test vector's masks, a sort reference, and the evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from bank.health.responses import BoolArray, FloatArray, ModelInfo, Responses
from bank.health.results import Figure, ItemStatistics
from bank.health.subsets import (
    SubsetRule,
    evaluate_subset,
    rank_tau,
    select_subset,
    separation_mask,
    top_share_count,
)

# The shared test vector: six models (family A 1.5/7/14B, family B 2/4/9B), eight items.
ROWS = ["111111", "001001", "011011", "101100", "000000", "011111", "110011", "001011"]
VECTOR = np.array([[float(ch) for ch in row] for row in ROWS])
INVERSIONS = np.array([0, 0, 0, 3, 0, 0, 2, 0])
CAS = np.array([0, 0.7831, 0.7831, 0, 0, 0.3506, 0, 0.9045])


def make_stats(
    separation: FloatArray, cad: FloatArray, cas: FloatArray, inversions: np.ndarray | None = None
) -> ItemStatistics:
    n = separation.shape[0]
    inv = np.zeros(n, np.int64) if inversions is None else inversions.astype(np.int64)
    return ItemStatistics(
        n=np.full(n, 6, np.int64),
        p=np.full(n, 0.5),
        difficulty=np.full(n, 0.5),
        point_biserial=np.zeros(n),
        point_biserial_low=np.zeros(n),
        point_biserial_high=np.zeros(n),
        spearman=np.zeros(n),
        cas=cas,
        cas_kfold=cas,
        inversions=inv,
        pairs=np.full(n, 6, np.int64),
        cad=cad,
        separation=separation,
    )


def vector_stats() -> ItemStatistics:
    m = VECTOR.shape[1]
    n1 = VECTOR.sum(axis=1)
    separation = 2 * n1 * (m - n1) / (m * (m - 1))
    return make_stats(separation, np.exp(-12.0 * INVERSIONS / 6.0), CAS, INVERSIONS)


def test_the_test_vector_figures() -> None:
    stats = vector_stats()
    assert stats.separation == pytest.approx(
        [0, 0.5333, 0.5333, 0.6, 0, 0.3333, 0.5333, 0.6], abs=1e-4
    )
    assert stats.cad[[3, 6]] == pytest.approx([0.0025, 0.0183], abs=1e-4)


def test_the_test_vector_masks() -> None:
    stats = vector_stats()
    # round(0.35 * 8) = 3: i3 and i7 (d .6), then i1 of the tied i1, i2, i6 (d .5333).
    assert top_share_count(8, 0.35) == 3
    assert np.flatnonzero(separation_mask(stats.separation, 0.35)).tolist() == [1, 3, 7]
    # CAD > .15 drops i3 (.0025) and i6 (.0183).
    assert np.flatnonzero(select_subset(stats, SubsetRule.CAD_DS)).tolist() == [1, 7]
    assert np.flatnonzero(select_subset(stats, SubsetRule.CAS)).tolist() == [1, 2, 7]
    assert np.flatnonzero(select_subset(stats, SubsetRule.CAD_DS_CAS)).tolist() == [1, 7]
    wider = select_subset(stats, SubsetRule.CAD_DS, top_share=0.5)
    assert np.flatnonzero(wider).tolist() == [1, 2, 7]
    assert np.flatnonzero(select_subset(stats, "cas", cas_min=0.35)).tolist() == [1, 2, 5, 7]  # type: ignore[arg-type]


def test_top_share_count_rounds_half_up_and_keeps_one() -> None:
    assert [top_share_count(n, 0.35) for n in (0, 1, 2, 3, 8, 10, 100)] == [0, 1, 1, 1, 3, 4, 35]
    assert top_share_count(10, 0.25) == 3  # 2.5 rounds up, not to even
    assert top_share_count(10, 1.0) == 10


def test_thresholds_are_strict_with_a_tolerance() -> None:
    separation = np.full(4, 0.5)
    cad = np.array([0.15, 0.15 + 1e-12, 0.1500001, np.nan])
    cas = np.array([0.4, 0.4 + 1e-12, 0.4000001, np.nan])
    stats = make_stats(separation, cad, cas)
    assert select_subset(stats, SubsetRule.CAS).tolist() == [False, False, True, False]
    assert select_subset(stats, SubsetRule.CAD_DS, top_share=1.0).tolist() == [0, 0, 1, 0]
    with pytest.raises(ValueError, match="top_share"):
        select_subset(stats, SubsetRule.CAD_DS, top_share=0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([0.0, 1 / 3, 0.5, 8 / 15, 0.6])),
            st.one_of(st.none(), st.sampled_from([0.0025, 0.135, 1.0])),
        ),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from([0.1, 0.35, 0.5, 1.0]),
)
def test_cad_ds_matches_a_sort(rows: list[tuple[float | None, float | None]], share: float) -> None:
    d = np.array([np.nan if a is None else a for a, _ in rows])
    cad = np.array([np.nan if b is None else b for _, b in rows])
    ranked = sorted((i for i, (a, _) in enumerate(rows) if a is not None), key=lambda i: (-d[i], i))
    k = max(1, math.floor(share * len(ranked) + 0.5)) if ranked else 0
    expected = sorted(i for i in ranked[:k] if cad[i] > 0.15)
    mask = select_subset(
        make_stats(d, cad, np.zeros(len(rows))), SubsetRule.CAD_DS, top_share=share
    )
    assert np.flatnonzero(mask).tolist() == expected


# Evaluation: five models on six items, model m4 answered only items 0 and 1.
EVAL = np.array(
    [
        [1.0, 1.0, 1.0, 0.0, 1.0],
        [1.0, 1.0, 0.0, 0.0, 0.0],
        [1.0, 2 / 3, 1 / 3, 0.0, np.nan],
        [1.0, 0.0, 1.0, 1.0, np.nan],
        [0.0, 1.0, 1 / 3, 1.0, np.nan],
        [1.0, 1.0, 0.0, 0.0, np.nan],
    ]
)
EVAL_MODELS = tuple(ModelInfo(f"m{j}") for j in range(5))


def _simple_ds(scores: FloatArray) -> float:
    return float(np.std(scores) / np.mean(scores))


class RecordingStability:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, list[bool]]] = []

    def __call__(
        self, responses: Responses, *, iterations: int, seed: int, items: BoolArray
    ) -> Figure:
        self.calls.append((responses.n_models, iterations, seed, items.tolist()))
        return Figure.of(float(items.sum()) / 10.0, responses.n_models)


def test_evaluate_subset_with_injected_callables() -> None:
    responses = Responses.from_dense([f"i{i}" for i in range(6)], EVAL_MODELS, EVAL)
    subset = np.array([False, False, True, True, True, False])
    stability = RecordingStability()
    result = evaluate_subset(
        responses, subset, discriminability=_simple_ds, stability=stability, iterations=7, seed=3
    )
    full = np.nanmean(EVAL, axis=0)[:4]
    part = np.nanmean(EVAL[subset][:, :4], axis=0)
    assert result.n_items == 6 and result.retained == 3
    assert result.retention == pytest.approx(0.5)
    assert result.n_models == 4 and result.models_without_subset_score == 1
    expected_tau = scipy_stats.kendalltau(full, part).statistic
    assert result.rank_tau.value == pytest.approx(expected_tau)
    assert result.rank_tau.n == 4
    assert result.ds_full.value == pytest.approx(np.std(full) / np.mean(full))
    assert result.ds_subset.value == pytest.approx(np.std(part) / np.mean(part))
    assert result.ds_full.n == 4
    assert stability.calls == [(4, 7, 3, subset.tolist()), (4, 7, 3, [True] * 6)]
    assert result.stability_subset.value == pytest.approx(0.3)
    assert result.stability_full.value == pytest.approx(0.6)
    out = result.to_dict()
    assert out["rank_tau"] == {"value": pytest.approx(expected_tau), "n": 4, "reason": None}
    assert out["retention"] == pytest.approx(0.5)


def test_evaluate_subset_missing_figures() -> None:
    responses = Responses.from_dense([f"i{i}" for i in range(6)], EVAL_MODELS, EVAL)
    subset = np.array([True, False, False, False, False, False])  # only m3 differs
    result = evaluate_subset(
        responses,
        subset,
        discriminability=lambda scores: float("nan"),
        stability=RecordingStability(),
    )
    assert result.n_models == 5
    assert result.ds_full == Figure(None, 5, "undefined")
    assert result.rank_tau.value is not None
    unused = RecordingStability()
    empty = evaluate_subset(
        responses, np.zeros(6, bool), discriminability=_simple_ds, stability=unused
    )
    assert unused.calls == []
    assert empty.n_models == 0 and empty.retained == 0
    assert empty.rank_tau.value is None and "fewer than 3" in (empty.rank_tau.reason or "")
    assert empty.ds_full == Figure(None, 0, "fewer than 3 models")
    assert empty.stability_subset.value is None
    with pytest.raises(ValueError, match="shape"):
        evaluate_subset(
            responses, np.ones(3, bool), discriminability=_simple_ds, stability=RecordingStability()
        )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=12))
def test_rank_tau_is_scipy_tau_b(pairs: list[tuple[float, float]]) -> None:
    a = np.array([x for x, _ in pairs])
    b = np.array([y for _, y in pairs])
    figure = rank_tau(a, b)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        assert figure.value is None
    else:
        assert figure.value == pytest.approx(scipy_stats.kendalltau(a, b).statistic)
        assert figure.n == len(pairs)


def test_rank_tau_constant_and_nan() -> None:
    assert rank_tau(np.array([0.5, 0.5, 0.5]), np.array([0.1, 0.2, 0.3])).reason is not None
    figure = rank_tau(
        np.array([0.1, np.nan, 0.2, 0.3, 0.4]), np.array([0.1, 0.9, np.nan, 0.3, 0.2])
    )
    assert figure.n == 3
    assert figure.value == pytest.approx(
        scipy_stats.kendalltau([0.1, 0.3, 0.4], [0.1, 0.3, 0.2]).statistic
    )
