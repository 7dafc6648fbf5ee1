"""The rank-aware stopping rule: the beat probability against scipy's normal, the settled
and unsettled places, and, by simulation, the confidence it states over all its checks."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.special import expit
from scipy.stats import norm

from bank.adaptive.assisted import AssistedState, PoolItem
from bank.adaptive.policy import AdaptiveConfig, Decision, Policy, StopReason
from bank.adaptive.stopping import Neighbour, beat_probability, rank_settled
from tests.bank.adaptive.pools import POOL, two_pl_pool

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------- the beat probability


@pytest.mark.parametrize("seed", range(6))
def test_beat_probability_is_the_normal_cdf_of_the_standardised_gap(seed: int) -> None:
    """P(S beats S_n) = norm.cdf((S - S_n) / sqrt(s^2 + s_n^2)) (scipy), far into the
    tails too."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        estimate, other = rng.random(2)
        s, s_n = rng.uniform(0.0, 0.2, 2) * rng.choice([0.0, 1.0], 2, p=[0.1, 0.9])
        if s == s_n == 0.0:
            continue
        expected = norm.cdf((estimate - other) / math.hypot(s, s_n))
        got = beat_probability(float(estimate), float(s), Neighbour(float(other), float(s_n)))
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_beat_probability_without_any_uncertainty_is_the_order() -> None:
    """Both standard errors 0: 1 above, 0 below, one half at a tie."""
    assert beat_probability(0.6, 0.0, Neighbour(0.5)) == 1.0
    assert beat_probability(0.4, 0.0, Neighbour(0.5)) == 0.0
    assert beat_probability(0.5, 0.0, Neighbour(0.5)) == 0.5


# ------------------------------------------------------------------- settled or not

DELTA = 0.05
Z = float(norm.ppf(1 - DELTA / 2))
"""The gap, in standard errors of the difference, that settles one side at DELTA."""


@pytest.mark.parametrize(
    ("estimate", "se", "neighbours", "settled"),
    [
        # far on both sides: settled
        (0.5, 0.02, [Neighbour(0.3, 0.01), Neighbour(0.7, 0.01)], True),
        # a close neighbour above: not settled
        (0.5, 0.02, [Neighbour(0.3, 0.01), Neighbour(0.52, 0.01)], False),
        # a close neighbour below: not settled
        (0.5, 0.02, [Neighbour(0.49, 0.0), Neighbour(0.7, 0.01)], False),
        # the nearest one on each side decides, not the farther ones
        (0.5, 0.02, [Neighbour(0.9), Neighbour(0.51), Neighbour(0.1)], False),
        (0.5, 0.02, [Neighbour(0.9), Neighbour(0.6), Neighbour(0.1)], True),
        # one-sided: only the model below counts (the leader), only the one above (last)
        (0.8, 0.02, [Neighbour(0.6, 0.01), Neighbour(0.3)], True),
        (0.8, 0.02, [Neighbour(0.78, 0.01)], False),
        (0.1, 0.02, [Neighbour(0.4, 0.01), Neighbour(0.9)], True),
        (0.1, 0.02, [Neighbour(0.12, 0.01)], False),
        # a neighbour at the very same score is above: a coin flip, never settled
        (0.5, 0.0, [Neighbour(0.5, 0.0)], False),
        # the neighbour's own standard error counts
        (0.5, 0.01, [Neighbour(0.45, 0.0)], True),
        (0.5, 0.01, [Neighbour(0.45, 0.05)], False),
    ],
)
def test_rank_settled_cases(
    estimate: float, se: float, neighbours: list[Neighbour], settled: bool
) -> None:
    """Hand-made leaderboards around the estimate (delta 0.05)."""
    assert rank_settled(estimate, se, neighbours, DELTA) is settled


@pytest.mark.parametrize("side", [-1.0, 1.0])
def test_rank_settled_switches_at_one_minus_half_delta(side: float) -> None:
    """One neighbour at gap z_{1 - delta/2} sqrt(s^2 + s_n^2) (scipy's quantile) on either
    side: a hair farther settles, a hair closer does not."""
    s, s_n = 0.03, 0.04
    gap = Z * math.hypot(s, s_n)
    for factor, settled in [(1.0 + 1e-6, True), (1.0 - 1e-6, False)]:
        other = Neighbour(0.5 + side * gap * factor, s_n)
        assert rank_settled(0.5, s, [other], DELTA) is settled


def test_without_neighbours_or_estimate_the_rule_never_fires() -> None:
    """No neighbour: no place to settle, even with no uncertainty; a NaN estimate (a
    stratum not yet drawn) never settles; a delta outside (0, 1) is refused."""
    for se in (0.0, 0.01, 0.5):
        assert rank_settled(0.5, se, [], DELTA) is False
    assert rank_settled(math.nan, 0.01, [Neighbour(0.1), Neighbour(0.9)], DELTA) is False
    for delta in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            rank_settled(0.5, 0.01, [Neighbour(0.1)], delta)


# ---------------------------------------------- the confidence over all the checks

THETA = 0.4


@functools.cache
def _pool() -> tuple[list[PoolItem], FloatArray]:
    """The synthetic pool of :mod:`tests.bank.adaptive.pools`; the model's probability
    of passing each item (the 2PL holds)."""
    items, a, b, _ = two_pl_pool(2024)
    return items, np.asarray(expit(a * (THETA - b)), dtype=np.float64)


