"""The ``model-assisted`` session (:class:`AssistedState`): unbiased when the IRT model
holds and when it does not (where the plain IRT prediction is biased), interval coverage,
and the protocol the replay and the server follow (draw, score, restore)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Hashable

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.special import expit
from scipy.stats import norm

from bank.adaptive.assisted import AssistedState, Draw, PoolItem
from bank.adaptive.bounds import normal_halfwidth
from bank.adaptive.policy import AdaptiveConfig, Policy, StopReason
from tests.bank.adaptive.pools import DISCIPLINES, POOL, two_pl_pool

FloatArray = NDArray[np.float64]

BUDGET = 80
SESSIONS = 300
NEVER = 1e-9
"""A target half-width no interval reaches: sessions run to their budget."""
COVERAGE_DELTA = 0.1
CONFIG = AdaptiveConfig(
    policy=Policy.MODEL_ASSISTED, budget=BUDGET, check_every=20, target_halfwidth=NEVER
)


@functools.cache
def _pool() -> tuple[list[PoolItem], FloatArray, FloatArray, NDArray[np.int64]]:
    """The synthetic pool of :mod:`tests.bank.adaptive.pools`, 8 strata."""
    return two_pl_pool(7)


def _play(state: AssistedState, scores: FloatArray, rng: np.random.Generator) -> None:
    """Draw and score at once until the session ends, as the replay does."""
    while (draw := state.next_draw(rng)) is not None:
        state.scored(draw.item, float(scores[draw.item]))


@dataclasses.dataclass(frozen=True)
class _Runs:
    """Per session (rows): the estimate's error against the pool's realised mean and its
    standard error, overall and per discipline (columns), and the plug-in IRT prediction's
    error (scores seen + p(theta_hat) of the items not given)."""

    error: FloatArray
    se: FloatArray
    halfwidth: FloatArray
    """:func:`normal_halfwidth` of the overall estimate at COVERAGE_DELTA."""
    discipline_error: FloatArray
    discipline_se: FloatArray
    plug_in_error: FloatArray
    plug_in_discipline_error: FloatArray


@functools.cache
def _runs(abilities: tuple[float, ...], seed: int) -> _Runs:
    """SESSIONS sessions of BUDGET draws on the pool with its true item parameters; the
    model answers item j of discipline d correctly with probability
    sigmoid(a_j (abilities[d] - b_j)), fresh 0/1 scores every session. One ability for
    all disciplines is the 2PL the state assumes; four different ones are a
    two-dimensional model its single theta cannot represent."""
    items, a, b, discipline = _pool()
    theta = np.asarray(abilities)[discipline] if len(abilities) > 1 else abilities[0]
    p = expit(a * (theta - b))
    rng = np.random.default_rng(seed)
    rows: dict[str, list[object]] = {f.name: [] for f in dataclasses.fields(_Runs)}
    for _ in range(SESSIONS):
        scores = (rng.random(POOL) < p).astype(np.float64)
        state = AssistedState.start(CONFIG, items)
        _play(state, scores, rng)
        assert state.n_allocated == BUDGET and state.n_scored == BUDGET
        assert state.last is not None and state.last.stop is StopReason.BUDGET
        estimate = state.estimate()
        truth = [scores[discipline == d].mean() for d in range(len(DISCIPLINES))]
        given = np.zeros(POOL, dtype=np.bool_)
        given[[draw.item for draw in state.draws]] = True
        plug_in = np.where(given, scores, expit(a * (state.theta - b)))
        rows["error"].append(estimate.overall.mean - scores.mean())
        rows["se"].append(estimate.overall.standard_error)
        rows["halfwidth"].append(normal_halfwidth(estimate.overall, COVERAGE_DELTA))
        rows["discipline_error"].append(
            [estimate.disciplines[name].mean - truth[d] for d, name in enumerate(DISCIPLINES)]
        )
        rows["discipline_se"].append(
            [estimate.disciplines[name].standard_error for name in DISCIPLINES]
        )
        rows["plug_in_error"].append(plug_in.mean() - scores.mean())
        rows["plug_in_discipline_error"].append(
            [plug_in[discipline == d].mean() - truth[d] for d in range(len(DISCIPLINES))]
        )
    return _Runs(**{name: np.array(values) for name, values in rows.items()})


CORRECT = (0.4,)
"""One ability: the 2PL with the pool's parameters is the true model."""
TWO_DIMENSIONAL = (1.5, -1.5, 1.0, -1.0)
"""Per-discipline abilities: strong in alg and chem, weak in bio and law."""


