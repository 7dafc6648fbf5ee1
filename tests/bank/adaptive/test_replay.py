"""Replay of adaptive sessions on a synthetic response matrix, and the summary figures."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.special import expit

import bank.adaptive.replay as replay_module
from bank.adaptive.bounds import Bound
from bank.adaptive.irt import ItemParameters, fit_2pl
from bank.adaptive.policy import AdaptiveConfig, Policy
from bank.adaptive.recorded import ResponseMatrix
from bank.adaptive.replay import (
    PolicySummary,
    ReplayResult,
    SessionOutcome,
    replay,
    replay_session,
    summarise,
)

FloatArray = NDArray[np.float64]
BUDGET = 200
ABILITIES = [-2.4, -1.4, -0.5, 0.5, 1.4, 2.4]
CONFIG = AdaptiveConfig(budget=BUDGET, target_halfwidth=0.1, bound=Bound.NORMAL, check_every=20)


@functools.cache
def _data() -> tuple[ResponseMatrix, list[str], FloatArray]:
    """6 models of clearly different abilities x 600 items in 4 disciplines (2PL, 5% of
    cells unanswered); also the items' true difficulties."""
    rng = np.random.default_rng(0)
    b = rng.normal(0.0, 1.0, 600)
    a = rng.uniform(0.7, 2.0, 600)
    theta = np.array(ABILITIES)
    y = (rng.random((6, 600)) < expit(a * (theta[:, None] - b))).astype(np.float64)
    y[rng.random(y.shape) < 0.05] = np.nan
    strata = [f"d{j % 4}" for j in range(600)]
    matrix = ResponseMatrix([f"m{i}" for i in range(6)], [f"q{j}" for j in range(600)], y)
    return matrix, strata, b


@functools.cache
def _all_policies() -> ReplayResult:
    matrix, strata, _ = _data()
    return replay(matrix, strata, policies=list(Policy), config=CONFIG, runs=4, seed=1)


def test_replay_full_uses_exactly_the_budget() -> None:
    """``full`` never stops early: every session uses the whole budget."""
    full = _all_policies().policies["full"]
    assert full.items_mean == BUDGET
    assert full.items_p95 == BUDGET
    assert full.saved_vs_full == 0.0
    assert full.stopped_precise == 0.0


@pytest.mark.parametrize("policy", [p.value for p in Policy])
def test_replay_summary_figures_are_consistent(policy: str) -> None:
    """For every policy: saved_vs_full = 1 - items_mean / budget, no session over the
    budget, coverage and stopped_precise are shares, the ranking of the well separated
    models is recovered (spearman and kendall close to 1) and the error is a few points."""
    summary = _all_policies().policies[policy]
    assert summary.saved_vs_full == pytest.approx(1 - summary.items_mean / BUDGET)
    assert 0 < summary.items_mean <= summary.items_p95 <= BUDGET
    assert 0.0 <= summary.coverage <= 1.0
    assert 0.0 <= summary.stopped_precise <= 1.0
    assert summary.spearman >= 0.94
    assert summary.kendall >= 0.86
    assert 0 < summary.mae < 6.0
    assert 0 < summary.halfwidth_mean <= 100.0


def test_adaptive_policies_save_items_with_a_loose_target() -> None:
    """With a 10-point target under the normal bound the adaptive policies stop early
    (for precision) and so save a good share of the budget; ``full`` saves nothing."""
    result = _all_policies()
    assert set(result.policies) == {p.value for p in Policy}
    for policy in ("uniform", "proportional", "neyman", "neyman-irt"):
        assert result.policies[policy].saved_vs_full > 0.2, policy
        assert result.policies[policy].stopped_precise > 0.5, policy


def test_replay_full_scores_are_the_means_over_answered_items() -> None:
    """The target of every session is the model's mean over the items it answered, in
    points (0-100)."""
    matrix, _, _ = _data()
    result = _all_policies()
    assert list(result.full_scores) == matrix.models
    for i, model in enumerate(matrix.models):
        assert result.full_scores[model] == pytest.approx(float(np.nanmean(matrix.scores[i])) * 100)
    scores = list(result.full_scores.values())
    assert scores == sorted(scores)  # the abilities are increasing
    assert result.runs == 4 and result.config == CONFIG


def test_replay_is_identical_with_one_or_two_worker_processes() -> None:
    """Run r of model m draws from default_rng([seed, r, m]): jobs=1 and jobs=2 give the
    same summaries, exactly."""
    matrix, strata, _ = _data()
    policies = [Policy.NEYMAN, Policy.NEYMAN_IRT]
    one = replay(matrix, strata, policies=policies, config=CONFIG, runs=2, seed=5, jobs=1)
    two = replay(matrix, strata, policies=policies, config=CONFIG, runs=2, seed=5, jobs=2)
    assert one.policies == two.policies
    other_seed = replay(matrix, strata, policies=policies, config=CONFIG, runs=2, seed=6)
    assert other_seed.policies != one.policies


