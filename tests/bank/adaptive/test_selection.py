"""Content quotas (which stratum) and PPS selection with a floor (which item) of the
model-assisted policy, and the exposure bound the floor implies."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from bank.adaptive.assisted import AssistedState, PoolItem
from bank.adaptive.policy import AdaptiveConfig, Policy
from bank.adaptive.selection import next_stratum, selection_probabilities

FloatArray = NDArray[np.float64]

# ------------------------------------------------------------- selection probabilities


@settings(max_examples=200, deadline=None)
@given(
    predicted=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
    floor=st.floats(1e-3, 2.0),
)
def test_selection_probabilities_are_the_spread_plus_floor_normalised(
    predicted: list[float], floor: float
) -> None:
    """q sums to 1, every q > 0, q_j / (sqrt(p_j (1 - p_j)) + floor) is the same for
    every j, and max q / min q <= (0.5 + floor) / floor (the exposure bound)."""
    q = selection_probabilities(predicted, floor=floor)
    p = np.asarray(predicted)
    size = np.sqrt(p * (1 - p)) + floor
    assert q.shape == p.shape
    assert float(q.sum()) == pytest.approx(1.0, abs=1e-12)
    assert np.all(q > 0)
    np.testing.assert_allclose(q / size, 1.0 / size.sum(), rtol=1e-12)
    assert q.max() / q.min() <= (0.5 + floor) / floor * (1 + 1e-12)


@pytest.mark.parametrize("floor", [0.01, 0.05, 0.3])
def test_the_exposure_bound_is_reached_by_a_sure_and_an_even_item(floor: float) -> None:
    """p = 0.5 (the largest spread) next to p = 0 and p = 1 (none): the ratio is exactly
    (0.5 + floor) / floor; equal predictions give the uniform selection."""
    q = selection_probabilities([0.5, 0.0, 1.0], floor=floor)
    assert q[0] / q[1] == pytest.approx((0.5 + floor) / floor, rel=1e-12)
    assert q[1] == pytest.approx(q[2], rel=1e-12)
    np.testing.assert_allclose(selection_probabilities([0.3] * 7, floor=floor), 1 / 7)


def test_selection_probabilities_clip_predictions_and_refuse_bad_input() -> None:
    """Predictions outside [0, 1] are clipped; a non-positive floor and an empty set of
    unseen items are refused."""
    np.testing.assert_array_equal(
        selection_probabilities([-0.2, 1.3, 0.5]), selection_probabilities([0.0, 1.0, 0.5])
    )
    for floor in (0.0, -0.1):
        with pytest.raises(ValueError):
            selection_probabilities([0.5], floor=floor)
    with pytest.raises(ValueError):
        selection_probabilities([])


# -------------------------------------------------------------------- content quotas


def test_next_stratum_ties_go_to_the_first_stratum_and_spent_strata_are_skipped() -> None:
    """Equal ranks: the first stratum in ``sizes`` order; exhausted strata are never
    named; None when every stratum is spent."""
    assert next_stratum(drawn={}, sizes={"x": 10, "y": 10}, pilot=0) == "x"
    assert next_stratum(drawn={}, sizes={"y": 10, "x": 10}, pilot=0) == "y"
    for n in range(5):
        assert next_stratum(drawn={"a": 1, "b": n}, sizes={"a": 1, "b": 100}, pilot=3) == "b"
    assert next_stratum(drawn={"a": 1, "b": 3}, sizes={"a": 1, "b": 3}, pilot=2) is None


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 150), min_size=1, max_size=8),
    pilot=st.integers(0, 4),
)
def test_quotas_hold_for_any_layout(sizes: list[int], pilot: int) -> None:
    """Drawing until every stratum is spent:

    * pilot first: no stratum gets more than ``pilot`` items while another (not spent)
      has fewer than min(pilot, N_h);
    * past the pilot (every stratum beyond it) and before any stratum is spent, the
      sequential rule "smallest (n_h + 1) / W_h" (Jefferson's / D'Hondt's divisor method)
      keeps n_h / W_h <= (n_g + 1) / W_g for every pair, hence
      n W_h - 1 <= n_h <= (n + H) W_h: never more than one item short of the
      proportional quota, at most H W_h over it.
    """
    layout: dict[Hashable, int] = {f"s{i}": n for i, n in enumerate(sizes)}
    total = sum(sizes)
    weights = {key: size / total for key, size in layout.items()}
    drawn: dict[Hashable, int] = {key: 0 for key in layout}
    for n in range(1, total + 1):
        key = next_stratum(drawn=drawn, sizes=layout, pilot=pilot)
        assert key is not None and drawn[key] < layout[key]
        drawn[key] += 1
        if drawn[key] > pilot:
            assert all(drawn[g] >= min(pilot, layout[g]) for g in layout)
        if any(drawn[g] == layout[g] for g in layout) or min(drawn.values()) <= pilot:
            continue
        for h, w in weights.items():
            assert n * w - 1 - 1e-9 <= drawn[h] <= (n + len(layout)) * w + 1e-9
    assert drawn == layout
    assert next_stratum(drawn=drawn, sizes=layout, pilot=pilot) is None


STRATA: dict[tuple[str, str], int] = {
    ("alg", "mc"): 160,
    ("alg", "open"): 40,
    ("bio", "mc"): 120,
    ("law", "mc"): 60,
    ("law", "open"): 20,
}
"""Five strata (discipline x type) of a pool of 400."""


def _quota_pool() -> list[PoolItem]:
    rng = np.random.default_rng(11)
    items = []
    for (discipline, kind), size in STRATA.items():
        for _ in range(size):
            items.append(
                PoolItem(
                    (discipline, kind),
                    discipline,
                    float(rng.uniform(0.5, 2.0)),
                    float(rng.normal(0.0, 1.5)),
                )
            )
    return items


SCORE_PATTERNS: dict[str, Callable[[int, PoolItem, np.random.Generator], float]] = {
    "all wrong": lambda j, item, rng: 0.0,
    "all right": lambda j, item, rng: 1.0,
    "coin": lambda j, item, rng: float(rng.random() < 0.5),
    "by discipline": lambda j, item, rng: 1.0 if item.discipline == "alg" else 0.0,
    "by item": lambda j, item, rng: float(j % 3 == 0),
}


def test_quotas_are_met_for_any_scores() -> None:
    """Sessions of 150 draws over five strata, pilot 2, with five very different score
    patterns and seeds: the sequence of strata is the same in every session (the quota
    does not look at the scores); after the first sum min(2, N_h) = 10 draws every
    stratum has its pilot; afterwards each n_h stays within [n W_h - 1, n W_h + H W_h]."""
    items = _quota_pool()
    config = AdaptiveConfig(
        policy=Policy.MODEL_ASSISTED, budget=150, pilot=2, target_halfwidth=1e-9
    )
    sequences = []
    for seed, (name, pattern) in enumerate(SCORE_PATTERNS.items()):
        rng = np.random.default_rng(seed)
        state = AssistedState.start(config, items)
        sequence = []
        counts: dict[Hashable, int] = dict.fromkeys(STRATA, 0)
        while (draw := state.next_draw(rng)) is not None:
            state.scored(draw.item, pattern(draw.item, items[draw.item], rng))
            assert items[draw.item].stratum == draw.stratum
            sequence.append(draw.stratum)
            counts[draw.stratum] += 1
            n = len(sequence)
            if n >= 10:
                assert all(c >= 2 for c in counts.values()), (name, n, counts)
            if min(counts.values()) > 2:
                for key, size in STRATA.items():
                    w = size / 400
                    assert n * w - 1 <= counts[key] <= (n + len(STRATA)) * w, (name, n, key)
        assert len(sequence) == 150
        sequences.append(sequence)
    assert all(s == sequences[0] for s in sequences)


# ---------------------------------------------------------------------------- exposure

POOL = 200
EVEN_ITEMS = 3
DRAWS = 12
SESSIONS = 300


def _exposure_pool() -> tuple[list[PoolItem], FloatArray]:
    """One stratum of 200: three items predicted at 0.5 whatever the ability (a ~ 0),
    197 the model is sure to pass or fail (|b| = 30); scores that agree with the sure
    predictions, so the ability stays near 0."""
    items = [PoolItem("all", "d", 1e-3, 0.0) for _ in range(EVEN_ITEMS)]
    sure = POOL - EVEN_ITEMS
    items += [PoolItem("all", "d", 4.0, 30.0 if j % 2 else -30.0) for j in range(sure)]
    scores = np.array([0.0 if (j % 2) else 1.0 for j in range(sure)])
    return items, scores


def _exposure_rates(floor: float, seed: int) -> FloatArray:
    """Per item, the share of SESSIONS sessions of DRAWS draws that gave it."""
    items, sure_scores = _exposure_pool()
    config = AdaptiveConfig(
        policy=Policy.MODEL_ASSISTED,
        budget=DRAWS,
        selection_floor=floor,
        target_halfwidth=1e-9,
        check_every=DRAWS,
    )
    rng = np.random.default_rng(seed)
    given = np.zeros(POOL)
    for _ in range(SESSIONS):
        state = AssistedState.start(config, items)
        while (draw := state.next_draw(rng)) is not None:
            j = draw.item
            score = float(rng.random() < 0.5) if j < EVEN_ITEMS else sure_scores[j - EVEN_ITEMS]
            state.scored(j, score)
            given[j] += 1
    return given / SESSIONS


def _floor_bound(floor: float) -> float:
    """The largest exposure the floor allows: at draw k (POOL - k + 1 unseen items, each
    with a selection size of at least ``floor``, none above 0.5 + floor) an item's
    probability is at most (0.5 + f) / (0.5 + f + (POOL - k) f); its exposure is at most
    the sum over the DRAWS draws."""
    big = 0.5 + floor
    return math.fsum(big / (big + (POOL - k) * floor) for k in range(1, DRAWS + 1))


def test_the_floor_bounds_every_items_exposure() -> None:
    """300 sessions of 12 draws from a stratum of 200 where only three items are
    informative: with the default floor 0.05 the largest per-item exposure rate is below
    the floor's bound (0.64) by more than 3 Monte-Carlo standard errors, and the sure
    items are still given (every item has a positive probability). With a floor ten times
    smaller the informative items are given in most sessions, beyond that bound: the floor
    is what holds the exposure down."""
    bound = _floor_bound(0.05)
    assert 0.6 < bound < 0.7
    rates = _exposure_rates(0.05, seed=1)
    assert rates.sum() == pytest.approx(DRAWS)
    top = float(rates.max())
    se = math.sqrt(bound * (1 - bound) / SESSIONS)
    assert top + 3 * se < bound, (top, bound, se)
    assert rates[EVEN_ITEMS:].mean() > 0.02  # sure items: 12 * 0.05 / 11.5 each, roughly
    low_floor = _exposure_rates(0.005, seed=2)
    assert float(low_floor[:EVEN_ITEMS].min()) > bound + 3 * se
    assert float(low_floor.max()) <= _floor_bound(0.005)