def _bias(errors: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean error (per column) and its Monte-Carlo standard error."""
    return errors.mean(axis=0), errors.std(axis=0, ddof=1) / math.sqrt(errors.shape[0])


def test_unbiased_when_the_irt_model_holds() -> None:
    """300 sessions of 80 draws from a pool of 480 whose scores follow the 2PL with the
    parameters the state is given: the mean error against the pool's realised mean is
    within 4 Monte-Carlo standard errors of 0, overall and in each discipline."""
    runs = _runs(CORRECT, seed=1)
    bias, se = _bias(runs.error)
    assert abs(bias) < 4 * se, (bias, se)
    assert se < 0.005  # the check can see a bias of 2 points
    bias, se = _bias(runs.discipline_error)
    assert np.all(np.abs(bias) < 4 * se), (bias, se)


def test_unbiased_when_the_irt_model_is_wrong_where_the_plug_in_prediction_is_not() -> None:
    """The model's ability differs by discipline (+1.5, -1.5, +1.0, -1.0), which the
    state's single theta cannot follow: the model-assisted estimate stays within 4
    Monte-Carlo standard errors of the truth overall and per discipline, while the plug-in
    prediction (scores seen plus p(theta_hat) for the rest, the combination of gp-IRT in
    Polo et al., "tinyBenchmarks: evaluating LLMs with fewer examples", without its
    correction) misses every discipline by more than 5 points and 20 standard errors."""
    runs = _runs(TWO_DIMENSIONAL, seed=2)
    bias, se = _bias(runs.error)
    assert abs(bias) < 4 * se, (bias, se)
    bias, se = _bias(runs.discipline_error)
    assert np.all(np.abs(bias) < 4 * se), (bias, se)
    plug_in, plug_in_se = _bias(runs.plug_in_discipline_error)
    assert np.all(np.abs(plug_in) > 0.05), plug_in
    assert np.all(np.abs(plug_in) > 20 * plug_in_se), (plug_in, plug_in_se)
    # the direction follows the abilities: under-predicted where strong, over where weak
    assert np.array_equal(np.sign(plug_in), -np.sign(TWO_DIMENSIONAL))


@pytest.mark.parametrize("abilities", [CORRECT, TWO_DIMENSIONAL], ids=["2pl", "2d"])
def test_normal_intervals_cover_the_pool_mean(abilities: tuple[float, ...]) -> None:
    """The final normal interval at delta = 0.1 (:func:`normal_halfwidth` of the overall
    estimate; z * se of each discipline's) holds the pool's realised mean, overall and in
    every discipline, in 1 - delta of the sessions up to 3.5 Monte-Carlo standard errors
    (sqrt(delta (1 - delta) / 300) = 0.017)."""
    runs = _runs(abilities, seed=1 if abilities == CORRECT else 2)
    tolerance = 3.5 * math.sqrt(COVERAGE_DELTA * (1 - COVERAGE_DELTA) / SESSIONS)
    z = float(norm.ppf(1 - COVERAGE_DELTA / 2))
    np.testing.assert_allclose(runs.halfwidth, z * runs.se, rtol=1e-12)
    covered = float((np.abs(runs.error) <= runs.halfwidth).mean())
    assert abs(covered - (1 - COVERAGE_DELTA)) <= tolerance, covered
    by_discipline = (np.abs(runs.discipline_error) <= z * runs.discipline_se).mean(axis=0)
    assert np.all(np.abs(by_discipline - (1 - COVERAGE_DELTA)) <= tolerance), by_discipline


# ------------------------------------------------------------------ items without history


def test_items_without_parameters_are_drawn_uniformly_and_estimated_without_bias() -> None:
    """A pool of 240 items none of which has parameters (a = b = None), scores from a
    2PL the state does not know: every draw picks each unseen item of its stratum with
    the same probability, predicted at the session's mean so far (0.5 before any score);
    over 200 sessions of 60 draws the mean error is within 4 Monte-Carlo standard errors
    of 0 overall and per discipline."""
    rng = np.random.default_rng(5)
    sizes = (120, 80, 40)
    discipline = np.repeat(np.arange(3), sizes)
    p = expit(rng.uniform(0.5, 2.0, 240) * (0.3 - rng.normal(0.0, 1.5, 240)))
    items = [PoolItem(DISCIPLINES[d], DISCIPLINES[d]) for d in discipline.tolist()]
    config = dataclasses.replace(CONFIG, budget=60)
    errors, discipline_errors = [], []
    for session in range(200):
        scores = (rng.random(240) < p).astype(np.float64)
        state = AssistedState.start(config, items)
        unseen: dict[Hashable, int] = dict(zip(DISCIPLINES, sizes, strict=False))
        seen: list[float] = []
        while (draw := state.next_draw(rng)) is not None:
            if session == 0:
                assert draw.record.probability == pytest.approx(1 / unseen[draw.stratum])
                expected = sum(seen) / len(seen) if seen else 0.5
                assert draw.record.predicted == pytest.approx(expected)
                assert draw.record.unseen_predicted == pytest.approx(
                    expected * unseen[draw.stratum]
                )
            unseen[draw.stratum] -= 1
            seen.append(float(scores[draw.item]))
            state.scored(draw.item, seen[-1])
        estimate = state.estimate()
        errors.append(estimate.overall.mean - scores.mean())
        discipline_errors.append(
            [
                estimate.disciplines[DISCIPLINES[d]].mean - scores[discipline == d].mean()
                for d in range(3)
            ]
        )
    bias, se = _bias(np.array(errors))
    assert abs(bias) < 4 * se, (bias, se)
    bias, se = _bias(np.array(discipline_errors))
    assert np.all(np.abs(bias) < 4 * se), (bias, se)


# ---------------------------------------------------------------------------- protocol


def _mixed_pool() -> tuple[list[PoolItem], FloatArray]:
    """The pool with every third item stripped of its parameters, and fixed 0/1 scores."""
    items, a, b, _ = _pool()
    mixed = [
        dataclasses.replace(item, a=None, b=None) if j % 3 == 0 else item
        for j, item in enumerate(items)
    ]
    rng = np.random.default_rng(3)
    return mixed, (rng.random(POOL) < expit(a * (0.2 - b))).astype(np.float64)


def test_a_session_restored_from_its_draws_is_the_same_session() -> None:
    """45 draws, the last five not scored yet. A state rebuilt as the server does it
    (start, every stored draw without its score in draw order, then the scores in pool
    order) has the same estimate (overall and per discipline), ability, counts and
    decision, and draws the same next item from the same random state."""
    items, scores = _mixed_pool()
    config = dataclasses.replace(CONFIG, budget=200, check_every=10)
    rng = np.random.default_rng(8)
    original = AssistedState.start(config, items)
    for _ in range(45):
        draw = original.next_draw(rng)
        assert draw is not None
        if original.n_allocated <= 40:
            original.scored(draw.item, float(scores[draw.item]))
    restored = AssistedState.start(config, items)
    for draw in original.draws:
        stored = dataclasses.replace(draw.record, score=None)
        restored.add_draw(Draw(draw.item, draw.stratum, stored))
    for item in sorted(d.item for d in original.draws if d.record.score is not None):
        restored.record(item, float(scores[item]))

    assert restored.n_allocated == original.n_allocated == 45
    assert restored.n_scored == original.n_scored == 40
    assert restored.theta == pytest.approx(original.theta, abs=1e-12)
    mine, theirs = original.estimate(), restored.estimate()
    assert theirs.overall.n == mine.overall.n == 40
    assert theirs.overall.mean == pytest.approx(mine.overall.mean, rel=1e-12)
    assert theirs.overall.variance == pytest.approx(mine.overall.variance, rel=1e-12)
    assert theirs.disciplines.keys() == mine.disciplines.keys() == set(DISCIPLINES)
    for name, part in mine.disciplines.items():
        assert theirs.disciplines[name].mean == pytest.approx(part.mean, rel=1e-12)
        assert theirs.disciplines[name].variance == pytest.approx(part.variance, rel=1e-12)
        assert theirs.disciplines[name].n == part.n
    assert restored.decision().halfwidth == pytest.approx(original.decision().halfwidth)
    state = rng.bit_generator.state
    following = original.next_draw(rng)
    rng.bit_generator.state = state
    assert restored.next_draw(rng) == following


def test_no_draw_past_the_budget_and_the_last_score_ends_the_session() -> None:
    """Budget 25 drawn before any score arrives: the 26th ``next_draw`` is None; the
    scores then arrive in reverse order and the last one returns the BUDGET decision."""
    items, scores = _mixed_pool()
    config = dataclasses.replace(CONFIG, budget=25, check_every=10)
    rng = np.random.default_rng(4)
    state = AssistedState.start(config, items)
    draws = [state.next_draw(rng) for _ in range(25)]
    assert state.next_draw(rng) is None and state.n_allocated == 25
    assert len({d.item for d in draws if d is not None}) == 25
    decisions = []
    for draw in reversed(draws):
        assert draw is not None
        decisions.append(state.scored(draw.item, float(scores[draw.item])))
    assert decisions[-1] is not None and decisions[-1].stop is StopReason.BUDGET
    assert [i for i, d in enumerate(decisions) if d is not None] == [9, 19, 24]
    assert state.next_draw(rng) is None


def test_a_whole_pool_drawn_gives_its_exact_mean() -> None:
    """A budget above the pool: every item drawn, the estimate is the pool's mean with
    variance 0 overall and per discipline, and the session stops for its budget."""
    items = _pool()[0]
    small = [items[j] for j in range(0, POOL, 8)]
    rng = np.random.default_rng(6)
    scores = rng.choice([0.0, 1 / 3, 2 / 3, 1.0], len(small))
    state = AssistedState.start(dataclasses.replace(CONFIG, budget=1000), small)
    _play(state, scores, rng)
    assert state.n_allocated == len(small)
    assert state.last is not None and state.last.stop is StopReason.BUDGET
    estimate = state.estimate()
    assert estimate.overall.mean == pytest.approx(scores.mean(), abs=1e-12)
    assert estimate.overall.variance == 0.0
    assert state.last.halfwidth == 0.0
    labels = np.array([item.discipline for item in small])
    for name, part in estimate.disciplines.items():
        assert part.mean == pytest.approx(scores[labels == name].mean(), abs=1e-12)
        assert part.variance == 0.0


def test_scores_of_items_not_drawn_or_already_scored_are_refused() -> None:
    """``record`` of an item never drawn raises (KeyError); a second score for an item,
    a score outside [0, 1] and a second ``add_draw`` of an item raise ValueError, and
    none of them changes the state's counts."""
    items, _ = _mixed_pool()
    state = AssistedState.start(CONFIG, items)
    rng = np.random.default_rng(0)
    draw = state.next_draw(rng)
    assert draw is not None
    never = next(j for j in range(POOL) if j != draw.item)
    with pytest.raises(KeyError):
        state.record(never, 1.0)
    with pytest.raises(ValueError):
        state.record(draw.item, 1.5)
    assert state.n_scored == 0
    state.record(draw.item, 1.0)
    with pytest.raises(ValueError):
        state.record(draw.item, 0.0)
    with pytest.raises(ValueError):
        state.add_draw(draw)
    assert state.n_scored == 1 and state.n_allocated == 1


def test_the_estimate_waits_for_every_stratum() -> None:
    """NaN overall (and for a discipline) until each stratum has a scored draw; an empty
    pool is refused."""
    items, scores = _mixed_pool()
    state = AssistedState.start(CONFIG, items)
    rng = np.random.default_rng(1)
    strata = {item.stratum for item in items}
    assert len(strata) == 8
    while len({d.stratum for d in state.draws if d.record.score is not None}) < len(strata):
        assert math.isnan(state.estimate().overall.mean)
        draw = state.next_draw(rng)
        assert draw is not None
        state.scored(draw.item, float(scores[draw.item]))
    assert not math.isnan(state.estimate().overall.mean)
    with pytest.raises(ValueError):
        AssistedState.start(CONFIG, [])


def test_per_discipline_estimates_with_strata_that_span_disciplines() -> None:
    """Strata by item type only, each holding items of three disciplines; the whole pool
    of 30 drawn: each discipline's estimate is its exact mean. (Either the estimate
    follows the disciplines, or ``start`` refuses such a pool; both would pass.)"""
    items = [
        PoolItem("mc" if j % 2 else "open", ("alg", "bio", "law")[j % 3], 1.0, 0.0)
        for j in range(30)
    ]
    scores = np.array([1.0 if j % 3 == 0 else 0.0 for j in range(30)])
    try:
        state = AssistedState.start(dataclasses.replace(CONFIG, budget=100), items)
    except ValueError:
        return
    _play(state, scores, np.random.default_rng(0))
    estimate = state.estimate()
    assert estimate.overall.mean == pytest.approx(1 / 3)
    assert {name: part.mean for name, part in estimate.disciplines.items()} == {
        "alg": pytest.approx(1.0),
        "bio": pytest.approx(0.0),
        "law": pytest.approx(0.0),
    }
