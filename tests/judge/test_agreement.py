"""Judge calibration statistics, pinned to scikit-learn and scipy (LLMEval-Fair §3.4, app. L)."""

from __future__ import annotations

import io
import json
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from judge.agreement import (
    AgreementInputError,
    RaterAgreement,
    Rating,
    agreement_report,
    cohen_kappa,
    default_judge,
    exact_agreement,
    ranking_agreement,
    rater_agreement,
    read_ratings_csv,
    render_tables,
    within_one_agreement,
)

LABELS = [0, 1, 2, 3]
WEIGHTS: list[Any] = [None, "linear", "quadratic"]
TOL = 1e-9
FAST = settings(max_examples=150, deadline=None, derandomize=True)


def same(ours: float, theirs: float) -> bool:
    """Equal to 1e-9, or both NaN."""
    if math.isnan(theirs):
        return math.isnan(ours)
    return not math.isnan(ours) and abs(ours - theirs) <= TOL


def sk_kappa(a: Any, b: Any, weights: Any = None, labels: Any = None) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns where it returns NaN
        return float(cohen_kappa_score(a, b, labels=labels or LABELS, weights=weights))


@contextmanager
def no_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


score_pairs = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=80)


# --------------------------------------------------------------------------- #
# Cohen's kappa against scikit-learn
# --------------------------------------------------------------------------- #


@FAST
@given(pairs=score_pairs, weights=st.sampled_from(WEIGHTS))
def test_kappa_matches_sklearn_on_random_pairs(pairs: list[tuple[int, int]], weights: Any) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    with no_warnings():
        ours = cohen_kappa(a, b, weights=weights)
    assert same(ours, sk_kappa(a, b, weights)), (ours, sk_kappa(a, b, weights))


@FAST
@given(
    pairs=st.lists(st.tuples(st.sampled_from([0, 1, 3]), st.sampled_from([0, 1, 3])), min_size=1),
    weights=st.sampled_from(WEIGHTS),
)
def test_kappa_matches_sklearn_with_an_unused_label(
    pairs: list[tuple[int, int]], weights: Any
) -> None:
    # A label nobody uses still counts in the weights' positions (2 sits between 1 and 3).
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    with no_warnings():
        ours = cohen_kappa(a, b, weights=weights)
    assert same(ours, sk_kappa(a, b, weights))


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("weights", WEIGHTS)
def test_kappa_matches_sklearn_on_large_correlated_samples(seed: int, weights: Any) -> None:
    rng = np.random.default_rng(seed)
    human = rng.choice(4, size=2000, p=[0.1, 0.15, 0.3, 0.45])
    noise = rng.choice([-2, -1, 0, 0, 0, 0, 1], size=2000)
    judge = np.clip(human + noise, 0, 3)
    ours = cohen_kappa(human, judge, weights=weights)
    assert same(ours, sk_kappa(human, judge, weights))
    assert 0.2 < ours < 1.0  # correlated raters: a sanity bound that a sign error would break


def test_kappa_with_other_labels_matches_sklearn() -> None:
    a, b = [1, 2, 3, 3, 2, 1, 3], [1, 3, 3, 2, 2, 1, 1]
    for weights in WEIGHTS:
        ours = cohen_kappa(a, b, weights=weights, labels=(1, 2, 3))
        assert same(ours, sk_kappa(a, b, weights, labels=[1, 2, 3]))


