"""The sequential difference estimator (Des Raj's, with predictions): exact checks by
enumerating every draw the selection can make, and the estimator's edge cases."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from bank.adaptive.difference import (
    MIN_DRAW_VARIANCE,
    MIN_ITEM_VARIANCE,
    PRIOR_DRAWS,
    StratumDraw,
    draw_weight,
    stratum_estimate,
)
from bank.adaptive.selection import selection_probabilities


def _draw(
    predicted: Sequence[float],
    unseen: Sequence[int],
    pick: int,
    score: float | None,
    *,
    floor: float,
) -> StratumDraw:
    """The record of drawing item ``pick`` among ``unseen``, made the way the policy makes
    it: q from :func:`selection_probabilities`, the weight from :func:`draw_weight`."""
    p = [predicted[j] for j in unseen]
    q = selection_probabilities(p, floor=floor)
    k = list(unseen).index(pick)
    return StratumDraw(
        probability=float(q[k]),
        predicted=p[k],
        unseen_predicted=math.fsum(p),
        weight=draw_weight(p, q.tolist()),
        score=score,
    )


def _sequences(
    predicted: Sequence[float], scores: Sequence[float], n: int, *, floor: float
) -> Iterator[tuple[float, list[StratumDraw]]]:
    """Every ordered sequence of ``n`` draws without replacement, with its probability
    under the selection and the records it leaves (fixed predictions)."""
    size = len(predicted)
    for sequence in itertools.permutations(range(size), n):
        probability = 1.0
        unseen = list(range(size))
        draws = []
        for item in sequence:
            draw = _draw(predicted, unseen, item, scores[item], floor=floor)
            probability *= draw.probability
            draws.append(draw)
            unseen.remove(item)
        yield probability, draws


def _t(draw: StratumDraw, seen: float) -> float:
    """t_k of the module docstring: seen + sum of unseen predictions + (y - p) / q."""
    assert draw.score is not None
    return seen + draw.unseen_predicted + (draw.score - draw.predicted) / draw.probability


# --------------------------------------------------------------------- unbiasedness


@pytest.mark.parametrize("seed", range(12))
def test_each_draw_is_unbiased_given_the_past(seed: int) -> None:
    """E[t_k | past] = T exactly: for a random stratum (3-12 items, predictions anywhere
    in [0, 1] including 0 and 1 and unrelated to the scores, fractional scores), a random
    past of already drawn items and a floor from 0.01 to 1, the sum over every unseen
    item j of q_k(j) times the t_k drawing j leaves equals the stratum's true total.

    t_k is read off :func:`stratum_estimate`, the mean of the t_k: the last draw's is
    n That_n - (n - 1) That_{n-1}."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(3, 13))
    predicted = rng.choice([0.0, 1.0, 0.5, *rng.random(5).tolist()], size).tolist()
    scores = rng.choice([0.0, 1 / 3, 2 / 3, 1.0], size).tolist()
    floor = float(rng.choice([0.01, 0.05, 0.2, 1.0]))
    past = rng.permutation(size)[: int(rng.integers(0, size - 1))].tolist()
    unseen = [j for j in range(size) if j not in past]
    history = []
    remaining = list(range(size))
    for item in past:
        draw = _draw(predicted, remaining, item, scores[item], floor=floor)
        history.append(draw)
        remaining.remove(item)
    assert remaining == unseen and len(unseen) >= 2

    expected = 0.0
    q = selection_probabilities([predicted[j] for j in unseen], floor=floor)
    for item, q_item in zip(unseen, q.tolist(), strict=True):
        draw = _draw(predicted, unseen, item, scores[item], floor=floor)
        estimate = stratum_estimate([*history, draw], size=size)
        before = stratum_estimate(history, size=size)
        assert estimate is not None
        n = len(history) + 1
        read = n * estimate.total - (n - 1) * (before.total if before is not None else 0.0)
        t_k = _t(draw, math.fsum(scores[j] for j in past))
        assert read == pytest.approx(t_k, abs=1e-8)
        expected += q_item * t_k
    assert q.sum() == pytest.approx(1.0, abs=1e-12)
    assert expected == pytest.approx(math.fsum(scores), abs=1e-8)