def _play(
    state: AssistedState,
    scores: FloatArray,
    rng: np.random.Generator,
    neighbours: list[Neighbour] | None = None,
) -> list[Decision]:
    """Draw and score at once, as the replay does; every decision returned."""
    decisions = []
    while (draw := state.next_draw(rng)) is not None:
        decision = state.scored(draw.item, float(scores[draw.item]), neighbours=neighbours or ())
        if decision is not None:
            decisions.append(decision)
    return decisions


SESSIONS = 400
CHECK_DELTA = 0.1


@functools.cache
def _checks(every: int) -> tuple[FloatArray, FloatArray, FloatArray, int]:
    """SESSIONS sessions of 100 draws (never precise, no neighbours: every check is
    made); per session and check, the estimate's error against the pool's realised mean,
    its standard error and the half-width the rule used (at delta / K); and K."""
    items, p = _pool()
    config = AdaptiveConfig(
        policy=Policy.MODEL_ASSISTED,
        budget=100,
        check_every=every,
        delta=CHECK_DELTA,
        target_halfwidth=1e-9,
    )
    rng = np.random.default_rng(every)
    errors, ses, widths = [], [], []
    for _ in range(SESSIONS):
        scores = (rng.random(POOL) < p).astype(np.float64)
        decisions = _play(AssistedState.start(config, items), scores, rng)
        assert len(decisions) == config.schedule.checks - 1
        assert decisions[-1].stop is StopReason.BUDGET
        assert all(d.stop is None for d in decisions[:-1])
        errors.append([d.estimate.mean - scores.mean() for d in decisions])
        ses.append([d.estimate.standard_error for d in decisions])
        widths.append([d.halfwidth for d in decisions])
    return np.array(errors), np.array(ses), np.array(widths), config.schedule.checks


def test_the_rule_holds_its_confidence_over_all_its_checks() -> None:
    """400 sessions, 100 draws each, a check every 10 (the default; K = 11, the first
    check comes before every stratum has a draw and claims nothing): the share of sessions where
    ANY interval the rule checked (normal, at delta / K) missed the pool's realised mean
    is at most delta = 0.1 plus 3 Monte-Carlo standard errors; a naive rule checking the
    interval at delta every time misses in far more than delta of the sessions (so this
    simulation can tell the two apart)."""
    errors, ses, widths, checks = _checks(10)
    assert checks == 11
    claimed = np.isfinite(widths)
    assert np.array_equal(claimed, np.isfinite(ses))  # no estimate yet: no interval
    np.testing.assert_allclose(
        widths[claimed], norm.ppf(1 - CHECK_DELTA / checks / 2) * ses[claimed], rtol=1e-9
    )  # the rule's interval is the normal one at delta / K
    slack = 3 * math.sqrt(CHECK_DELTA * (1 - CHECK_DELTA) / SESSIONS)
    rule_missed = float((np.abs(errors) > widths).any(axis=1).mean())
    naive_missed = float((np.abs(errors) > norm.ppf(1 - CHECK_DELTA / 2) * ses).any(axis=1).mean())
    assert rule_missed <= CHECK_DELTA + slack, rule_missed
    assert naive_missed > CHECK_DELTA + slack, naive_missed


SETTLE_SESSIONS = 150
SETTLE_BUDGET = 200


def test_far_neighbours_settle_the_place_before_the_precision_target() -> None:
    """Neighbours at -0.45, -0.25, +0.25 and +0.4 around the model's expected score (each
    with standard error 0.01), a precision target no session of 200 draws reaches
    (0.01) and delta 0.05: every one of 150 sessions stops as SETTLED, well before the
    budget and with a half-width above the target; its place among the neighbours at the
    stop (how many score below the estimate) is the place of the pool's realised mean in
    all but at most delta of the sessions (plus 3 Monte-Carlo standard errors)."""
    items, p = _pool()
    expected = float(p.mean())
    neighbours = [Neighbour(expected + gap, 0.01) for gap in (-0.45, -0.25, 0.25, 0.4)]
    config = AdaptiveConfig(
        policy=Policy.MODEL_ASSISTED,
        budget=SETTLE_BUDGET,
        check_every=10,
        delta=0.05,
        target_halfwidth=0.01,
    )
    rng = np.random.default_rng(99)
    wrong = 0
    used = []
    for _ in range(SETTLE_SESSIONS):
        scores = (rng.random(POOL) < p).astype(np.float64)
        state = AssistedState.start(config, items)
        decisions = _play(state, scores, rng, neighbours)
        last = decisions[-1]
        assert last.stop is StopReason.SETTLED
        assert last.halfwidth > config.target_halfwidth
        assert state.next_draw(rng) is None  # stopped: nothing more is drawn
        used.append(state.n_allocated)

        def place(score: float) -> int:
            return sum(n.score < score for n in neighbours)

        wrong += place(last.estimate.mean) != place(float(scores.mean()))
    assert max(used) < SETTLE_BUDGET
    assert float(np.mean(used)) < SETTLE_BUDGET / 2
    slack = 3 * math.sqrt(0.05 * 0.95 / SETTLE_SESSIONS)
    assert wrong / SETTLE_SESSIONS <= 0.05 + slack, wrong