def test_replay_reports_progress_per_policy() -> None:
    """progress(policy, sessions) is called once per policy with runs x models."""
    matrix, strata, _ = _data()
    calls: list[tuple[str, int]] = []
    replay(
        matrix,
        strata,
        policies=[Policy.UNIFORM, Policy.FULL],
        config=CONFIG,
        runs=2,
        progress=lambda policy, n: calls.append((policy, n)),
    )
    assert calls == [("uniform", 12), ("full", 12)]


def test_replay_refuses_a_single_model() -> None:
    """A ranking needs at least two models."""
    matrix, strata, _ = _data()
    one = ResponseMatrix(matrix.models[:1], matrix.item_ids, matrix.scores[:1])
    with pytest.raises(ValueError):
        replay(one, strata, policies=[Policy.FULL], config=CONFIG, runs=1)


def _spy_fit(monkeypatch: pytest.MonkeyPatch) -> list[FloatArray]:
    """Record the matrices replay fits the 2PL model to."""
    seen: list[FloatArray] = []
    real = fit_2pl

    def spy(responses: FloatArray, **kwargs: Any) -> Any:
        seen.append(np.array(responses, copy=True))
        return real(responses, **kwargs)

    monkeypatch.setattr(replay_module, "fit_2pl", spy)
    return seen


def test_neyman_irt_without_history_fits_leaving_the_simulated_model_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without history, model m's item parameters come from a fit on the other models
    only (one fit per model), so no session learns from the responses it is scored on."""
    matrix, strata, _ = _data()
    seen = _spy_fit(monkeypatch)
    result = replay(matrix, strata, policies=[Policy.NEYMAN_IRT], config=CONFIG, runs=2)
    assert len(seen) == 6
    for m, fitted in enumerate(seen):
        np.testing.assert_array_equal(fitted, np.delete(matrix.scores, m, axis=0))
    assert result.policies["neyman-irt"].spearman >= 0.94


def test_neyman_irt_with_history_fits_the_history_aligned_to_the_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With history (other models, columns in another order, an extra item and one item
    missing), one fit is made on the history's columns reordered to the response
    matrix's items, NaN for the item the history lacks; the replay still ranks well."""
    matrix, strata, b = _data()
    rng = np.random.default_rng(42)
    theta = rng.normal(0, 1.2, 12)
    hist = (rng.random((12, 600)) < expit(theta[:, None] - b[None, :])).astype(np.float64)
    order = rng.permutation(600)[:-1]  # drop one item, shuffle the rest
    history = ResponseMatrix(
        [f"h{i}" for i in range(12)],
        [matrix.item_ids[j] for j in order] + ["extra"],
        np.column_stack([hist[:, order], np.ones(12)]),
    )
    missing = matrix.item_ids[int(np.setdiff1d(np.arange(600), order)[0])]
    seen = _spy_fit(monkeypatch)
    result = replay(
        matrix, strata, policies=[Policy.NEYMAN_IRT], config=CONFIG, runs=2, history=history
    )
    assert len(seen) == 1
    expected = hist.copy()
    expected[:, matrix.item_ids.index(missing)] = np.nan
    np.testing.assert_array_equal(seen[0], expected)
    summary = result.policies["neyman-irt"]
    assert summary.spearman >= 0.94
    assert summary.saved_vs_full == pytest.approx(1 - summary.items_mean / BUDGET)