def test_kappa_hand_computed() -> None:
    # p_o = 3/4; marginals (1,1,1,1) and (1,1,2,0): p_e = (1 + 1 + 2 + 0) / 16 = 1/4.
    assert cohen_kappa([0, 1, 2, 3], [0, 1, 2, 2]) == pytest.approx(2 / 3, abs=1e-12)
    # Quadratic: observed mean disagreement 1/4; expected sum_ij (i-j)^2 r_i c_j / n^2
    # = (9 + 3 + 5 + 15) / 16 = 2.
    assert cohen_kappa([0, 1, 2, 3], [0, 1, 2, 2], weights="quadratic") == pytest.approx(
        1 - (1 / 4) / 2, abs=1e-12
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([3, 3, 3], [3, 3, 3], math.nan),  # one label in common: no expected disagreement
        ([2], [2], math.nan),
        ([3, 3, 3], [2, 2, 2], 0.0),  # constant but different: agreement exactly chance
        ([0, 3], [3, 0], -1.0),
        ([0, 1, 2, 3], [0, 1, 2, 3], 1.0),
        ([3, 3, 3, 2], [3, 3, 3, 3], 0.0),
    ],
)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_kappa_degenerate_cases_match_sklearn_without_warnings(
    a: list[int], b: list[int], expected: float, weights: Any
) -> None:
    with no_warnings():
        ours = cohen_kappa(a, b, weights=weights)
    assert same(ours, expected)
    assert same(ours, sk_kappa(a, b, weights))


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "message"),
    [
        ([1, 2], [1], {}, "differ in length"),
        ([], [], {}, "no scores"),
        ([1, 4], [1, 2], {}, "score 4 is not one of the labels"),
        ([1, 2], [1, 2], {"weights": "cubic"}, "weights must be"),
        ([1, 2], [1, 2], {"labels": (1, 1, 2)}, "distinct"),
    ],
)
def test_kappa_refuses_bad_input(
    a: list[int], b: list[int], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        cohen_kappa(a, b, **kwargs)


@FAST
@given(pairs=score_pairs)
def test_exact_and_within_one_count_pairs(pairs: list[tuple[int, int]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    equal = sum(1 for x, y in pairs if x == y)
    close = sum(1 for x, y in pairs if x - 1 <= y <= x + 1)
    assert exact_agreement(a, b) == pytest.approx(equal / len(pairs), abs=1e-12)
    assert within_one_agreement(a, b) == pytest.approx(close / len(pairs), abs=1e-12)


def test_exact_and_within_one_by_hand() -> None:
    a, b = [0, 1, 2, 3, 3], [0, 2, 0, 3, 1]
    assert exact_agreement(a, b) == pytest.approx(2 / 5)
    assert within_one_agreement(a, b) == pytest.approx(3 / 5)  # |2-0| and |3-1| are 2
    with pytest.raises(ValueError):
        exact_agreement([], [])
    with pytest.raises(ValueError):
        within_one_agreement([1], [1, 2])


def test_rater_agreement_bundles_the_statistics() -> None:
    a, b = [0, 1, 2, 3, 3, 2], [0, 2, 2, 3, 1, 2]
    result = rater_agreement(a, b)
    assert result.n == 6
    assert same(result.kappa, sk_kappa(a, b))
    assert same(result.weighted_kappa, sk_kappa(a, b, "quadratic"))
    assert result.exact == pytest.approx(4 / 6)
    assert result.within_one == pytest.approx(5 / 6)
    empty = rater_agreement([], [])
    assert empty.n == 0 and math.isnan(empty.kappa) and math.isnan(empty.exact)


# --------------------------------------------------------------------------- #
# Rank correlations against scipy
# --------------------------------------------------------------------------- #


@FAST
@given(
    pairs=st.lists(
        st.tuples(
            st.integers(0, 30).map(lambda v: v / 10), st.integers(0, 30).map(lambda v: v / 10)
        ),
        min_size=2,
        max_size=15,
    )
)
def test_ranking_agreement_matches_scipy(pairs: list[tuple[float, float]]) -> None:
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    with no_warnings():
        ours = ranking_agreement(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input
        rho = stats.spearmanr(x, y)
        tau = stats.kendalltau(x, y)
    assert ours.n_models == len(pairs)
    assert same(ours.spearman, float(rho.statistic))
    assert same(ours.kendall, float(tau.statistic))
    assert same(ours.spearman_p, float(rho.pvalue))
    assert same(ours.kendall_p, float(tau.pvalue))


def test_ranking_agreement_constant_is_nan_without_warnings() -> None:
    with no_warnings():
        result = ranking_agreement([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])
    assert math.isnan(result.spearman) and math.isnan(result.kendall_p)
    with pytest.raises(ValueError, match="at least two"):
        ranking_agreement([1.0], [1.0])


# --------------------------------------------------------------------------- #
# The report
# --------------------------------------------------------------------------- #

JUDGES = {"doubao": 0.55, "gemini": 0.6, "gpt-4o": 0.85}  # chance of copying the human score


def synthetic_ratings(seed: int, *, models: int = 6, answers: int = 40) -> list[Rating]:
    """Human plus three judges on ``models * answers`` answers, ~10% of ratings missing."""
    rng = np.random.default_rng(seed)
    ratings: list[Rating] = []
    for m in range(models):
        skill = rng.uniform(0.2, 0.9)
        for i in range(answers):
            answer = f"m{m}-a{i}"
            truth = int(rng.binomial(3, skill))
            model, family = f"model-{m}", ["OpenAI", "Google", "ByteDance"][m % 3]
            for rater, copy in [("human", 1.0), *JUDGES.items()]:
                if rater != "human" and rng.random() < 0.1:
                    continue
                if rng.random() < copy:
                    score = truth
                else:
                    score = int(np.clip(truth + rng.choice([-1, 1, 2]), 0, 3))
                ratings.append(Rating(answer, rater, score, model, family))
            if rng.random() < 0.1:  # an answer the human did not label
                ratings = [r for r in ratings if not (r.answer_id == answer and r.rater == "human")]
    return ratings


def by_rater(ratings: list[Rating]) -> dict[str, dict[str, Rating]]:
    table: dict[str, dict[str, Rating]] = {}
    for rating in ratings:
        table.setdefault(rating.rater, {})[rating.answer_id] = rating
    return table


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_report_matches_sklearn_and_scipy_recomputed_independently(seed: int) -> None:
    ratings = synthetic_ratings(seed)
    report = agreement_report(ratings)
    table = by_rater(ratings)
    human = table["human"]

    assert report.reference == "human"
    assert list(report.raters) == sorted(JUDGES)
    for judge in JUDGES:
        common = sorted(human.keys() & table[judge].keys())
        a = [human[k].score for k in common]
        b = [table[judge][k].score for k in common]
        result = report.raters[judge]
        assert result.n == len(common) < 240  # missing ratings are left out
        assert same(result.kappa, sk_kappa(a, b))
        assert same(result.weighted_kappa, sk_kappa(a, b, "quadratic"))
        assert result.exact == pytest.approx(np.mean(np.equal(a, b)), abs=TOL)
        for model, per_rater in report.models.items():
            on_model = [k for k in common if human[k].model == model]
            a = [human[k].score for k in on_model]
            b = [table[judge][k].score for k in on_model]
            assert per_rater[judge].n == len(on_model)
            assert same(per_rater[judge].kappa, sk_kappa(a, b))
            assert same(per_rater[judge].weighted_kappa, sk_kappa(a, b, "quadratic"))

    # The better-copying judge agrees more: a wrong pairing of raters would break this.
    assert report.raters["gpt-4o"].kappa > report.raters["doubao"].kappa
    assert list(report.models) == [f"model-{m}" for m in range(6)]

    names = sorted(table)
    expected_pairs = {f"{x} vs {y}" for i, x in enumerate(names) for y in names[i + 1 :]}
    assert set(report.ranking_agreement) == expected_pairs
    assert "gpt-4o vs human" in expected_pairs  # the reference takes part, sorted by name
    for pair, ranking in report.ranking_agreement.items():
        first, second = pair.split(" vs ")
        shared = table[first].keys() & table[second].keys()
        models = sorted({str(table[first][k].model) for k in shared})
        mean_a = [
            np.mean([table[first][k].score for k in shared if table[first][k].model == m])
            for m in models
        ]
        mean_b = [
            np.mean([table[second][k].score for k in shared if table[first][k].model == m])
            for m in models
        ]
        rho, tau = stats.spearmanr(mean_a, mean_b), stats.kendalltau(mean_a, mean_b)
        assert ranking.n_models == len(models) == 6
        assert same(ranking.spearman, float(rho.statistic))
        assert same(ranking.spearman_p, float(rho.pvalue))
        assert same(ranking.kendall, float(tau.statistic))
        assert same(ranking.kendall_p, float(tau.pvalue))


def test_ranking_needs_min_models() -> None:
    ratings = [r for r in synthetic_ratings(5, models=3, answers=10) if r.model != "model-2"]
    assert {r.model for r in ratings} == {"model-0", "model-1"}
    assert len(agreement_report(ratings).ranking_agreement) == 6  # 4 raters, 6 pairs
    assert agreement_report(ratings, min_models=3).ranking_agreement == {}
    with pytest.raises(ValueError, match="min_models"):
        agreement_report(ratings, min_models=1)


def test_answers_without_model_count_for_raters_only() -> None:
    ratings = [
        Rating("a1", "human", 3, "m1"),
        Rating("a1", "judge", 3),  # model known from the human's row
        Rating("a2", "human", 1),
        Rating("a2", "judge", 2),
        Rating("a3", "human", 0, "m2"),
        Rating("a3", "judge", 0, "m2"),
    ]
    report = agreement_report(ratings)
    assert report.raters["judge"].n == 3
    assert {m: r["judge"].n for m, r in report.models.items()} == {"m1": 1, "m2": 1}
    assert report.ranking_agreement["human vs judge"].n_models == 2


def test_report_refuses_inconsistent_ratings() -> None:
    with pytest.raises(ValueError, match="reference rater 'human' scored no answer"):
        agreement_report([Rating("a", "judge", 1)])
    with pytest.raises(ValueError, match="twice with different scores: 1 and 2"):
        agreement_report([Rating("a", "human", 1), Rating("a", "human", 2)])
    with pytest.raises(ValueError, match="not an integer 0-3"):
        agreement_report([Rating("a", "human", 4)])
    with pytest.raises(ValueError, match="model 'm1' and 'm2'"):
        agreement_report([Rating("a", "human", 1, "m1"), Rating("a", "judge", 1, "m2")])
    # An identical repeat is harmless.
    report = agreement_report([Rating("a", "human", 1), Rating("a", "human", 1)])
    assert report.raters == {}


# --------------------------------------------------------------------------- #
# Family bias (LLMEval-Fair (Zhang et al.) app. L, table 14)
# --------------------------------------------------------------------------- #


def test_family_bias_hand_computed() -> None:
    rows = [  # answer, model, family, scores by human / gpt / qwen-judge / gemini
        ("a1", "gpt-x", "OpenAI", {"human": 0, "gpt": 3, "qwen-judge": 2, "gemini": 1}),
        ("a2", "gpt-x", "OpenAI", {"human": 0, "gpt": 2, "qwen-judge": 1}),
        ("a3", "qwen", "Alibaba", {"human": 0, "gpt": 1, "qwen-judge": 3, "gemini": 2}),
    ]
    ratings = [
        Rating(answer, rater, score, model, family)
        for answer, model, family, scores in rows
        for rater, score in scores.items()
    ]
    families = {
        "gpt": "OpenAI",
        "qwen-judge": "Alibaba",
        "human": "OpenAI",  # the reference gets no entry
        "ghost": "Google",  # not a rater
        "orphan": "Meta",
    }
    report = agreement_report(
        [*ratings, Rating("a1", "orphan", 2, "gpt-x", "OpenAI")], families=families
    )
    assert set(report.family_bias) == {"gpt", "qwen-judge", "orphan"}
    gpt = report.family_bias["gpt"]
    # own: (3 + 2) / 2; all judges on a1, a2 (human left out): (3 + 2 + 1 + 2 + 1 + 2) / 6
    assert (gpt.family, gpt.n) == ("OpenAI", 2)
    assert gpt.own_mean == pytest.approx(2.5)
    assert gpt.all_judge_mean == pytest.approx(11 / 6)
    assert gpt.delta == pytest.approx(2.5 - 11 / 6)
    qwen = report.family_bias["qwen-judge"]
    # own: 3; all judges on a3: (1 + 3 + 2) / 3
    assert (qwen.own_mean, qwen.all_judge_mean, qwen.n) == (3.0, 2.0, 1)
    assert qwen.delta == pytest.approx(1.0)
    orphan = report.family_bias["orphan"]  # no Meta answers
    assert orphan.n == 0 and math.isnan(orphan.delta)
    assert report.to_json()["family_bias"]["orphan"] == {
        "family": "Meta",
        "own_mean": None,
        "all_judge_mean": None,
        "delta": None,
        "n": 0,
    }


def _scores(total: int, n: int = 100) -> list[int]:
    """``n`` scores of 2 or 3 adding up to ``total``."""
    threes = total - 2 * n
    assert 0 <= threes <= n
    return [3] * threes + [2] * (n - threes)


def test_family_bias_reconstructs_table_14() -> None:
    # LLMEval-Fair table 14: own-family average vs three-judge mean on 100 answers per family.
    # Sums per judge (own judge first): OpenAI 247 / 235 / 235 -> 2.47 vs 717 / 300 = 2.39;
    # ByteDance 268 / 278 / 279 -> 2.68 vs 2.75; Google 279 / 261 / 261 -> 2.79 vs 2.67.
    judges = {"GPT-4o": "OpenAI", "Doubao": "ByteDance", "Gemini": "Google"}
    sums = {
        "OpenAI": {"GPT-4o": 247, "Doubao": 235, "Gemini": 235},
        "ByteDance": {"Doubao": 268, "GPT-4o": 278, "Gemini": 279},
        "Google": {"Gemini": 279, "GPT-4o": 261, "Doubao": 261},
    }
    ratings: list[Rating] = []
    for family, per_judge in sums.items():
        for judge, total in per_judge.items():
            for i, score in enumerate(_scores(total)):
                ratings.append(Rating(f"{family}-{i}", judge, score, f"{family}-model", family))
        # Human labels of 0 would drag the all-judge mean down if the reference were counted.
        ratings += [
            Rating(f"{family}-{i}", "human", 0, f"{family}-model", family) for i in range(100)
        ]

    report = agreement_report(ratings, families=judges)
    table_14 = {
        "GPT-4o": (2.47, 2.39, +0.08),
        "Doubao": (2.68, 2.75, -0.07),
        "Gemini": (2.79, 2.67, +0.12),
    }
    for judge, (own, everyone, delta) in table_14.items():
        bias = report.family_bias[judge]
        assert (bias.family, bias.n) == (judges[judge], 100)
        assert bias.own_mean == pytest.approx(own, abs=1e-12)
        assert bias.all_judge_mean == pytest.approx(everyone, abs=1e-12)
        assert bias.delta == pytest.approx(delta, abs=1e-12)
        assert round(bias.delta, 2) == delta
    assert max(abs(b.delta) for b in report.family_bias.values()) == pytest.approx(0.12)


# --------------------------------------------------------------------------- #
# JSON, default judge, tables
# --------------------------------------------------------------------------- #


def test_to_json_shape_and_nan_as_null() -> None:
    ratings = synthetic_ratings(21, models=3, answers=15)
    # A rater who always agrees on a constant score has an undefined kappa.
    ratings += [
        Rating(f"c{i}", rater, 3, "const", "X") for i in range(5) for rater in ("human", "flat")
    ]
    report = agreement_report(ratings, families={"gpt-4o": "OpenAI"})
    data = report.to_json()
    text = json.dumps(data, allow_nan=False)  # would raise on a NaN
    assert json.loads(text) == data
    assert set(data) == {
        "reference",
        "raters",
        "models",
        "ranking_agreement",
        "family_bias",
        "intervals",
    }
    assert set(data["intervals"]) == {"raters", "models", "families"}
    flat = data["intervals"]["raters"]["flat"]["plain"]  # undefined kappa: no interval
    assert flat["estimate"] is None and flat["low"] is None and flat["n"] == 5
    assert data["reference"] == "human"
    agreement_keys = {"kappa", "weighted_kappa", "exact", "within_one", "n"}
    assert all(set(v) == agreement_keys for v in data["raters"].values())
    assert all(set(v) == agreement_keys for m in data["models"].values() for v in m.values())
    assert data["raters"]["flat"] == {
        "kappa": None,
        "weighted_kappa": None,
        "exact": 1.0,
        "within_one": 1.0,
        "n": 5,
    }
    assert data["models"]["const"]["gpt-4o"]["n"] == 0
    assert data["models"]["const"]["gpt-4o"]["kappa"] is None
    ranking_keys = {"spearman", "spearman_p", "kendall", "kendall_p", "n_models"}
    assert all(set(v) == ranking_keys for v in data["ranking_agreement"].values())
    # flat and human share one model only; flat and the judges share no answer at all.
    assert not any("flat" in pair for pair in data["ranking_agreement"])
    assert "gpt-4o vs human" in data["ranking_agreement"]
    assert set(data["family_bias"]) == {"gpt-4o"}
    assert set(data["family_bias"]["gpt-4o"]) == {
        "family",
        "own_mean",
        "all_judge_mean",
        "delta",
        "n",
    }


def agreement(kappa: float, weighted: float = 0.5, n: int = 200) -> RaterAgreement:
    return RaterAgreement(kappa, weighted, 0.8, 0.9, n)


def test_default_judge() -> None:
    assert default_judge({"a": agreement(0.6), "b": agreement(0.9), "c": agreement(0.7)}) == "b"
    # Too few comparisons do not qualify, however good.
    assert default_judge({"a": agreement(0.6), "b": agreement(0.99, n=99)}) == "a"
    assert default_judge({"a": agreement(0.6), "b": agreement(0.99, n=99)}, min_n=50) == "b"
    assert default_judge({"a": agreement(0.6), "b": agreement(0.99, n=100)}) == "b"  # n == min_n
    # Ties: the weighted kappa, then the name.
    assert default_judge({"a": agreement(0.8, 0.7), "b": agreement(0.8, 0.9)}) == "b"
    assert default_judge({"b": agreement(0.8, 0.9), "a": agreement(0.8, 0.9)}) == "a"
    assert default_judge({"b": agreement(0.8, 0.9), "a": agreement(0.8, math.nan)}) == "b"
    # An undefined kappa never wins; nobody qualifying gives None.
    assert default_judge({"a": agreement(math.nan), "b": agreement(0.1)}) == "b"
    assert default_judge({"a": agreement(0.9, n=10)}) is None
    assert default_judge({}) is None


def test_default_judge_on_a_report_prefers_the_closest_judge() -> None:
    report = agreement_report(synthetic_ratings(3))
    assert default_judge(report.raters) == "gpt-4o"
    assert default_judge(report.raters, min_n=10_000) is None


def test_render_tables() -> None:
    report = agreement_report(
        [
            Rating("a1", "human", 0, "m1", "OpenAI"),
            Rating("a1", "gpt", 0, "m1", "OpenAI"),
            Rating("a2", "human", 1, "m1", "OpenAI"),
            Rating("a2", "gpt", 1, "m1", "OpenAI"),
            Rating("a3", "human", 2, "m2", "Google"),
            Rating("a3", "gpt", 2, "m2", "Google"),
            Rating("a4", "human", 3, "m2", "Google"),
            Rating("a4", "gpt", 2, "m2", "Google"),
        ],
        families={"gpt": "OpenAI"},
    )
    tables = render_tables(report)
    assert len(tables) == 4
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for table in tables:
        console.print(table)
    text = out.getvalue()
    assert "Agreement with 'human'" in text
    assert f"{report.raters['gpt'].kappa:.3f}" in text
    assert "75.0%" in text and "100.0%" in text
    assert "gpt vs human" in text
    assert "+0.00" in text  # gpt is the only judge: own mean equals the all-judge mean
    assert "Family bias" in text
    # m1: human (0, 1) vs gpt (0, 1) agree perfectly
    m1 = report.models["m1"]["gpt"]
    assert m1.kappa == pytest.approx(1.0)
    # Only the first table when there is nothing per model.
    assert len(render_tables(agreement_report([Rating("a", "human", 1)]))) == 1


# --------------------------------------------------------------------------- #
# CSV input
# --------------------------------------------------------------------------- #


def write(tmp_path: Path, text: str, name: str = "ratings.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def read_errors(path: Path | str, **kwargs: Any) -> list[str]:
    with pytest.raises(AgreementInputError) as caught:
        read_ratings_csv(path, **kwargs)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == "\n".join(str(e) for e in caught.value.errors)
    return [str(e) for e in caught.value.errors]


def test_read_valid_csv(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeffanswer_id, rater ,score,model,model_family,comment\r\n"
        "a1,human,3,gpt-x,OpenAI,fine\r\n"
        "\r\n"
        " a1 , gpt-4o , 2 ,,,\r\n"
        'a2,human,0,"qwen\nmax",,"multi\nline"\r\n'
        "a2,human,0,,,same score again: kept once\r\n",
    )
    assert read_ratings_csv(path) == [
        Rating("a1", "human", 3, "gpt-x", "OpenAI"),
        Rating("a1", "gpt-4o", 2, None, None),
        Rating("a2", "human", 0, "qwen\nmax", None),
    ]
    minimal = write(tmp_path, "rater,answer_id,score\nhuman,x,1\n", "minimal.csv")
    assert read_ratings_csv(minimal) == [Rating("x", "human", 1)]


def test_csv_row_errors_name_file_line_and_field_and_are_all_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "answer_id,rater,score,model\n"  # 1
        "a1,human,3,m1\n"  # 2
        "a1,judge,x,m1\n"  # 3
        '"a2",human,5,"long\n'  # 4
        'name"\n'  # 5
        ",judge,2,m1\n"  # 6
        "a3,judge,4,m1\n"  # 7
        "a3,human,2.0,m1\n"  # 8
        "a4,human\n"  # 9
        "a1,human,2,m1\n"  # 10
        "a1,judge,1,m2\n",  # 11
    )
    monkeypatch.chdir(tmp_path)
    assert read_errors("ratings.csv") == [
        "ratings.csv:3: score: 'x' is not an integer 0-3",
        "ratings.csv:4: score: '5' is not an integer 0-3",
        "ratings.csv:6: answer_id: is empty",
        "ratings.csv:7: score: '4' is not an integer 0-3",
        "ratings.csv:8: score: '2.0' is not an integer 0-3",
        "ratings.csv:9: row: has 2 fields, the header has 4",
        "ratings.csv:10: score: rater 'human' scored answer 'a1' twice with different scores:"
        " 3 on line 2, 2 on line 10",
        "ratings.csv:11: model: answer 'a1' has model 'm2' here but 'm1' on line 2",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["ratings.csv: file: is empty; expected a header answer_id,rater,score"]),
        ("\n  \n", ["ratings.csv: file: is empty; expected a header answer_id,rater,score"]),
        ("answer_id,rater,score\n", ["ratings.csv:1: file: has a header but no ratings"]),
        (
            "answer_id,judge,points\nx,human,1\n",
            [
                "ratings.csv:1: rater: required column is missing (header: answer_id,judge,points)",
                "ratings.csv:1: score: required column is missing (header: answer_id,judge,points)",
            ],
        ),
        (
            "\nanswer_id,rater,score,score\n",
            ["ratings.csv:2: score: column appears 2 times in the header"],
        ),
        (
            "answer_id,rater,score\na,gpt-4o,1\nb,gemini,2\n",
            [
                "ratings.csv: rater: the reference rater 'human' scores no answer"
                " (raters: gemini, gpt-4o)"
            ],
        ),
        (
            'answer_id,rater,score\na,human,1\n"b,human,2\n',
            ["ratings.csv:3: csv: unexpected end of data"],
        ),
        (
            'answer_id,rater,score\na,human,1\n"b"x,human,2\nc,human,9\n',
            ["ratings.csv:3: csv: ',' expected after '\"'"],
        ),
    ],
)
def test_csv_file_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: list[str]
) -> None:
    write(tmp_path, text)
    monkeypatch.chdir(tmp_path)
    assert read_errors("ratings.csv") == expected


def test_csv_reference_present_only_in_bad_rows_is_not_called_absent(tmp_path: Path) -> None:
    path = write(tmp_path, "answer_id,rater,score\na,human,9\na,judge,1\n")
    assert read_errors(path) == [f"{path}:2: score: '9' is not an integer 0-3"]


def test_csv_other_reference_and_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "answer_id,rater,score\na,expert,1\n")
    assert read_ratings_csv(path, reference="expert") == [Rating("a", "expert", 1)]
    assert read_errors(path) == [
        f"{path}: rater: the reference rater 'human' scores no answer (raters: expert)"
    ]
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(b"answer_id,rater,score\na,human,1\nb,caf\xe9,2\n")
    assert read_errors(bad) == [f"{bad}:3: file: not valid UTF-8"]


def test_csv_many_errors_are_all_on_the_exception(tmp_path: Path) -> None:
    rows = "".join(f"a{i},human,{4 + i}\n" for i in range(60))
    path = write(tmp_path, "answer_id,rater,score\n" + rows)
    with pytest.raises(AgreementInputError) as caught:
        read_ratings_csv(path)
    assert len(caught.value.errors) == 60
    assert [e.line for e in caught.value.errors] == list(range(2, 62))
    assert str(caught.value).endswith("... and 10 more")


def test_csv_to_report(tmp_path: Path) -> None:
    lines = ["answer_id,rater,score,model,model_family"]
    lines += [
        f"{r.answer_id},{r.rater},{r.score},{r.model},{r.model_family}"
        for r in synthetic_ratings(7)
    ]
    path = write(tmp_path, "\n".join(lines) + "\n")
    from_file = agreement_report(read_ratings_csv(path), families={"gpt-4o": "OpenAI"})
    direct = agreement_report(synthetic_ratings(7), families={"gpt-4o": "OpenAI"})
    assert from_file.to_json() == direct.to_json()