@pytest.mark.parametrize(
    ("predicted", "scores", "n"),
    [
        ([0.1, 0.5, 0.9], [1.0, 0.0, 1.0], 2),
        ([0.05, 0.5, 0.95, 0.3], [1.0, 0.0, 0.0, 1.0], 2),
        ([0.05, 0.5, 0.95, 0.3], [1.0, 0.0, 0.0, 1.0], 3),
        ([0.02, 0.6, 0.97, 0.3, 0.8], [1.0, 0.0, 0.0, 1.0, 1.0], 3),
    ],
)
def test_the_mean_of_draws_with_fixed_weights_is_unbiased(
    predicted: list[float], scores: list[float], n: int
) -> None:
    """Exact enumeration of every sequence of n draws: with equal weights (fixed before
    any draw) E[That] = T. The control for the test below; the sequences' probabilities
    sum to 1."""
    expected = 0.0
    mass = 0.0
    for probability, draws in _sequences(predicted, scores, n, floor=0.05):
        equal = [dataclasses.replace(d, weight=1.0) for d in draws]
        estimate = stratum_estimate(equal, size=len(predicted))
        assert estimate is not None and estimate.n == n
        expected += probability * estimate.total
        mass += probability
    assert mass == pytest.approx(1.0, abs=1e-12)
    assert expected == pytest.approx(math.fsum(scores), abs=1e-9)


@pytest.mark.parametrize(
    ("predicted", "scores", "n"),
    [
        ([0.1, 0.5, 0.9], [1.0, 0.0, 1.0], 2),
        ([0.02, 0.6, 0.97, 0.3, 0.8], [1.0, 0.0, 0.0, 1.0, 1.0], 3),
    ],
)
def test_the_estimate_with_the_policys_draw_records_is_unbiased(
    predicted: list[float], scores: list[float], n: int
) -> None:
    """Exactly: every sequence of n draws with the records the policy makes (their weights
    from :func:`draw_weight` do not move the mean; weights normalised by their sum gave
    E = 2.0587 for T = 2 in the first case), predictions fixed."""
    expected = 0.0
    for probability, draws in _sequences(predicted, scores, n, floor=0.05):
        estimate = stratum_estimate(draws, size=len(predicted))
        assert estimate is not None
        expected += probability * estimate.total
    assert expected == pytest.approx(math.fsum(scores), abs=1e-9)


# ---------------------------------------------------------------- the estimate itself


def test_every_item_drawn_gives_the_exact_total_with_no_variance() -> None:
    """All ``size`` items drawn and scored: the total is the sum of the scores and its
    variance 0, whatever the records' probabilities, predictions and weights."""
    rng = np.random.default_rng(3)
    scores = rng.choice([0.0, 0.5, 1.0], 7).tolist()
    draws = [
        StratumDraw(
            probability=float(rng.uniform(0.01, 1.0)),
            predicted=float(rng.random()),
            unseen_predicted=float(rng.uniform(0, 7)),
            weight=float(rng.uniform(0.1, 10)),
            score=s,
        )
        for s in scores
    ]
    estimate = stratum_estimate(draws, size=7)
    assert estimate is not None
    assert estimate.total == math.fsum(scores)
    assert estimate.variance == 0.0
    assert estimate.n == 7
    # one short of the stratum: an estimate with a variance again
    partial = stratum_estimate(draws[:6], size=7)
    assert partial is not None and partial.n == 6 and partial.variance > 0.0


@pytest.mark.parametrize("size", [2, 10, 250])
def test_a_single_draw_gives_its_t1_with_the_largest_variance(size: int) -> None:
    """One scored draw: the total is t_1 = sum of predictions + (y - p) / q and the
    variance (size / 2)^2, the largest a total of ``size`` scores in [0, 1] can have."""
    draw = StratumDraw(
        probability=0.3 / size * 2, predicted=0.8, unseen_predicted=0.6 * size, weight=2.0
    ).scored(0.0)
    estimate = stratum_estimate([draw], size=size)
    assert estimate is not None
    assert estimate.total == pytest.approx(0.6 * size + (0.0 - 0.8) / (0.6 / size))
    assert estimate.variance == (size / 2) ** 2
    assert estimate.n == 1


def test_only_the_leading_run_of_scored_draws_counts() -> None:
    """A draw without a score cuts the run: later scored draws are ignored (their t_k
    needs the missing score); no scored draw at the start means no estimate."""
    base = [
        StratumDraw(0.2, 0.4, 8.0, 1.0, 1.0),
        StratumDraw(0.25, 0.7, 7.3, 1.5, 0.0),
        StratumDraw(0.3, 0.5, 6.6, 2.0),
        StratumDraw(0.35, 0.1, 6.0, 2.5, 1.0),
    ]
    assert stratum_estimate(base, size=20) == stratum_estimate(base[:2], size=20)
    assert stratum_estimate(base[:2], size=20) != stratum_estimate(base[:1], size=20)
    assert stratum_estimate([base[2], base[3]], size=20) is None
    assert stratum_estimate([], size=20) is None
    scored_later = [base[0], base[1], base[2].scored(1.0), base[3]]
    three = stratum_estimate(scored_later, size=20)
    assert three is not None and three.n == 4