def test_non_irt_policies_fit_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``neyman-irt`` needs item parameters."""
    matrix, strata, _ = _data()
    seen = _spy_fit(monkeypatch)
    replay(matrix, strata, policies=[Policy.NEYMAN, Policy.FULL], config=CONFIG, runs=1)
    assert seen == []


@pytest.mark.parametrize("policy", list(Policy))
@pytest.mark.parametrize("bound", [Bound.NORMAL, Bound.HOEFFDING_SERFLING])
def test_session_over_a_population_smaller_than_the_budget_is_exact(
    policy: Policy, bound: Bound
) -> None:
    """A model that answered fewer items than the budget: the session draws only
    answered items, all of them, and its estimate is the full-set score with
    half-width 0 (the finite-population correction)."""
    matrix, strata, b = _data()
    scores = matrix.scores[2].copy()
    scores[150:] = np.nan
    answered = int(np.sum(~np.isnan(scores)))
    config = AdaptiveConfig(policy=policy, budget=BUDGET, bound=bound, target_halfwidth=1e-9)
    params = ItemParameters(np.ones(600), b) if policy is Policy.NEYMAN_IRT else None
    outcome = replay_session(scores, strata, config, np.random.default_rng(0), params)
    assert outcome.items == answered
    assert outcome.estimate == pytest.approx(float(np.nanmean(scores)), abs=1e-12)
    assert outcome.halfwidth == pytest.approx(0.0, abs=1e-12)
    assert outcome.stop == "budget"


def test_replay_session_is_reproducible_from_its_generator() -> None:
    """The same generator seed gives the same session."""
    matrix, strata, _ = _data()
    config = AdaptiveConfig(policy=Policy.NEYMAN, budget=BUDGET, bound=Bound.NORMAL)
    first = replay_session(matrix.scores[1], strata, config, np.random.default_rng(9))
    again = replay_session(matrix.scores[1], strata, config, np.random.default_rng(9))
    assert first == again


# --------------------------------------------------------------------------- summarise


def test_summarise_against_a_hand_computation() -> None:
    """2 runs x 3 models, budget 100, full scores (0.2, 0.5, 0.8):
    items 100 50 80 / 60 90 40 -> mean 70, saved 0.3, p95 = 90 + 0.75 * 10 = 97.5;
    errors .05 .05 .1 / .3 .1 .1 -> mae 70/6 points;
    widths .06 .04 .11 / .2 .2 .05 -> coverage 3/6, mean width 11 points;
    run 1 ranks like the full set (spearman 1, kendall 1), run 2 swaps the first two
    (spearman 1 - 6*2/(3*8) = 0.5, kendall (2 - 1)/3) -> 0.75 and 2/3;
    4 of 6 sessions stopped for precision."""
    full = np.array([0.2, 0.5, 0.8])
    rows = [
        [(100, 0.25, 0.06, "budget"), (50, 0.45, 0.04, "precise"), (80, 0.9, 0.11, "precise")],
        [(60, 0.5, 0.2, "precise"), (90, 0.4, 0.2, "budget"), (40, 0.7, 0.05, "precise")],
    ]
    outcomes = np.empty((2, 3), dtype=object)
    for r, row in enumerate(rows):
        for m, (items, est, width, stop) in enumerate(row):
            outcomes[r, m] = SessionOutcome(items, est, width, stop)
    summary = summarise(outcomes, full, 100)
    expected = PolicySummary(
        items_mean=70.0,
        saved_vs_full=0.3,
        mae=70 / 6,
        spearman=0.75,
        kendall=2 / 3,
        coverage=0.5,
        items_p95=97.5,
        halfwidth_mean=11.0,
        stopped_precise=4 / 6,
    )
    for name in PolicySummary.__slots__:
        assert getattr(summary, name) == pytest.approx(
            getattr(expected, name), abs=1e-12, nan_ok=True
        ), name


def test_summarise_counts_an_interval_that_just_reaches_the_target_as_covering() -> None:
    """coverage counts |estimate - full| <= half-width (closed interval)."""
    outcomes = np.empty((1, 2), dtype=object)
    outcomes[0, 0] = SessionOutcome(10, 0.25, 0.25, "precise")  # |0.25 - 0.5| = 0.25
    outcomes[0, 1] = SessionOutcome(10, 0.75, 0.0, "budget")  # exact
    summary = summarise(outcomes, np.array([0.5, 0.75]), 10)
    assert summary.coverage == 1.0
    assert summary.saved_vs_full == 0.0
    assert math.isclose(summary.mae, 12.5)


def test_summarise_counts_exposure_per_item_and_coverage_of_the_standard_error() -> None:
    """Four sessions: item 7 given in three of them -> max exposure 3/4; errors
    .01 .02 .03 .04 against standard errors .01 .01 .02 .01 -> within 1.96 se: 1, 0, 1, 0."""
    full = np.array([0.5, 0.5])
    cells = [
        [((7, 1), 0.51, 0.01), ((7, 2), 0.52, 0.01)],
        [((7, 3), 0.53, 0.02), ((4, 5), 0.54, 0.01)],
    ]
    outcomes = np.empty((2, 2), dtype=object)
    for r, row in enumerate(cells):
        for m, (drawn, estimate, se) in enumerate(row):
            outcomes[r, m] = SessionOutcome(2, estimate, 0.1, "budget", drawn, {}, se)
    summary = summarise(outcomes, full, 10)
    assert summary.max_exposure == pytest.approx(3 / 4)
    assert summary.coverage_95 == pytest.approx(2 / 4)
