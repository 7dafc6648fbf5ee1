"""ReLE diagnostics (§3.5, §5-6) against numpy/scipy references and on the
published LLMEval-Fair table 8."""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from judge.ranking.diagnostics import (
    DEFAULT_CI_FLOOR,
    LLMEVAL_FAIR_DISCIPLINES,
    RELE_DOMAIN_DISCIPLINES,
    RELE_SCHEMES,
    STATISTICS,
    SchemeError,
    ScoreMatrix,
    anisotropy_index,
    capability_inconsistency,
    competition_ranks,
    diagnose,
    rank_stability_amplitude,
    rele_schemes_for,
    validate_schemes,
)
from tests.judge.ranking.table8 import DISCIPLINES, load_table8

FAST = settings(max_examples=100, deadline=None, derandomize=True)
Array = npt.NDArray[np.float64]


def table8_matrix() -> tuple[ScoreMatrix, Array]:
    table = load_table8()
    return ScoreMatrix(table.models, DISCIPLINES, table.disciplines), table.disciplines


def matrix_of(values: Array) -> ScoreMatrix:
    n, d = values.shape
    return ScoreMatrix([f"m{i}" for i in range(n)], [f"d{j}" for j in range(d)], values)


def reference_rank_min(values: Array) -> Array:
    """Competition ranks, 1 = best, with scores equal to 9 decimals tied."""
    return np.asarray(stats.rankdata(-np.round(values, 9), method="min"), dtype=np.float64)


scores_matrix = hnp.arrays(
    np.float64,
    st.tuples(st.integers(2, 12), st.integers(2, 6)),
    elements=st.floats(0, 10, allow_nan=False, allow_subnormal=False),
)


# --- the score matrix ---------------------------------------------------------------------


def test_score_matrix_validates() -> None:
    with pytest.raises(ValueError, match="shape"):
        ScoreMatrix(["a"], ["x", "y"], [[1.0]])
    with pytest.raises(ValueError, match="model 'a' appears twice"):
        ScoreMatrix(["a", "a"], ["x"], [[1.0], [2.0]])
    with pytest.raises(ValueError, match=r"model 'b', dimension 'x'.*not a finite number"):
        ScoreMatrix(["a", "b"], ["x"], [[1.0], [math.inf]])
    matrix = ScoreMatrix(["a", "b"], ["x", "y"], [[1, 2], [3, 4]])
    assert matrix.scores.tolist() == [[1, 2], [3, 4]]
    assert not matrix.scores.flags.writeable
    assert matrix.select(["y"]).scores.tolist() == [[2], [4]]
    with pytest.raises(ValueError, match="unknown dimension 'z'"):
        matrix.select(["z"])


# --- anisotropy index (ReLE eq. 3) ----------------------------------------------------------


def test_table8_anisotropy_matches_numpy_and_scipy() -> None:
    matrix, values = table8_matrix()
    result = anisotropy_index(matrix)
    corr = np.corrcoef(values, rowvar=False)
    assert np.allclose(result.correlation, corr, atol=1e-12)
    pairs = [
        stats.pearsonr(values[:, a], values[:, b]).statistic for a, b in combinations(range(10), 2)
    ]
    assert len(pairs) == result.n_pairs == 45
    assert result.mean_correlation == pytest.approx(np.mean(pairs), abs=1e-12)
    assert result.index == pytest.approx(1 - np.mean(pairs), abs=1e-12)
    assert result.index == pytest.approx(0.05056, abs=5e-6)  # the disciplines move together
    assert result.undefined_pairs == ()


