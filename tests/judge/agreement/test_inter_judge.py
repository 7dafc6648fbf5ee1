"""Agreement of several judges on the same answers (judge.agreement.inter_judge).

Pearson r is pinned to ``scipy.stats.pearsonr`` over the answers both judges scored.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from judge.agreement import Rating, disagreements, inter_judge_agreement
from judge.agreement.inter_judge import JudgeScores, pearson_r, scores_by_answer


def panel_scores(seed: int, n: int = 80, missing: float = 0.2) -> dict[str, dict[str, int]]:
    """Three judges scoring ``n`` answers around a shared truth, each skipping some."""
    gen = np.random.default_rng(seed)
    truth = gen.integers(0, 4, size=n)
    out: dict[str, dict[str, int]] = {}
    for judge, noise in (("alpha", 0.1), ("beta", 0.3), ("gamma", 0.6)):
        noisy = np.where(gen.random(n) < noise, gen.integers(0, 4, size=n), truth)
        scored = gen.random(n) >= missing
        for i in np.flatnonzero(scored):
            out.setdefault(f"a{i:03d}", {})[judge] = int(noisy[i])
    return out


@pytest.mark.parametrize("seed", range(5))
def test_pairs_match_scipy_over_common_answers(seed: int) -> None:
    scores = panel_scores(seed)
    result = inter_judge_agreement(scores)
    assert result.judges == ("alpha", "beta", "gamma")
    assert list(result.pairs) == ["alpha vs beta", "alpha vs gamma", "beta vs gamma"]
    for pair in result.pairs.values():
        common = [s for s in scores.values() if pair.first in s and pair.second in s]
        x = [s[pair.first] for s in common]
        y = [s[pair.second] for s in common]
        assert pair.n == len(common) < len(scores)  # missing scores are skipped pairwise
        assert pair.pearson_r == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
        assert pair.exact == pytest.approx(np.mean(np.equal(x, y)), abs=1e-12)
    pairs = list(result.pairs.values())
    assert result.mean_pearson_r == pytest.approx(np.mean([p.pearson_r for p in pairs]))
    assert result.mean_exact == pytest.approx(np.mean([p.exact for p in pairs]))
    # The least noisy pair agrees most.
    assert result.pairs["alpha vs beta"].pearson_r > result.pairs["beta vs gamma"].pearson_r


def test_undefined_pairs_are_nan_and_left_out_of_the_means() -> None:
    scores: JudgeScores = {
        "q1": {"a": 3, "b": 3, "c": 0},
        "q2": {"a": 3, "b": 2, "c": None},  # None: c has not scored q2
        "q3": {"a": 3, "b": 1},
        "q4": {"b": 0, "d": 2},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = inter_judge_agreement(scores, judges=["a", "b", "c", "d", "e"])
    pairs = result.pairs
    assert math.isnan(pairs["a vs b"].pearson_r)  # a is constant
    assert pairs["a vs b"].exact == pytest.approx(1 / 3) and pairs["a vs b"].n == 3
    assert math.isnan(pairs["a vs c"].pearson_r) and pairs["a vs c"].n == 1
    assert pairs["a vs c"].exact == 0.0
    assert pairs["a vs e"].n == 0 and math.isnan(pairs["a vs e"].exact)
    assert math.isnan(result.mean_pearson_r)  # no pair has a defined r
    defined = [p.exact for p in pairs.values() if p.n]
    assert result.mean_exact == pytest.approx(sum(defined) / len(defined))
    assert result.to_json()["mean_pearson_r"] is None
    assert result.to_json()["pairs"]["a vs e"] == {
        "first": "a",
        "second": "e",
        "pearson_r": None,
        "exact": None,
        "n": 0,
    }


def test_pearson_r_helper_matches_scipy_and_is_nan_when_undefined() -> None:
    gen = np.random.default_rng(3)
    x, y = gen.integers(0, 4, 50).tolist(), gen.integers(0, 4, 50).tolist()
    assert pearson_r(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
    assert pearson_r([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson_r([1], [2]))
    assert math.isnan(pearson_r([2, 2, 2], [0, 1, 3]))


def test_disagreements_by_gap() -> None:
    scores: JudgeScores = {
        "q1": {"a": 3, "b": 0, "c": 3},
        "q2": {"a": 2, "b": 1},
        "q3": {"a": 1, "b": 3, "c": None},
        "q4": {"a": 0},
        "q5": {"b": 2, "a": 2, "c": 0},
        "q6": {"a": 3, "b": 3},
    }
    found = disagreements(scores)
    assert [(d.answer_id, d.gap) for d in found] == [("q1", 3), ("q3", 2), ("q5", 2)]
    assert found[2].scores == {"a": 2, "b": 2, "c": 0}
    assert list(found[1].scores) == ["a", "b"]  # the unscored judge is left out
    assert [d.answer_id for d in disagreements(scores, min_gap=1)] == ["q1", "q3", "q5", "q2"]
    assert disagreements(scores, min_gap=3)[0].to_json() == {
        "answer_id": "q1",
        "scores": {"a": 3, "b": 0, "c": 3},
        "gap": 3,
    }


@pytest.mark.parametrize(
    "scores",
    [
        {"q1": {"a": 4, "b": 0}},
        {"q1": {"a": True, "b": 0}},
        {"q1": {"a": 2.0, "b": 0}},
        {"q1": {"a": -1, "b": 0}},
    ],
)
def test_invalid_scores_raise(scores: JudgeScores) -> None:
    with pytest.raises(ValueError):
        inter_judge_agreement(scores)
    with pytest.raises(ValueError):
        disagreements(scores)


def test_min_gap_must_be_positive() -> None:
    with pytest.raises(ValueError):
        disagreements({}, min_gap=0)


def test_scores_by_answer_from_ratings() -> None:
    ratings = [
        Rating("q2", "human", 3),
        Rating("q1", "judge-a", 2),
        Rating("q1", "judge-b", 1),
        Rating("q2", "judge-a", 3),
    ]
    assert scores_by_answer(ratings) == {
        "q1": {"judge-a": 2, "judge-b": 1},
        "q2": {"human": 3, "judge-a": 3},
    }
    assert scores_by_answer(ratings, judges=["judge-a", "judge-b"]) == {
        "q1": {"judge-a": 2, "judge-b": 1},
        "q2": {"judge-a": 3},
    }
