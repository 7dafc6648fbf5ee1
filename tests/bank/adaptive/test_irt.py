"""The 2PL fit (joint MAP) and the MAP ability estimate."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar
from scipy.special import expit

from bank.adaptive.irt import ItemParameters, estimate_ability, fit_2pl

FloatArray = NDArray[np.float64]


def _simulate(
    models: int, items: int, seed: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(responses, a, b, theta) of a 2PL population with known parameters."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, models)
    b = rng.normal(0.0, 1.0, items)
    a = rng.uniform(0.5, 2.0, items)
    p = expit(a[None, :] * (theta[:, None] - b[None, :]))
    y = (rng.random((models, items)) < p).astype(np.float64)
    return y, a, b, theta


def _r(x: FloatArray, y: FloatArray) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def test_fit_2pl_recovers_known_parameters() -> None:
    """60 models x 800 items simulated from known a, b, theta: the fit recovers the
    difficulties (r > 0.9), the abilities (r > 0.95) and, roughly, the
    discriminations (r > 0.5); abilities are centred and scaled to sd 1."""
    y, a, b, theta = _simulate(60, 800, seed=20240501)
    fit = fit_2pl(y)
    assert fit.items.a.shape == (800,) and fit.items.b.shape == (800,)
    assert fit.abilities.shape == (60,)
    assert _r(fit.items.b, b) > 0.9
    assert _r(fit.abilities, theta) > 0.95
    assert _r(fit.items.a, a) > 0.5
    assert abs(float(fit.abilities.mean())) < 1e-9
    assert float(fit.abilities.std()) == pytest.approx(1.0, abs=1e-6)
    assert np.all((fit.items.a >= 0.2) & (fit.items.a <= 4.0))


def test_fit_2pl_tolerates_missing_responses() -> None:
    """A quarter of the cells NaN (not answered): the fit stays finite and still
    recovers b and theta."""
    y, _, b, theta = _simulate(60, 800, seed=7)
    rng = np.random.default_rng(8)
    y[rng.random(y.shape) < 0.25] = np.nan
    y[:, 0] = np.nan  # an item nobody answered
    y[0, 1:] = np.nan
    y[0, 1:50] = 1.0  # a model that answered only a few items
    fit = fit_2pl(y)
    assert np.all(np.isfinite(fit.items.a)) and np.all(np.isfinite(fit.items.b))
    assert np.all(np.isfinite(fit.abilities))
    assert _r(fit.items.b[1:], b[1:]) > 0.85
    assert _r(fit.abilities[1:], theta[1:]) > 0.9


def test_fit_2pl_keeps_items_everyone_passes_or_fails_at_finite_difficulty() -> None:
    """The prior on b keeps all-correct items easy but finite, all-wrong items hard."""
    y, _, _, _ = _simulate(30, 100, seed=3)
    y[:, 0] = 1.0
    y[:, 1] = 0.0
    fit = fit_2pl(y)
    assert np.isfinite(fit.items.b[0]) and np.isfinite(fit.items.b[1])
    assert fit.items.b[0] < np.median(fit.items.b) < fit.items.b[1]


@pytest.mark.parametrize("shape", [(1, 10), (10,), (2, 3, 4)])
def test_fit_2pl_refuses_fewer_than_two_models_or_a_non_matrix(shape: tuple[int, ...]) -> None:
    """A matrix with at least two rows is required."""
    with pytest.raises(ValueError):
        fit_2pl(np.zeros(shape))


def _map_objective(theta: float, y: FloatArray, a: FloatArray, b: FloatArray) -> float:
    """Minus (log-likelihood with fractional successes + log N(0, 1) prior)."""
    p = expit(a * (theta - b))
    return -float(np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)) - theta**2 / 2)


@pytest.mark.parametrize("seed", range(8))
def test_estimate_ability_is_the_map_of_scipy(seed: int) -> None:
    """estimate_ability agrees with scipy.optimize.minimize_scalar on the same MAP
    objective (log-likelihood plus N(0, 1) log prior) to 1e-4, for 0/1 and fractional
    scores and for easy, hard and mixed item sets."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 200))
    a = rng.uniform(0.2, 3.0, k)
    b = rng.normal(float(rng.normal(0, 1.5)), 1.5, k)
    if seed % 2:
        y = rng.choice([0.0, 1 / 3, 2 / 3, 1.0], k)
    else:
        y = (rng.random(k) < expit(a * (rng.normal() - b))).astype(np.float64)
    if seed == 6:
        y = np.ones(k)  # all correct: only the prior keeps theta finite
    got = estimate_ability(y, ItemParameters(a, b))
    ref = minimize_scalar(
        _map_objective,
        bounds=(-15, 15),
        args=(y, a, b),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert got == pytest.approx(float(ref.x), abs=1e-4)


def test_estimate_ability_without_items_is_the_prior_mean() -> None:
    """No item scored: theta = 0."""
    empty = np.array([], dtype=np.float64)
    assert estimate_ability(empty, ItemParameters(empty, empty)) == 0.0


def test_estimate_ability_increases_with_the_scores() -> None:
    """More correct answers on the same items mean a higher ability."""
    items = ItemParameters(np.full(20, 1.2), np.linspace(-2, 2, 20))
    low = estimate_ability(np.r_[np.ones(5), np.zeros(15)], items)
    high = estimate_ability(np.r_[np.ones(15), np.zeros(5)], items)
    assert low < high


def test_p_correct_is_the_2pl_logistic() -> None:
    """p = sigmoid(a (theta - b)), whose slope is a p (1 - p) (central differences)."""
    items = ItemParameters(np.array([0.5, 1.0, 2.5, 1.7]), np.array([-1.0, 0.0, 0.3, 2.0]))
    for theta in (-2.0, 0.0, 0.4, 1.5):
        p = 1 / (1 + np.exp(-items.a * (theta - items.b)))
        np.testing.assert_allclose(items.p_correct(theta), p, rtol=1e-12)
        h = 1e-5
        dp = (items.p_correct(theta + h) - items.p_correct(theta - h)) / (2 * h)
        np.testing.assert_allclose(dp, items.a * p * (1 - p), rtol=1e-6)
    # p is one half at theta = b
    assert items.p_correct(0.3)[2] == pytest.approx(0.5)
