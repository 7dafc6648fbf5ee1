"""Elo (LLMEval-Fair app. D) and Bradley-Terry baselines, against independent references."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

import judge.ranking.pairwise as pairwise
from judge.ranking.pairwise import (
    BradleyTerryError,
    Comparison,
    bradley_terry,
    comparisons_from_items,
    elo,
    expected_score,
)

FAST = settings(max_examples=60, deadline=None, derandomize=True)

# --- comparisons -----------------------------------------------------------------------


def test_comparisons_from_items_on_shared_items() -> None:
    scores = {
        "a": {"q1": 3, "q2": 1, "q3": 2},
        "b": {"q1": 2, "q2": 1, "q4": 0},
        "c": {"q2": 3, "q3": 2, "q4": 1},
    }
    got = comparisons_from_items(scores)
    assert got == [
        Comparison("a", "b", 1.0, "q1"),
        Comparison("a", "b", 0.5, "q2"),
        Comparison("a", "c", 0.0, "q2"),
        Comparison("b", "c", 0.0, "q2"),
        Comparison("a", "c", 0.5, "q3"),
        Comparison("b", "c", 0.0, "q4"),
    ]
    assert comparisons_from_items({"a": {"q": 1}}) == []


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ({"a": {"q": math.nan}}, "model 'a', item 'q': nan is not finite"),
        ({"a": {"q": True}}, "model 'a', item 'q': True is not a number"),
        ({"a": {"q": "3"}}, "'3' is not a number"),
        ({"": {"q": 1}}, "non-empty strings"),
    ],
)
def test_comparisons_from_items_errors(scores: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        comparisons_from_items(scores)


@pytest.mark.parametrize(
    ("comparisons", "message"),
    [
        ([], "no comparisons"),
        ([Comparison("a", "a", 1.0)], "comparison 0: model 'a' is compared with itself"),
        ([Comparison("a", "b", 0.7)], r"comparison 0 \('a' vs 'b'\): score_a 0.7 must be 1"),
        ([Comparison("a", "b", 1.0), Comparison("a", "", 1.0)], "comparison 1: model names"),
    ],
)
def test_invalid_comparisons(comparisons: list[Comparison], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        elo(comparisons)
    with pytest.raises(ValueError, match=message):
        bradley_terry(comparisons)


# --- Elo -----------------------------------------------------------------------------------


def elo_sequential(
    comparisons: list[Comparison], *, k: float = 32.0, initial: float = 1500.0
) -> dict[str, float]:
    """LLMEval-Fair app. D written out, one comparison after the other in the order given:
    the specification that every permutation of :func:`elo` must meet."""
    ratings: dict[str, float] = {}
    for c in comparisons:
        ra = ratings.setdefault(c.model_a, initial)
        rb = ratings.setdefault(c.model_b, initial)
        delta = k * (c.score_a - expected_score(ra, rb))
        ratings[c.model_a] = ra + delta
        ratings[c.model_b] = rb - delta
    return ratings


def test_expected_score_is_eq3() -> None:
    assert expected_score(1500, 1500) == 0.5
    assert expected_score(1900, 1500) == pytest.approx(10 / 11)  # 400 points: odds 10:1
    assert expected_score(1500, 1900) == pytest.approx(1 / 11)
    assert expected_score(1600, 1520) + expected_score(1520, 1600) == pytest.approx(1.0)


def test_elo_hand_computed_sequence() -> None:
    # 1. a beats b at 1500 each: E_a = 0.5, a = 1500 + 32 * 0.5 = 1516, b = 1484.
    # 2. b beats a: E_b = 1 / (1 + 10^(32/400)) = 0.4540780772; delta = 32 * (1 - E_b)
    #    = 17.4695015290: b = 1501.4695015290, a = 1498.5304984710.
    # 3. a ties c (new, 1500): E_a = 1 / (1 + 10^((1500 - 1498.5304984710)/400))
    #    = 0.4978852299; delta = 32 * (0.5 - E_a) = 0.0676726428:
    #    a = 1498.5981711138, c = 1499.9323273572.
    ratings = elo_sequential(
        [Comparison("a", "b", 1.0), Comparison("b", "a", 1.0), Comparison("a", "c", 0.5)]
    )
    assert list(ratings) == ["a", "b", "c"]
    assert ratings["a"] == pytest.approx(1498.5981711138, abs=1e-9)
    assert ratings["b"] == pytest.approx(1501.4695015290, abs=1e-9)
    assert ratings["c"] == pytest.approx(1499.9323273572, abs=1e-9)
    assert elo_sequential([Comparison("a", "b", 1.0)], k=10, initial=1000) == {
        "a": 1005.0,
        "b": 995.0,
    }


outcomes = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([0.0, 0.5, 1.0])).filter(
        lambda t: t[0] != t[1]
    ),
    min_size=1,
    max_size=30,
)


def as_comparisons(raw: list[tuple[int, int, float]]) -> list[Comparison]:
    return [Comparison(f"m{a}", f"m{b}", s) for a, b, s in raw]


@FAST
@given(outcomes, st.floats(1, 64), st.floats(-3000, 3000))
def test_elo_invariances(raw: list[tuple[int, int, float]], k: float, shift: float) -> None:
    comps = as_comparisons(raw)
    base = elo_sequential(comps, k=k)
    # the sum of ratings never changes
    assert sum(base.values()) == pytest.approx(1500 * len(base), abs=1e-6)
    # describing a comparison from the other side changes nothing
    swapped = [Comparison(c.model_b, c.model_a, 1 - c.score_a) for c in comps]
    assert elo_sequential(swapped, k=k) == pytest.approx(base, abs=1e-9)
    # only rating differences matter: a shifted start shifts every rating
    shifted = elo_sequential(comps, k=k, initial=1500 + shift)
    assert {m: r - shift for m, r in shifted.items()} == pytest.approx(base, abs=1e-6)
    # reversing every outcome mirrors the ratings about the start
    reversed_ = elo_sequential([Comparison(c.model_a, c.model_b, 1 - c.score_a) for c in comps])
    plain = elo_sequential(comps)
    assert {m: 3000 - r for m, r in reversed_.items()} == pytest.approx(plain, abs=1e-6)
    # names do not matter
    renamed = elo_sequential(
        [Comparison("x" + c.model_a, "x" + c.model_b, c.score_a) for c in comps], k=k
    )
    assert list(renamed.values()) == pytest.approx(list(base.values()), abs=1e-12)


def test_elo_averages_the_documented_permutations() -> None:
    rng = np.random.default_rng(5)
    scores = {m: {q: int(rng.integers(0, 4)) for q in range(25)} for m in "abcd"}
    comps = comparisons_from_items(scores)
    result = elo(comps, k=24, permutations=7, rng=99)
    gen = np.random.default_rng(99)
    finals = [
        elo_sequential([comps[i] for i in gen.permutation(len(comps))], k=24) for _ in range(7)
    ]
    for model in result.ratings:
        values = [f[model] for f in finals]
        assert result.ratings[model] == pytest.approx(np.mean(values), abs=1e-9)
        assert result.std[model] == pytest.approx(np.std(values, ddof=1), abs=1e-9)
    assert sum(result.ratings.values()) == pytest.approx(4 * 1500)
    assert (result.permutations, result.n_comparisons, result.k) == (7, len(comps), 24.0)
    assert elo(comps, permutations=7, rng=99, k=24) == result  # seeded: reproducible


def test_elo_chunks_permutations_consistently(monkeypatch: pytest.MonkeyPatch) -> None:
    comps = as_comparisons([(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.0), (0, 3, 1.0)] * 3)
    whole = elo(comps, permutations=9, rng=1)
    monkeypatch.setattr(pairwise, "_CHUNK_ELEMENTS", 25)  # two permutations per chunk
    chunked = elo(comps, permutations=9, rng=1)
    assert chunked.ratings == pytest.approx(whole.ratings, abs=1e-9)
    assert chunked.std == pytest.approx(whole.std, abs=1e-9)
    single = elo(comps, permutations=1, rng=1)
    assert all(math.isnan(v) for v in single.std.values())
    assert single.to_json()["std"] == dict.fromkeys(single.std)


def test_elo_order_randomisation_removes_order_effects() -> None:
    # a and b beat each other equally often; in any one order the later winner is ahead,
    # averaged over many orders they are level.
    comps = as_comparisons([(0, 1, 1.0)] * 20 + [(0, 1, 0.0)] * 20)
    one_order = elo_sequential(comps)
    assert one_order["m1"] - one_order["m0"] > 20
    averaged = elo(comps, permutations=400, rng=0)
    assert abs(averaged.ratings["m0"] - averaged.ratings["m1"]) < 5
    assert averaged.order in (("m0", "m1"), ("m1", "m0"))


def test_elo_parameter_errors() -> None:
    comps = [Comparison("a", "b", 1.0)]
    with pytest.raises(ValueError, match="permutations must be a positive integer"):
        elo(comps, permutations=0)
    with pytest.raises(ValueError, match="k must be a positive"):
        elo(comps, k=0)
    with pytest.raises(ValueError, match="initial must be a finite"):
        elo(comps, initial=math.inf)


# --- Bradley-Terry -------------------------------------------------------------------------


def design(comps: list[Comparison], models: list[str]) -> tuple[Any, Any, Any]:
    """Logistic-regression form: +1 for a, -1 for b; a tie is half a win and half a loss."""
    index = {m: i for i, m in enumerate(models)}
    rows, labels, weights = [], [], []
    for c in comps:
        x = np.zeros(len(models))
        x[index[c.model_a]], x[index[c.model_b]] = 1.0, -1.0
        for label, weight in ((1, c.score_a), (0, 1.0 - c.score_a)):
            if weight > 0:
                rows.append(x)
                labels.append(label)
                weights.append(weight)
    return np.array(rows), np.array(labels), np.array(weights)


def sklearn_reference(comps: list[Comparison], models: list[str]) -> Any:
    x, y, w = design(comps, models)
    # symmetric copies so that both classes are present whatever the data
    fit = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=100_000)
    fit.fit(np.vstack([x, -x]), np.concatenate([y, 1 - y]), sample_weight=np.concatenate([w, w]))
    theta = fit.coef_[0]
    return theta - theta.mean()


def scipy_reference(comps: list[Comparison], models: list[str]) -> Any:
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[c.model_a] for c in comps])
    b = np.array([index[c.model_b] for c in comps])
    s = np.array([c.score_a for c in comps])

    def nll(free: Any) -> Any:
        theta = np.append(free, -free.sum())  # sum of log-strengths 0
        d = theta[a] - theta[b]
        return -(s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)).sum()

    res = minimize(nll, np.zeros(len(models) - 1), method="BFGS", options={"gtol": 1e-10})
    return np.append(res.x, -res.x.sum())


def simulated(seed: int, n_models: int = 6, n_items: int = 60) -> list[Comparison]:
    rng = np.random.default_rng(seed)
    ability = np.linspace(-1, 1.5, n_models)
    scores = {
        f"m{i}": {q: int(np.clip(rng.normal(1.5 + ability[i], 1.2), 0, 3)) for q in range(n_items)}
        for i in range(n_models)
    }
    return comparisons_from_items(scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bradley_terry_matches_sklearn_and_scipy(seed: int) -> None:
    comps = simulated(seed)
    result = bradley_terry(comps)
    models = list(result.log_strengths)
    ours = np.array([result.log_strengths[m] for m in models])
    assert result.converged
    assert ours.sum() == pytest.approx(0.0, abs=1e-12)
    assert ours == pytest.approx(sklearn_reference(comps, models), abs=1e-6)
    assert ours == pytest.approx(scipy_reference(comps, models), abs=1e-6)
    assert result.order[0] == "m5" and result.order[-1] == "m0"


def test_bradley_terry_two_models_closed_form() -> None:
    # a wins 6, b wins 2, 2 ties: theta_a - theta_b = log(7 / 3)
    comps = as_comparisons([(0, 1, 1.0)] * 6 + [(1, 0, 1.0)] * 2 + [(0, 1, 0.5)] * 2)
    result = bradley_terry(comps)
    diff = result.log_strengths["m0"] - result.log_strengths["m1"]
    assert diff == pytest.approx(math.log(7 / 3), abs=1e-9)
    assert 1.0 / (1.0 + math.exp(-diff)) == pytest.approx(0.7, abs=1e-9)
    expected_ll = 7 * math.log(0.7) + 3 * math.log(0.3)
    assert result.log_likelihood == pytest.approx(expected_ll, abs=1e-9)
    assert result.to_json()["converged"] is True


@FAST
@given(outcomes.map(lambda raw: [*raw, (0, 1, 0.5), (1, 2, 0.5), (2, 3, 0.5), (3, 4, 0.5)]))
def test_bradley_terry_matches_scipy_on_random_connected_data(
    raw: list[tuple[int, int, float]],
) -> None:
    # the chain of ties links every model both ways, so the estimate exists
    comps = as_comparisons(raw)
    result = bradley_terry(comps)
    models = list(result.log_strengths)
    ours = np.array([result.log_strengths[m] for m in models])
    assert result.converged
    assert ours == pytest.approx(scipy_reference(comps, models), abs=1e-6)


def test_bradley_terry_needs_wins_both_ways() -> None:
    never_loses = as_comparisons([(0, 1, 1.0), (1, 2, 1.0), (2, 1, 1.0), (0, 2, 0.5)] * 2)
    bradley_terry(never_loses)  # m0 ties m2: connected both ways
    with pytest.raises(
        BradleyTerryError, match=r"models 'm0' never lose or tie against the other models"
    ):
        bradley_terry(as_comparisons([(0, 1, 1.0), (1, 2, 1.0), (2, 1, 1.0), (0, 2, 1.0)]))
    with pytest.raises(BradleyTerryError, match="are never compared with the other models"):
        bradley_terry(as_comparisons([(0, 1, 1.0), (1, 0, 1.0), (2, 3, 0.5)]))
    with pytest.raises(ValueError, match="tol must be"):
        bradley_terry(never_loses, tol=0)


def test_bradley_terry_and_elo_agree_on_clear_data() -> None:
    comps = simulated(3, n_models=5, n_items=200)
    assert bradley_terry(comps).order == elo(comps, permutations=20, rng=0).order