@FAST
@given(
    st.lists(st.floats(-100, 100, allow_subnormal=False), min_size=3, max_size=20, unique=True),
    st.lists(st.tuples(st.floats(0.1, 10), st.floats(-50, 50)), min_size=2, max_size=6),
)
def test_perfectly_correlated_columns_have_anisotropy_0(
    x: list[float], maps: list[tuple[float, float]]
) -> None:
    base = np.array(x)
    assume(np.ptp(base) > 1e-3)
    values = np.column_stack([a * base + c for a, c in maps])
    assert anisotropy_index(matrix_of(values)).index == pytest.approx(0.0, abs=1e-9)
    flipped = np.column_stack([base, -base])
    assert anisotropy_index(matrix_of(flipped)).index == pytest.approx(2.0, abs=1e-9)


@FAST
@given(scores_matrix)
def test_anisotropy_matches_the_mean_of_scipy_pearsonr(values: Array) -> None:
    constant = np.ptp(values, axis=0) == 0
    expected = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns (and returns NaN) on constant input
        for a, b in combinations(range(values.shape[1]), 2):
            if not (constant[a] or constant[b]):
                expected.append(stats.pearsonr(values[:, a], values[:, b]).statistic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = anisotropy_index(matrix_of(values))
    assert result.n_pairs == len(expected)
    if expected:
        assert result.index == pytest.approx(1 - np.mean(expected), abs=1e-9)
    else:
        assert math.isnan(result.index)


def test_constant_columns_are_left_out_of_the_mean() -> None:
    values = np.array([[1.0, 2.0, 5.0, 3.0], [2.0, 4.0, 5.0, 1.0], [3.0, 7.0, 5.0, 2.0]])
    matrix = ScoreMatrix(["a", "b", "c"], ["w", "x", "const", "z"], values)
    result = anisotropy_index(matrix)
    kept = [(0, 1), (0, 3), (1, 3)]
    expected = np.mean([np.corrcoef(values[:, i], values[:, j])[0, 1] for i, j in kept])
    assert result.n_pairs == 3
    assert result.undefined_pairs == (("w", "const"), ("x", "const"), ("const", "z"))
    assert result.index == pytest.approx(1 - expected, abs=1e-12)
    assert np.isnan(result.correlation[2]).all()
    only_constant = anisotropy_index(matrix, ["const", "w"])
    assert math.isnan(only_constant.index) and only_constant.n_pairs == 0


def test_anisotropy_refuses_too_little_data() -> None:
    with pytest.raises(ValueError, match="at least two models"):
        anisotropy_index(ScoreMatrix(["a"], ["x", "y"], [[1.0, 2.0]]))
    with pytest.raises(ValueError, match="at least two dimensions"):
        anisotropy_index(ScoreMatrix(["a", "b"], ["x"], [[1.0], [2.0]]))


# --- weighting schemes and RSA (ReLE §6.1) --------------------------------------------------


def test_rele_schemes_match_the_disciplines_in_any_spelling() -> None:
    """The bank stores discipline keys ("law"), table 8 has headers ("Law"): both get
    ReLE's schemes, keyed by their own spelling; any other set of dimensions gets none."""
    keys = [d.lower() for d in reversed(LLMEVAL_FAIR_DISCIPLINES)]
    schemes = rele_schemes_for(keys)
    assert schemes is not None and list(schemes) == list(RELE_SCHEMES)
    for name, weights in schemes.items():
        assert set(weights) == set(keys)
        assert weights["law"] == RELE_SCHEMES[name]["Law"]
    assert rele_schemes_for(LLMEVAL_FAIR_DISCIPLINES) == RELE_SCHEMES
    assert rele_schemes_for([*keys[:-1], "philosophy"]) is None  # a weight ReLE does not give
    assert rele_schemes_for([*keys, "LAW"]) is None
    assert rele_schemes_for(keys[:1]) is None


def test_rele_schemes_on_some_of_the_ten_keep_their_proportions() -> None:
    """A bank without Military items (the demo's): each scheme's weights on the nine
    present, renormalised; the ratio of any two weights is ReLE's."""
    present = [d for d in LLMEVAL_FAIR_DISCIPLINES if d != "Military"]
    schemes = rele_schemes_for(present)
    assert schemes is not None and list(schemes) == list(RELE_SCHEMES)
    for name, weights in schemes.items():
        assert set(weights) == set(present)
        assert math.fsum(weights.values()) == pytest.approx(1.0)
        full = RELE_SCHEMES[name]
        assert weights["Law"] / weights["Science"] == pytest.approx(full["Law"] / full["Science"])


def test_rele_schemes_on_the_ten_disciplines() -> None:
    assert set(DISCIPLINES) == set(LLMEVAL_FAIR_DISCIPLINES)
    mapped = [d for ds in RELE_DOMAIN_DISCIPLINES.values() for d in ds]
    assert len(mapped) == len(set(mapped)) and set(mapped) <= set(DISCIPLINES)
    assert list(RELE_SCHEMES) == ["general", "professional", "reasoning"]
    for weights in RELE_SCHEMES.values():
        assert list(weights) == list(LLMEVAL_FAIR_DISCIPLINES)
        assert math.fsum(weights.values()) == pytest.approx(1.0, abs=1e-15)
        assert min(weights.values()) > 0
    general, professional, reasoning = RELE_SCHEMES.values()
    # General-heavy: 40% language, 20% reasoning, the remaining 40% over the 7 others.
    assert general["Literature"] == pytest.approx(0.40)
    assert general["Science"] + general["Engineering"] == pytest.approx(0.20)
    assert general["Military"] == pytest.approx(0.40 / 7)
    # Professional-heavy: 60% over Education, Medicine, Economics (finance), Law.
    professional_share = sum(professional[d] for d in ("Education", "Medicine", "Economics", "Law"))
    assert professional_share == pytest.approx(0.60)
    assert professional["History"] == pytest.approx(0.40 / 6)
    # Reasoning-heavy: 50% reasoning, 20% agent (no discipline: dropped), 30% others.
    assert reasoning["Science"] + reasoning["Engineering"] == pytest.approx(0.50 / 0.80)
    assert reasoning["Law"] == pytest.approx(0.30 / 0.80 / 8)


def test_table8_rsa_matches_an_independent_computation() -> None:
    matrix, values = table8_matrix()
    result = rank_stability_amplitude(matrix, RELE_SCHEMES)
    ranks = []
    for scheme in RELE_SCHEMES.values():
        w = np.array([scheme[d] for d in DISCIPLINES])
        ranks.append(reference_rank_min(np.average(values, axis=1, weights=w)))
    all_ranks = np.array(ranks)  # (schemes, models)
    expected = all_ranks.max(axis=0) - all_ranks.min(axis=0)
    assert [result[m].amplitude for m in matrix.models] == expected.astype(int).tolist()
    for k, name in enumerate(RELE_SCHEMES):
        assert [result[m].ranks[name] for m in matrix.models] == all_ranks[k].astype(int).tolist()
    by_rsa = sorted(result, key=lambda m: (-result[m].amplitude, m))
    assert by_rsa[:3] == ["QwQ-32B", "ChatGLM-Pro", "Spark-3.0"]
    assert [result[m].amplitude for m in by_rsa[:3]] == [8, 7, 7]
    assert np.mean(expected) == pytest.approx(131 / 59)


def test_equal_weights_rank_ties_of_table8_together() -> None:
    """Baidu-3.5 and ChatGLM-Pro have the same discipline sum (64.73) but their float means
    differ in the last bit; the tie tolerance keeps them tied, as in the published S."""
    matrix, _ = table8_matrix()
    s_abs = load_table8().s_abs
    equal = {"equal": dict.fromkeys(DISCIPLINES, 1.0)}
    result = rank_stability_amplitude(matrix, equal)
    rank = 1 + int(np.sum(s_abs > 64.73))
    assert result["Baidu-3.5"].ranks == result["ChatGLM-Pro"].ranks == {"equal": rank}
    assert result["Baidu-3.5"].amplitude == 0


@FAST
@given(scores_matrix, st.data())
def test_rsa_is_0_with_a_single_scheme(values: Array, data: st.DataObject) -> None:
    matrix = matrix_of(values)
    weights = data.draw(
        st.lists(st.floats(0.01, 5), min_size=values.shape[1], max_size=values.shape[1])
    )
    scheme = dict(zip(matrix.dimensions, weights, strict=True))
    result = rank_stability_amplitude(matrix, {"only": scheme})
    assert all(r.amplitude == 0 for r in result.values())
    same_twice = rank_stability_amplitude(matrix, {"a": scheme, "b": dict(scheme)})
    assert all(r.amplitude == 0 for r in same_twice.values())


@FAST
@given(scores_matrix, st.data())
def test_rsa_matches_rankdata_for_random_schemes(values: Array, data: st.DataObject) -> None:
    values = np.round(values, 2)  # published-style scores, with exact ties
    matrix = matrix_of(values)
    d = values.shape[1]
    schemes = {
        f"s{k}": dict(
            zip(
                matrix.dimensions,
                data.draw(st.lists(st.integers(1, 9), min_size=d, max_size=d)),
                strict=True,
            )
        )
        for k in range(data.draw(st.integers(1, 4)))
    }
    result = rank_stability_amplitude(matrix, schemes)
    ranks = np.array(
        [
            reference_rank_min(
                np.average(values, axis=1, weights=[s[x] for x in matrix.dimensions])
            )
            for s in schemes.values()
        ]
    )
    expected = (ranks.max(axis=0) - ranks.min(axis=0)).astype(int)
    assert [result[m].amplitude for m in matrix.models] == expected.tolist()
    assert all(0 <= r.amplitude <= len(matrix.models) - 1 for r in result.values())


def test_scheme_scores_are_weighted_means_and_unnamed_dimensions_weigh_0() -> None:
    matrix = ScoreMatrix(["a", "b"], ["x", "y", "z"], [[1.0, 2.0, 9.0], [3.0, 1.0, 0.0]])
    result = rank_stability_amplitude(matrix, {"scheme": {"x": 3, "y": 1}})
    got = {model: stability.scores["scheme"] for model, stability in result.items()}
    assert got == pytest.approx({"a": (3 * 1 + 2) / 4, "b": (3 * 3 + 1) / 4})


@FAST
@given(st.lists(st.integers(-3, 3), min_size=0, max_size=30))
def test_competition_ranks_are_scipy_min_ranks(values: list[int]) -> None:
    got = competition_ranks([float(v) for v in values])
    if values:
        assert (
            got.tolist() == stats.rankdata([-v for v in values], method="min").astype(int).tolist()
        )
    else:
        assert got.tolist() == []


@pytest.mark.parametrize(
    ("schemes", "message"),
    [
        ([], "non-empty object"),
        ({}, "non-empty object"),
        ({"s": {}}, r"scheme 's': expected a non-empty object"),
        ({"s": [1, 2]}, r"scheme 's': expected a non-empty object"),
        ({"s": {"Lw": 1}}, r"scheme 's': unknown dimension 'Lw' \(dimensions: Law, Science\)"),
        ({"s": {"Law": -0.5}}, r"scheme 's': Law: weight -0.5 is negative"),
        ({"s": {"Law": True}}, r"scheme 's': Law: weight True is not a number"),
        ({"s": {"Law": "1"}}, r"scheme 's': Law: weight '1' is not a number"),
        ({"s": {"Law": math.nan}}, r"scheme 's': Law: weight nan is not finite"),
        ({"s": {"Law": 0, "Science": 0.0}}, r"scheme 's': the weights sum to 0"),
        ({"": {"Law": 1}}, "a scheme name must be a non-empty string"),
    ],
)
def test_invalid_schemes_are_refused(schemes: Any, message: str) -> None:
    with pytest.raises(SchemeError, match=message):
        validate_schemes(schemes, ["Law", "Science"])


def test_every_scheme_problem_is_reported() -> None:
    with pytest.raises(SchemeError) as caught:
        validate_schemes({"a": {"Law": -1}, "b": {"Art": 1}}, ["Law"])
    assert len(caught.value.problems) == 2
    assert validate_schemes({"a": {"Law": 2}}, ["Law", "Science"]) == {"a": {"Law": 2.0}}


# --- capability inconsistency (ReLE eq. 5) --------------------------------------------------


def test_table8_capability_inconsistency_matches_an_independent_computation() -> None:
    matrix, values = table8_matrix()
    table = load_table8()
    result = capability_inconsistency(matrix)
    top10 = np.argsort(-table.s_abs, kind="stable")[:10]  # by the published S
    b = values[top10].mean(axis=0)
    adjusted = values / b
    expected = adjusted.std(axis=1) / np.maximum(adjusted.mean(axis=1), DEFAULT_CI_FLOOR)
    assert [result.values[m] for m in matrix.models] == pytest.approx(expected.tolist(), rel=1e-12)
    # No model of table 8 is near the floor, so CI is scipy's coefficient of variation.
    assert result.floored == ()
    assert np.allclose(expected, stats.variation(adjusted, axis=1), rtol=1e-12)
    assert set(result.anchors) == {table.models[i] for i in top10}
    assert result.difficulty == pytest.approx(dict(zip(DISCIPLINES, b.tolist(), strict=True)))
    worst = max(result.values, key=lambda m: result.values[m])
    assert worst == "Llama-2-7B-Chat" and result.values[worst] == pytest.approx(0.3476, abs=1e-4)


@FAST
@given(
    hnp.arrays(
        np.float64, st.tuples(st.integers(2, 12), st.integers(1, 6)), elements=st.floats(0.5, 10)
    ),
    st.lists(st.floats(0.1, 10), min_size=6, max_size=6),
)
def test_ci_with_all_models_as_anchors_is_scipy_variation_of_column_normalised_scores(
    values: Array, scale: list[float]
) -> None:
    matrix = matrix_of(values)
    result = capability_inconsistency(matrix, anchors=len(matrix.models), floor=1e-6)
    expected = stats.variation(values / values.mean(axis=0), axis=1)
    assert [result.values[m] for m in matrix.models] == pytest.approx(
        expected.tolist(), rel=1e-9, abs=1e-12
    )
    # Difficulty adjustment cancels each dimension's own scale.
    rescaled = capability_inconsistency(
        matrix_of(values * np.array(scale[: values.shape[1]])),
        anchors=len(matrix.models),
        floor=1e-6,
    )
    assert list(rescaled.values.values()) == pytest.approx(
        list(result.values.values()), rel=1e-9, abs=1e-12
    )


def test_ci_floor_bounds_weak_models() -> None:
    values = np.array([[9.0, 8.0, 7.0], [0.1, 0.0, 0.2], [6.0, 7.0, 8.0]])
    matrix = ScoreMatrix(["strong", "weak", "mid"], ["x", "y", "z"], values)
    result = capability_inconsistency(matrix, anchors=2, floor=0.1)
    b = values[[0, 2]].mean(axis=0)
    weak = values[1] / b
    assert weak.mean() < 0.1 and result.floored == ("weak",)
    assert result.values["weak"] == pytest.approx(weak.std() / 0.1)
    assert result.values["strong"] == pytest.approx(stats.variation(values[0] / b))
    assert result.anchors == ("strong", "mid")
    zero = capability_inconsistency(ScoreMatrix(["a", "b"], ["x", "y"], [[0.0, 0.0], [1.0, 2.0]]))
    assert zero.values["a"] == 0.0  # no division by zero


def test_ci_with_given_difficulty_and_its_errors() -> None:
    matrix = ScoreMatrix(["a", "b"], ["x", "y"], [[2.0, 4.0], [1.0, 1.0]])
    result = capability_inconsistency(matrix, difficulty={"x": 2.0, "y": 4.0})
    assert result.values["a"] == 0.0 and result.anchors == ()
    assert result.values["b"] == pytest.approx(stats.variation([0.5, 0.25]))
    with pytest.raises(ValueError, match="misses dimension 'y'"):
        capability_inconsistency(matrix, difficulty={"x": 1.0})
    with pytest.raises(ValueError, match="unknown dimension 'q'"):
        capability_inconsistency(matrix, difficulty={"x": 1.0, "y": 1.0, "q": 1.0})
    with pytest.raises(ValueError, match="dimension 'y': difficulty 0 is not positive"):
        capability_inconsistency(matrix, difficulty={"x": 1.0, "y": 0.0})
    with pytest.raises(ValueError, match="smoothing floor must be a positive number"):
        capability_inconsistency(matrix, floor=0.0)
    with pytest.raises(ValueError, match="at least 1"):
        capability_inconsistency(matrix, anchors=0)
    all_zero = ScoreMatrix(["a", "b"], ["x", "y"], [[0.0, 1.0], [0.0, 2.0]])
    with pytest.raises(ValueError, match="dimension 'x': difficulty 0 is not positive"):
        capability_inconsistency(all_zero)


# --- all three on degenerate data: None with a reason, never an error ----------------------

TWO_SCHEMES = {"only-x": {"x": 1.0}, "only-y": {"y": 1.0}}


def diagnose_table(values: Any, schemes: Any = TWO_SCHEMES) -> Any:
    table = np.array(values, dtype=np.float64)
    n, d = table.shape
    return diagnose(
        [f"m{i}" for i in range(n)],
        ["x", "y", "z"][:d],
        table,
        schemes=schemes,
        label="discipline",
    )


def test_a_dimension_every_model_scores_0_in_leaves_only_ci_unavailable() -> None:
    found = diagnose_table([[0.0, 2.0, 1.0], [0.0, 1.0, 3.0], [0.0, 3.0, 2.0]])
    assert found.unavailable == {
        "capability_inconsistency": (
            "discipline 'x': every model scores 0, so its difficulty is undefined"
        )
    }
    assert found.inconsistency is None
    # the pair (y, z) still has a correlation; the RSA is just ranks
    assert found.anisotropy is not None and found.anisotropy.n_pairs == 1
    assert found.anisotropy.index == pytest.approx(1 - stats.pearsonr([2, 1, 3], [1, 3, 2])[0])
    assert found.rsa is not None and found.rsa["m0"].ranks == {"only-x": 1, "only-y": 2}


def test_all_zero_and_all_equal_tables_leave_anisotropy_undefined() -> None:
    zero = diagnose_table([[0.0, 0.0], [0.0, 0.0]])
    assert zero.anisotropy is None and zero.inconsistency is None
    assert zero.unavailable["anisotropy_index"] == (
        "every model scores the same on disciplines 'x', 'y', so no pair of disciplines "
        "has a defined correlation"
    )
    assert zero.unavailable["capability_inconsistency"] == (
        "discipline 'x': every model scores 0, so its difficulty is undefined; "
        "discipline 'y': every model scores 0, so its difficulty is undefined"
    )
    assert zero.rsa is not None and {r.amplitude for r in zero.rsa.values()} == {0}
    equal = diagnose_table([[7.0, 7.0], [7.0, 7.0]])
    assert set(equal.unavailable) == {"anisotropy_index"}
    assert equal.inconsistency is not None and set(equal.inconsistency.values.values()) == {0.0}


def test_anchors_that_all_score_0_make_the_difficulty_undefined() -> None:
    # ten strong models score 0 on x; two weak ones do not, below the anchors' cut
    values = [[0.0, 9.0]] * 10 + [[1.0, 0.0], [2.0, 0.0]]
    found = diagnose(
        [f"m{i}" for i in range(12)], ["x", "y"], values, schemes=TWO_SCHEMES, label="discipline"
    )
    assert found.unavailable == {
        "capability_inconsistency": "discipline 'x': the 10 anchor models (the best overall) "
        "all score 0, so its difficulty is undefined"
    }


@pytest.mark.parametrize(
    ("values", "models", "reason"),
    [
        ([[1.0, 2.0]], ("m0",), "needs at least two models scored on every discipline, got 1"),
        ([[1.0], [2.0]], ("m0", "m1"), "needs at least two disciplines, got 1"),
        (np.zeros((0, 2)), (), "needs at least two models scored on every discipline, got 0"),
        (np.zeros((0, 0)), (), "needs at least two disciplines, got 0"),
        (
            [[1.0, math.nan], [2.0, 1.0]],
            ("m1",),
            "needs at least two models scored on every discipline, got 1; 1 left out for a "
            "score that is not a finite number",
        ),
    ],
    ids=["one-model", "one-discipline", "no-model", "nothing", "nan"],
)
def test_too_little_data_leaves_every_statistic_unavailable(
    values: Any, models: tuple[str, ...], reason: str
) -> None:
    found = diagnose_table(values)
    assert found.unavailable == dict.fromkeys(STATISTICS, reason)
    assert (found.anisotropy, found.rsa, found.inconsistency) == (None, None, None)
    assert found.models == models


def test_models_with_a_non_finite_score_are_left_out() -> None:
    found = diagnose_table([[1.0, 2.0], [math.inf, 1.0], [3.0, 1.0], [2.0, 5.0]])
    assert found.models == ("m0", "m2", "m3") and found.unavailable == {}
    assert found.inconsistency is not None and set(found.inconsistency.values) == {
        "m0",
        "m2",
        "m3",
    }


def test_rsa_without_schemes_or_with_invalid_ones_says_why() -> None:
    values = [[1.0, 2.0], [2.0, 1.0]]
    assert "no weighting schemes apply" in diagnose_table(values, None).unavailable["rsa"]
    bad = diagnose_table(values, {"s": {"nope": 1.0}}).unavailable["rsa"]
    assert bad.startswith("invalid weighting schemes: scheme 's': unknown dimension 'nope'")
    rele = diagnose(["a", "b"], LLMEVAL_FAIR_DISCIPLINES, np.eye(2, 10))
    assert rele.rsa is not None and set(next(iter(rele.rsa.values())).ranks) == set(RELE_SCHEMES)


def test_diagnose_rejects_malformed_labels_as_the_score_matrix_does() -> None:
    """Degenerate scores never raise, but a malformed table does, with the matrix's rules
    (even for a model the statistics would leave out)."""
    with pytest.raises(ValueError, match="shape"):
        diagnose(["a"], ["x", "y"], [[1.0]])
    with pytest.raises(ValueError, match="model 'a' appears twice"):
        diagnose(["a", "a"], ["x"], [[1.0], [math.nan]])
    with pytest.raises(ValueError, match="a dimension name is empty"):
        diagnose(["a", "b"], ["x", ""], [[1.0, 2.0], [3.0, 4.0]])


@FAST
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(0, 5), st.integers(0, 3)),
        elements=st.one_of(
            st.sampled_from([0.0, 1.0, 3.0]),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
    )
)
def test_diagnose_never_raises_and_gives_a_value_or_a_reason(values: Array) -> None:
    n, d = values.shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = diagnose(
            [f"m{i}" for i in range(n)],
            ["x", "y", "z"][:d],
            values,
            schemes={"all": {"x": 1.0}} if d else None,
        )
    computed = {
        "anisotropy_index": found.anisotropy,
        "rsa": found.rsa,
        "capability_inconsistency": found.inconsistency,
    }
    for name, value in computed.items():
        assert (value is None) == (name in found.unavailable), name
        assert name not in found.unavailable or found.unavailable[name]
    if found.anisotropy is not None:
        assert math.isfinite(found.anisotropy.index)
    if found.inconsistency is not None:
        assert all(math.isfinite(v) for v in found.inconsistency.values.values())