def test_the_estimate_and_its_variance_by_hand() -> None:
    """Three draws of a stratum of 10: t_k, their mean, and the variance of the module
    docstring, sum (t - That)^2 / (n (n - 1)) pooled with PRIOR_DRAWS pseudo-draws of
    sum 1 / (n^2 w), computed here by hand."""
    draws = [
        StratumDraw(0.1, 0.3, 6.0, 0.5, 1.0),
        StratumDraw(0.2, 0.6, 5.5, 1.0, 0.0),
        StratumDraw(0.25, 0.5, 5.0, 1.5, 1.0),
    ]
    t = [6.0 + 0.7 / 0.1, 1.0 + 5.5 - 0.6 / 0.2, 1.0 + 5.0 + 0.5 / 0.25]
    total = sum(t) / 3
    observed = sum((x - total) ** 2 for x in t) / (3 * 2)
    predicted = sum(1 / d.weight for d in draws) / 9
    variance = (3 * observed + PRIOR_DRAWS * predicted) / (3 + PRIOR_DRAWS)
    estimate = stratum_estimate(draws, size=10)
    assert estimate is not None
    assert estimate.total == pytest.approx(total, rel=1e-12)
    assert estimate.variance == pytest.approx(variance, rel=1e-12)
    assert estimate.n == 3
    # draws that agree exactly still claim the variance their predictions imply
    agree = [StratumDraw(0.5, 0.5, 1.0, 4.0, 0.5), StratumDraw(1.0, 0.5, 0.5, 4.0, 0.5)]
    tied = stratum_estimate(agree, size=3)
    assert tied is not None and tied.total == pytest.approx(1.0)
    assert tied.variance == pytest.approx(PRIOR_DRAWS * (0.25 / 4 * 2) / (2 + PRIOR_DRAWS))


# ------------------------------------------------------------------------ the weight


def test_draw_weight_by_hand() -> None:
    """1 / (sum v / q - sum v) with v = max(p (1 - p), MIN_ITEM_VARIANCE), by hand."""
    v = [max(0.2 * 0.8, MIN_ITEM_VARIANCE), max(0.25, MIN_ITEM_VARIANCE)]
    expected = 1.0 / (v[0] / 0.25 + v[1] / 0.75 - v[0] - v[1])
    assert draw_weight([0.2, 0.5], [0.25, 0.75]) == pytest.approx(expected, rel=1e-12)
    # a confident prediction is floored at MIN_ITEM_VARIANCE
    floored = 1.0 / (MIN_ITEM_VARIANCE / 0.1 + 0.25 / 0.9 - MIN_ITEM_VARIANCE - 0.25)
    assert draw_weight([0.01, 0.5], [0.1, 0.9]) == pytest.approx(floored, rel=1e-12)
    # the last unseen item (q = 1) has no variance: the weight is the ceiling
    assert draw_weight([0.3], [1.0]) == pytest.approx(1.0 / MIN_DRAW_VARIANCE)


@pytest.mark.parametrize("seed", range(5))
def test_draw_weight_is_the_inverse_of_the_draws_variance_under_the_model(seed: int) -> None:
    """When the predictions are the true Bernoulli probabilities (and none is below the
    floor MIN_ITEM_VARIANCE), 1 / weight = E[(t_k - T)^2]: computed exactly over every
    item the draw can pick and every 0/1 outcome of the unseen items."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2, 7))
    p = rng.uniform(0.2, 0.8, size)
    assert np.all(p * (1 - p) >= MIN_ITEM_VARIANCE)
    q = selection_probabilities(p, floor=0.05)
    second_moment = 0.0
    for outcome in itertools.product([0.0, 1.0], repeat=size):
        y = np.array(outcome)
        chance = float(np.prod(np.where(y == 1.0, p, 1 - p)))
        for j in range(size):
            t = p.sum() + (y[j] - p[j]) / q[j]
            second_moment += chance * q[j] * (t - y.sum()) ** 2
    assert 1.0 / draw_weight(p.tolist(), q.tolist()) == pytest.approx(second_moment, rel=1e-9)


# --------------------------------------------------------------------- the record


@pytest.mark.parametrize(
    "kwargs",
    [
        {"probability": 0.0, "weight": 1.0},
        {"probability": 1.5, "weight": 1.0},
        {"probability": -0.1, "weight": 1.0},
        {"probability": 0.5, "weight": 0.0},
        {"probability": 0.5, "weight": -1.0},
    ],
)
def test_a_record_refuses_an_impossible_probability_or_weight(kwargs: dict[str, float]) -> None:
    """q in (0, 1], w > 0."""
    with pytest.raises(ValueError):
        StratumDraw(predicted=0.5, unseen_predicted=1.0, **kwargs)


@pytest.mark.parametrize("score", [-0.01, 1.01, math.inf])
def test_a_score_outside_zero_one_is_refused(score: float) -> None:
    """Scores lie in [0, 1]; 0 and 1 are fine."""
    draw = StratumDraw(0.5, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError):
        draw.scored(score)
    assert draw.scored(0.0).score == 0.0 and draw.scored(1.0).score == 1.0
    assert draw.score is None  # records are immutable
