"""Sessions per model, hierarchical bootstrap and tie groups (LLMEval-Fair §3.4, app. F)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from judge.ranking.stability import (
    BootstrapReplicates,
    RunScores,
    beat_probability,
    hierarchical_bootstrap,
    model_summary,
    tie_groups,
)

FAST = settings(max_examples=60, deadline=None, derandomize=True)
VALUES = np.arange(4)


def _eq1(scores: list[int]) -> float:
    """LLMEval-Fair (Zhang et al.) eq. 1, written out: ``S = sum(s_i) / (N * 3) * 100``."""
    return sum(scores) / (len(scores) * 3) * 100


def sessions_with(
    rng: np.random.Generator, p: list[float], n_items: int = 1000, n_sessions: int = 3
) -> list[Any]:
    return [rng.choice(4, size=n_items, p=p) for _ in range(n_sessions)]


def exact_sessions(target: list[float], n_items: int = 300) -> list[list[int]]:
    """Sessions whose absolute scores are exactly the targets (multiples of 100/(3n))."""
    out = []
    for s in target:
        total = round(s / 100 * 3 * n_items)
        threes, rest = divmod(total, 3)
        out.append([3] * threes + ([rest] if rest else []) + [0] * (n_items - threes - bool(rest)))
    return out


# --- RunScores -------------------------------------------------------------------------


def test_session_scores_are_eq1() -> None:
    runs = RunScores({"a": [[3, 2, 3], [3, 3, 1, 0]], "b": [np.array([0, 1, 2], np.int8)]})
    assert runs.models == ("a", "b")
    assert runs.session_scores("a").tolist() == pytest.approx([8 / 9 * 100, 7 / 12 * 100])
    for model in runs:
        for session, s in zip(runs[model], runs.session_scores(model), strict=True):
            assert s == pytest.approx(_eq1(session.tolist()), abs=1e-12)
    assert runs.score_counts("a").tolist() == [[0, 0, 1, 2], [1, 1, 0, 2]]
    assert runs.mean_score("b") == pytest.approx(100 / 3)
    assert len(runs) == 2 and "b" in runs
    assert runs == RunScores({"a": [[3, 2, 3], [3, 3, 1, 0]], "b": [[0, 1, 2]]})
    assert runs != RunScores({"a": [[3, 2, 3], [3, 3, 1, 1]], "b": [[0, 1, 2]]})


def test_run_scores_are_read_only() -> None:
    source = [np.array([1, 2, 3])]
    runs = RunScores({"a": source})
    source[0][0] = 0  # the caller's array does not leak in
    assert runs["a"][0].tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        runs["a"][0][0] = 3


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "no models"),
        ({"": [[1]]}, "non-empty strings"),
        ({"a": []}, "model 'a' has no sessions"),
        ({"a": [[1, 2], []]}, "model 'a', session 1: a session needs at least one item"),
        ({"a": [[1, 4]]}, "model 'a', session 0: item 1 scores 4, outside 0-3"),
        ({"a": [[-1]]}, "item 0 scores -1, outside 0-3"),
        ({"a": [[1, 2.5]]}, "2.5 is not an integer score 0-3"),
        ({"a": [[1, True]]}, "True is not an integer score 0-3"),
        ({"a": [np.array([True, False])]}, "is not an integer score"),
        ({"a": [[[1, 2]]]}, "must be a flat sequence"),
        ({"a": "123"}, "model 'a' has no sessions"),
    ],
)
def test_run_scores_errors(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunScores(data)


# --- summaries ---------------------------------------------------------------------------


def test_model_summary_mean_variance_and_interval() -> None:
    rng = np.random.default_rng(7)
    data = {
        "a": sessions_with(rng, [0.1, 0.2, 0.3, 0.4]),
        "b": sessions_with(rng, [0.4] * 2 + [0.1] * 2),
    }
    boot = hierarchical_bootstrap(data, n_resamples=3000, rng=1)
    summaries = model_summary(boot)
    assert list(summaries) == ["a", "b"]
    for model, summary in summaries.items():
        sessions = [_eq1(s.tolist()) for s in data[model]]
        assert summary.scale == "absolute" and summary.anchor is None
        assert summary.session_values == pytest.approx(sessions, abs=1e-12)
        assert summary.mean == pytest.approx(statistics.fmean(sessions), abs=1e-12)
        assert summary.variance == pytest.approx(statistics.variance(sessions), rel=1e-12)
        reps = boot.replicates(model)
        low, high = np.percentile(reps, [2.5, 97.5])
        assert summary.confidence_interval == pytest.approx((low, high), abs=1e-12)
        assert summary.standard_error == pytest.approx(np.std(reps, ddof=1))
        assert summary.n_sessions == 3 and summary.n_items == (1000, 1000, 1000)
        assert summary.n_resamples == 3000 and not summary.paired_sessions
        assert low < summary.mean < high
    assert summaries["a"].to_json()["ci_low"] == summaries["a"].confidence_interval.low


def test_single_session_has_nan_variance_and_json_none() -> None:
    summary = model_summary({"a": [[0, 1, 2, 3]]}, n_resamples=50, rng=0)["a"]
    assert math.isnan(summary.variance)
    assert summary.to_json()["variance"] is None


def test_confidence_level_changes_width() -> None:
    boot = hierarchical_bootstrap({"a": [[0, 1, 2, 3] * 20] * 3}, n_resamples=2000, rng=3)
    narrow = model_summary(boot, confidence_level=0.5)["a"].confidence_interval
    wide = model_summary(boot, confidence_level=0.99)["a"].confidence_interval
    assert wide.low < narrow.low < narrow.high < wide.high


def test_seeded_bootstrap_is_reproducible() -> None:
    data = {"a": [[0, 1, 2, 3, 3]] * 3, "b": [[1, 1, 2]] * 2}
    one = hierarchical_bootstrap(data, n_resamples=100, rng=42).absolute
    two = hierarchical_bootstrap(data, n_resamples=100, rng=np.random.default_rng(42)).absolute
    other = hierarchical_bootstrap(data, n_resamples=100, rng=43).absolute
    assert one.shape == (2, 100)
    assert np.array_equal(one, two)
    assert not np.array_equal(one, other)
    with pytest.raises(ValueError):
        one[0, 0] = 1.0


def test_bootstrap_argument_errors() -> None:
    data = {"a": [[1, 2]]}
    with pytest.raises(ValueError, match="n_resamples must be at least 1"):
        hierarchical_bootstrap(data, n_resamples=0)
    boot = hierarchical_bootstrap(data, n_resamples=10, rng=0)
    with pytest.raises(ValueError, match="already bootstrap replicates"):
        model_summary(boot, n_resamples=10)
    with pytest.raises(ValueError, match="already bootstrap replicates"):
        tie_groups(boot, rng=1)
    with pytest.raises(ValueError, match="confidence_level"):
        model_summary(boot, confidence_level=1.0)
    with pytest.raises(ValueError, match="'zz' is not among the 1 models"):
        model_summary(boot, anchor="zz")


# --- the bootstrap against independent references ---------------------------------------


def literal_two_stage(
    sessions: list[np.ndarray[Any, Any]], n_resamples: int, rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    """Sessions with replacement, then item indices with replacement: the plain recipe."""
    out = np.empty(n_resamples)
    for b in range(n_resamples):
        picked = rng.integers(len(sessions), size=len(sessions))
        scores = []
        for k in picked:
            items = sessions[k][rng.integers(len(sessions[k]), size=len(sessions[k]))]
            scores.append(items.sum() / (3 * len(items)) * 100)
        out[b] = np.mean(scores)
    return out


def test_multinomial_shortcut_matches_literal_resampling() -> None:
    rng = np.random.default_rng(11)
    sessions = [
        rng.choice(4, size=n, p=p)
        for n, p in [
            (40, [0.1, 0.2, 0.3, 0.4]),
            (25, [0.3, 0.3, 0.2, 0.2]),
            (60, [0.05, 0.05, 0.2, 0.7]),
        ]
    ]
    ours = hierarchical_bootstrap({"m": sessions}, n_resamples=20_000, rng=5).replicates("m")
    literal = literal_two_stage(sessions, 5_000, np.random.default_rng(6))
    assert stats.ks_2samp(ours, literal).pvalue > 0.01
    se = math.hypot(ours.std() / math.sqrt(len(ours)), literal.std() / math.sqrt(len(literal)))
    assert ours.mean() == pytest.approx(literal.mean(), abs=4 * se)
    assert ours.std() == pytest.approx(literal.std(), rel=0.05)


def test_bootstrap_moments_match_the_exact_two_stage_formula() -> None:
    """E[S*] = mean session score; Var[S*] = (Var_k S_k + mean_k sigma_k^2 / n_k) / J."""
    rng = np.random.default_rng(12)
    sessions = [rng.choice(4, size=n, p=[0.2, 0.2, 0.3, 0.3]) for n in (30, 50, 80)]
    scaled = [s / 3 * 100 for s in sessions]
    means = np.array([s.mean() for s in scaled])
    within = np.array([s.var() / len(s) for s in scaled])  # population variance / n
    exact_var = (means.var() + within.mean()) / len(sessions)
    reps = hierarchical_bootstrap({"m": sessions}, n_resamples=40_000, rng=2).replicates("m")
    se = math.sqrt(exact_var / len(reps))
    assert reps.mean() == pytest.approx(means.mean(), abs=4 * se)
    assert reps.var() == pytest.approx(exact_var, rel=0.03)


def test_one_session_interval_matches_scipy_percentile_bootstrap() -> None:
    """With one session the hierarchical bootstrap is the ordinary bootstrap of the mean."""
    rng = np.random.default_rng(13)
    items = rng.choice(4, size=200, p=[0.25, 0.25, 0.2, 0.3])
    ours = model_summary({"m": [items]}, n_resamples=40_000, rng=3)["m"]
    ref = stats.bootstrap(
        (items / 3 * 100,),
        np.mean,
        n_resamples=40_000,
        method="percentile",
        rng=np.random.default_rng(4),
    )
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.confidence_interval.low == pytest.approx(
        ref.confidence_interval.low, abs=0.03 * width
    )
    assert ours.confidence_interval.high == pytest.approx(
        ref.confidence_interval.high, abs=0.03 * width
    )
    assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.03)


def test_interval_covers_the_true_mean_in_simulation() -> None:
    """200 datasets of 3 x 1,000 items from a known distribution.

    Sessions here differ only by their items, so resampling both stages counts the item
    noise twice: the bootstrap variance is (2J - 1) / J = 5/3 of the true variance of the
    mean, and the nominal 95% interval covers about 99% of the time (conservative).
    """
    rng = np.random.default_rng(2024)
    p = np.array([0.1, 0.15, 0.25, 0.5])
    true_mean = float(p @ VALUES / 3 * 100)
    true_var_of_mean = float(p @ (VALUES - p @ VALUES) ** 2) / 9 * 100**2 / 3000
    covered = 0
    ratios = []
    for _ in range(200):
        summary = model_summary({"m": sessions_with(rng, list(p))}, n_resamples=1000, rng=rng)["m"]
        low, high = summary.confidence_interval
        covered += low <= true_mean <= high
        ratios.append(summary.standard_error**2 / true_var_of_mean)
    assert 0.93 <= covered / 200 <= 1.0
    assert np.mean(ratios) == pytest.approx(5 / 3, rel=0.08)


def test_bootstrap_of_twenty_models_takes_seconds_at_most() -> None:
    rng = np.random.default_rng(0)
    data = {f"m{i}": [rng.integers(0, 4, size=1000) for _ in range(3)] for i in range(20)}
    start = time.perf_counter()
    boot = hierarchical_bootstrap(data, n_resamples=2000, rng=1)
    tie_groups(boot)
    assert time.perf_counter() - start < 3.0
    assert boot.absolute.shape == (20, 2000)


# --- beat probability ----------------------------------------------------------------------


def test_beat_probability_counts_ties_half() -> None:
    assert beat_probability([2.0, 3.0, 1.0, 5.0], [1.0, 3.0, 2.0, 4.0]) == 0.625
    assert beat_probability([1.0, 1.0], [1.0, 1.0]) == 0.5
    with pytest.raises(ValueError, match="differ in shape"):
        beat_probability([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no replicates"):
        beat_probability([], [])
    with pytest.raises(ValueError, match="NaN"):
        beat_probability([math.nan], [1.0])


@FAST
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40))
def test_beat_probability_is_complementary_and_matches_a_loop(pairs: list[tuple[int, int]]) -> None:
    a = [float(x) for x, _ in pairs]
    b = [float(y) for _, y in pairs]
    expected = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x, y in pairs) / len(pairs)
    assert beat_probability(a, b) == pytest.approx(expected, abs=1e-12)
    assert beat_probability(a, b) + beat_probability(b, a) == pytest.approx(1.0, abs=1e-12)


def test_beat_matrix_is_complementary() -> None:
    rng = np.random.default_rng(3)
    data = {
        m: sessions_with(rng, p, n_items=100)
        for m, p in [
            ("a", [0.1, 0.1, 0.3, 0.5]),
            ("b", [0.2, 0.2, 0.3, 0.3]),
            ("c", [0.2, 0.2, 0.3, 0.3]),
        ]
    }
    boot = hierarchical_bootstrap(data, n_resamples=500, rng=0)
    matrix = boot.beat_matrix()
    assert np.allclose(matrix + matrix.T, 1.0)
    assert np.all(np.diag(matrix) == 0.5)
    assert matrix[0, 1] == boot.beat_probability("a", "b")
    assert matrix[0, 1] > 0.95


# --- relative scores -----------------------------------------------------------------------


def test_relative_summary_is_computed_per_replicate() -> None:
    rng = np.random.default_rng(21)
    data = {
        "top": sessions_with(rng, [0.05, 0.05, 0.1, 0.8], 500),
        "mid": sessions_with(rng, [0.2, 0.2, 0.2, 0.4], 500),
    }
    boot = hierarchical_bootstrap(data, n_resamples=2000, rng=0)
    rel = model_summary(boot, anchor="top")
    anchor = rel["top"]
    assert anchor.scale == "relative" and anchor.anchor == "top"
    assert anchor.session_values == (100.0, 100.0, 100.0)
    assert anchor.mean == 100.0 and anchor.variance == 0.0
    assert tuple(anchor.confidence_interval) == (100.0, 100.0)
    s_top, s_mid = (boot.runs.session_scores(m) for m in ("top", "mid"))
    mid = rel["mid"]
    assert mid.paired_sessions
    assert mid.session_values == pytest.approx(list(s_mid / s_top * 100))
    assert mid.variance == pytest.approx(statistics.variance(mid.session_values))
    assert mid.mean == pytest.approx(s_mid.mean() / s_top.mean() * 100)
    ratio = boot.replicates("mid") / boot.replicates("top") * 100
    assert np.array_equal(boot.replicates("mid", anchor="top"), ratio)
    assert mid.confidence_interval == pytest.approx(tuple(np.quantile(ratio, [0.025, 0.975])))
    # R's interval includes the anchor's uncertainty: wider than S scaled by a constant.
    absolute = model_summary(boot)["mid"].confidence_interval
    scaled_width = (absolute.high - absolute.low) / s_top.mean() * 100
    assert mid.confidence_interval.high - mid.confidence_interval.low > scaled_width


def test_relative_sessions_unpaired_when_counts_differ() -> None:
    data = {"top": exact_sessions([90.0, 80.0]), "b": exact_sessions([60.0, 50.0, 70.0])}
    rel = model_summary(data, anchor="top", n_resamples=200, rng=0)
    assert not rel["b"].paired_sessions
    assert rel["b"].session_values == pytest.approx([60 / 85 * 100, 50 / 85 * 100, 70 / 85 * 100])
    assert rel["top"].paired_sessions


def test_relative_anchor_errors() -> None:
    data = {"zero": [[0, 0, 0]], "b": [[1, 2, 3]]}
    with pytest.raises(ValueError, match="anchor model 'zero' scores 0"):
        model_summary(data, anchor="zero", n_resamples=10, rng=0)
    with pytest.raises(ValueError, match="'nope' is not among"):
        tie_groups(data, anchor="nope", n_resamples=10, rng=0)


# --- tie groups ----------------------------------------------------------------------------


def table8_like(rng: np.random.Generator, targets: dict[str, float]) -> dict[str, list[Any]]:
    """Three 1,000-item sessions per model; score 3 with probability S/100, else 0."""
    return {
        m: [np.where(rng.random(1000) < s / 100, 3, 0) for _ in range(3)]
        for m, s in targets.items()
    }


def test_tie_groups_separate_clearly_different_models() -> None:
    rng = np.random.default_rng(31)
    data = table8_like(rng, {"c": 50.0, "a": 90.0, "b": 70.0})
    ranking = tie_groups(data, n_resamples=2000, rng=0)
    assert ranking.order == ("a", "b", "c")
    assert ranking.groups == (("a",), ("b",), ("c",))
    assert [e.rank_range for e in ranking.entries] == [(1, 1), (2, 2), (3, 3)]
    assert [e.position for e in ranking.entries] == [1, 2, 3]
    assert ranking.entry("a").group != ranking.entry("c").group
    assert ranking.entry("b").confidence_interval.low < ranking.entry("b").estimate


def test_tie_groups_merge_near_identical_models() -> None:
    rng = np.random.default_rng(32)
    data = table8_like(rng, {"a1": 90.0, "a2": 90.0, "a3": 89.9, "b1": 60.0, "b2": 60.1})
    ranking = tie_groups(data, n_resamples=2000, rng=0)
    assert [set(g) for g in ranking.groups] == [{"a1", "a2", "a3"}, {"b1", "b2"}]
    for entry in ranking.entries:
        low, high = entry.rank_range
        assert (low, high) == ((1, 3) if entry.model.startswith("a") else (4, 5))
    assert ranking.entry("a1").group == ranking.entry("a3").group
    payload = ranking.to_json()
    assert payload["groups"] == [list(g) for g in ranking.groups]
    assert {"position", "group", "rank_low", "rank_high", "ci_low", "ci_high"} <= set(
        payload["models"][0]
    )


def crafted(means: dict[str, float], replicates: dict[str, list[float]]) -> BootstrapReplicates:
    """Replicates chosen by hand, with sessions whose means give the order."""
    runs = RunScores({m: exact_sessions([s]) for m, s in means.items()})
    matrix = np.array([replicates[m] for m in runs.models], dtype=float)
    return BootstrapReplicates(runs=runs, absolute=matrix)


def test_groups_chain_consecutive_inseparable_pairs() -> None:
    # P(a beats b) = 0.9 and P(b beats c) = 0.9, below 0.95: one chained group, although
    # P(a beats c) = 1; the rank ranges show that a and c are ordered.
    reps = {
        "a": [10.0] * 9 + [0.0],
        "b": [5.0] * 9 + [20.0],
        "c": [6.0] + [0.0] * 8 + [-1.0],
    }
    boot = crafted({"a": 60.0, "b": 50.0, "c": 40.0}, reps)
    p = boot.beat_matrix()
    assert (p[0, 1], p[1, 2], p[0, 2]) == (0.9, 0.9, 1.0)
    ranking = tie_groups(boot)
    assert ranking.groups == (("a", "b", "c"),)
    assert {e.model: e.rank_range for e in ranking.entries} == {
        "a": (1, 2),
        "b": (1, 3),
        "c": (2, 3),
    }
    assert ranking.beat_matrix[0, 2] == 1.0
    assert tie_groups(boot, threshold=0.85).groups == (("a",), ("b",), ("c",))


def test_new_group_starts_at_a_confident_step() -> None:
    reps = {"a": [3.0] * 20, "b": [2.0] * 19 + [4.0], "c": [2.5] * 10 + [1.0] * 10}
    boot = crafted({"a": 60.0, "b": 50.0, "c": 40.0}, reps)
    # P(a > b) = 0.95 (a new group), P(b > c) = 0.5 (same group)
    ranking = tie_groups(boot)
    assert ranking.groups == (("a",), ("b", "c"))
    assert [e.group for e in ranking.entries] == [1, 2, 2]


def test_tie_groups_relative_keeps_order_and_reports_r() -> None:
    rng = np.random.default_rng(33)
    data = table8_like(rng, {"top": 93.7, "mid": 85.0, "low": 60.0})
    boot = hierarchical_bootstrap(data, n_resamples=1000, rng=0)
    absolute, relative = tie_groups(boot), tie_groups(boot, anchor="top")
    assert relative.order == absolute.order and relative.groups == absolute.groups
    assert np.array_equal(relative.beat_matrix, absolute.beat_matrix)
    assert relative.scale == "relative" and relative.anchor == "top"
    assert relative.entry("top").estimate == 100.0
    assert relative.entry("mid").summary.mean == pytest.approx(
        boot.runs.mean_score("mid") / boot.runs.mean_score("top") * 100
    )


def test_replicates_shape_is_checked() -> None:
    runs = RunScores({"a": [[1]], "b": [[2]]})
    with pytest.raises(ValueError, match=r"replicates must have shape \(2, n_resamples >= 1\)"):
        BootstrapReplicates(runs=runs, absolute=np.zeros((3, 4)))


def test_threshold_validation() -> None:
    with pytest.raises(ValueError, match="threshold"):
        tie_groups({"a": [[1]]}, threshold=0.5, n_resamples=5, rng=0)


@FAST
@given(
    st.lists(
        st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=3),
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 2**32 - 1),
)
def test_ranking_properties(sessions: list[list[list[int]]], seed: int) -> None:
    data = {f"m{i}": s for i, s in enumerate(sessions)}
    ranking = tie_groups(data, n_resamples=50, rng=seed)
    estimates = [e.estimate for e in ranking.entries]
    assert estimates == sorted(estimates, reverse=True)
    assert sorted(ranking.order) == sorted(data)
    assert [m for g in ranking.groups for m in g] == list(ranking.order)
    groups = [e.group for e in ranking.entries]
    assert groups == sorted(groups) and groups[0] == 1
    for e in ranking.entries:
        low, high = e.rank_range
        assert 1 <= low <= e.position <= high <= len(data)
        ci = e.confidence_interval
        assert 0.0 <= ci.low <= ci.high <= 100.0
    p = ranking.beat_matrix
    assert np.allclose(p + p.T, 1.0)
