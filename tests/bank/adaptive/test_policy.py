"""The adaptive session protocol: allocation, pilot, check points and stopping."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from bank.adaptive.bounds import Bound, serfling_rho
from bank.adaptive.irt import ItemParameters
from bank.adaptive.policy import (
    AdaptiveConfig,
    AdaptiveState,
    Decision,
    Policy,
    StopReason,
    difficulty_bands,
)
from tests.bank.adaptive.neyman_reference import neyman_allocation

FloatArray = NDArray[np.float64]


def _run(
    config: AdaptiveConfig,
    population: Mapping[Hashable, FloatArray],
    seed: int = 0,
    item_parameters: Mapping[Hashable, ItemParameters] | None = None,
) -> tuple[AdaptiveState, list[tuple[int, Decision]]]:
    """Play a session the way the replay does (draw, allocate, score at once); every
    returned decision with the number of items scored when it came."""
    rng = np.random.default_rng(seed)
    queues = {k: list(rng.permutation(v)) for k, v in population.items()}
    state = AdaptiveState.start(
        config, {k: len(v) for k, v in population.items()}, item_parameters=item_parameters
    )
    decisions: list[tuple[int, Decision]] = []
    while (key := state.next_stratum()) is not None:
        state.allocated(key)
        decision = state.scored(key, float(queues[key].pop()))
        if decision is not None:
            decisions.append((state.n_scored, decision))
        assert state.n_allocated <= config.budget
    return state, decisions


def _bernoulli(
    sizes: Mapping[Hashable, int], p: Mapping[Hashable, float], seed: int = 1
) -> dict[Hashable, FloatArray]:
    rng = np.random.default_rng(seed)
    return {k: (rng.random(n) < p[k]).astype(np.float64) for k, n in sizes.items()}


def _allocation(state: AdaptiveState) -> dict[Hashable, int]:
    return {k: s.allocated for k, s in state.strata.items()}


NEVER = 1e-9
"""A target half-width no interval reaches."""


@pytest.mark.parametrize("policy", list(Policy))
def test_pilot_gives_every_stratum_its_items_first(policy: Policy) -> None:
    """The first H * pilot draws give each stratum ``pilot`` items (a stratum smaller
    than the pilot gets all it has), before any stratum gets more."""
    sizes: dict[Hashable, int] = {"a": 500, "b": 40, "c": 2, "d": 10}
    config = AdaptiveConfig(policy=policy, budget=200, pilot=3)
    state = AdaptiveState.start(config, sizes)
    for _ in range(3 + 3 + 2 + 3):
        key = state.next_stratum()
        assert key is not None
        state.allocated(key)
        state.scored(key, 1.0)
    assert _allocation(state) == {"a": 3, "b": 3, "c": 2, "d": 3}


@settings(max_examples=40, deadline=None)
@given(
    policy=st.sampled_from([Policy.FULL, Policy.PROPORTIONAL, Policy.NEYMAN, Policy.UNIFORM]),
    sizes=st.lists(st.integers(1, 80), min_size=1, max_size=5),
    budget=st.integers(1, 300),
    pilot=st.integers(0, 4),
    p=st.lists(st.floats(0.0, 1.0), min_size=5, max_size=5),
    seed=st.integers(0, 1000),
)
def test_allocation_never_exceeds_the_budget_or_a_stratum(
    policy: Policy, sizes: list[int], budget: int, pilot: int, p: list[float], seed: int
) -> None:
    """Whatever the scores: no more than the budget in all, no more than N_h in a
    stratum, and a session that does not stop for precision ends with
    min(budget, N) items."""
    size_map: dict[Hashable, int] = {f"s{i}": n for i, n in enumerate(sizes)}
    population = _bernoulli(size_map, {f"s{i}": p[i] for i in range(len(sizes))}, seed)
    config = AdaptiveConfig(policy=policy, budget=budget, pilot=pilot, check_every=7)
    state, decisions = _run(config, population, seed)
    assert state.n_allocated <= budget
    for key, s in state.strata.items():
        assert s.allocated <= size_map[key]
    assert decisions, "a session always ends with a decision"
    last = decisions[-1][1]
    assert last.stop is not None
    if last.stop is StopReason.BUDGET:
        assert state.n_allocated == min(budget, sum(sizes))
    assert state.n_scored == state.n_allocated


def test_proportional_ends_with_an_allocation_proportional_to_the_sizes() -> None:
    """``proportional`` (never precise here) allocates n_h within 1 of budget * N_h / N."""
    sizes: dict[Hashable, int] = {"a": 700, "b": 200, "c": 90, "d": 410}
    population = _bernoulli(sizes, {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.3})
    for budget in (100, 333, 700):
        config = AdaptiveConfig(policy=Policy.PROPORTIONAL, budget=budget, target_halfwidth=NEVER)
        state, _ = _run(config, population)
        total = sum(sizes.values())
        for key, s in state.strata.items():
            assert abs(s.allocated - budget * sizes[key] / total) <= 1, (budget, _allocation(state))


def test_neyman_ends_near_the_neyman_allocation_of_its_frozen_pilot_sds() -> None:
    """``neyman`` freezes each stratum's sd after the pilot and then allocates greedily:
    the final allocation is within 1 of neyman_allocation with those sds, so a stratum
    of all-equal scores gets fewer items than a 50/50 one."""
    sizes: dict[Hashable, int] = {"a": 400, "b": 400, "c": 400}
    population: dict[Hashable, FloatArray] = {
        "a": np.ones(400),
        "b": np.repeat([0.0, 1.0], 200),
        "c": np.repeat([0.0, 1.0], [100, 300]),
    }
    config = AdaptiveConfig(policy=Policy.NEYMAN, budget=300, target_halfwidth=NEVER, pilot=5)
    state, _ = _run(config, population, seed=3)
    frozen = {k: s.allocation_sd for k, s in state.strata.items()}
    expected = neyman_allocation(300, weights={k: 1 / 3 for k in sizes}, sds=frozen, sizes=sizes)
    for key in sizes:
        assert abs(state.strata[key].allocated - expected[key]) <= 1, (_allocation(state), expected)
    assert frozen["a"] < frozen["b"]
    assert state.strata["a"].allocated < state.strata["b"].allocated


@pytest.mark.parametrize("bound", list(Bound))
def test_full_never_stops_before_the_budget(bound: Bound) -> None:
    """``full`` spends its whole budget even when the interval is narrow long before
    (constant scores, a loose target), and stops with reason budget."""
    population: dict[Hashable, FloatArray] = {"a": np.ones(300), "b": np.ones(200)}
    config = AdaptiveConfig(policy=Policy.FULL, budget=150, target_halfwidth=0.5, bound=bound)
    state, decisions = _run(config, population)
    assert state.n_allocated == 150
    assert [d.stop for _, d in decisions[:-1]] == [None] * (len(decisions) - 1)
    assert decisions[-1][1].stop is StopReason.BUDGET
    assert decisions[-1][0] == 150


def test_constant_scores_stop_early_for_precision_under_the_normal_bound() -> None:
    """A population of constant scores with a loose target under the normal bound stops
    at an early check point with reason precise (well before the budget)."""
    population: dict[Hashable, FloatArray] = {
        "a": np.ones(300),
        "b": np.ones(200),
        "c": np.ones(100),
    }
    config = AdaptiveConfig(
        policy=Policy.NEYMAN, budget=400, target_halfwidth=0.1, bound=Bound.NORMAL, check_every=10
    )
    state, decisions = _run(config, population)
    n, last = decisions[-1]
    assert last.stop is StopReason.PRECISE
    assert last.halfwidth <= 0.1
    assert n % 10 == 0 and n < 100
    assert state.n_allocated == n
    assert last.estimate.mean == pytest.approx(1.0)
    assert state.next_stratum() is None


@pytest.mark.parametrize("policy", list(Policy))
def test_decisions_come_only_at_check_points_or_at_the_end(policy: Policy) -> None:
    """scored() returns a decision only every ``check_every`` scored items, or when the
    last outstanding item of a finished session is scored."""
    population = _bernoulli({"a": 90, "b": 60, "c": 30}, {"a": 0.5, "b": 0.8, "c": 0.2})
    config = AdaptiveConfig(
        policy=policy, budget=97, check_every=7, target_halfwidth=0.01, bound=Bound.NORMAL
    )
    _, decisions = _run(config, population)
    points = [n for n, _ in decisions]
    assert points[:-1] == list(range(7, 7 * len(points), 7))
    assert points[-1] % 7 == 0 or points[-1] == 97
    assert decisions[-1][1].stop is not None


def test_halfwidth_at_each_check_spends_delta_over_the_number_of_checks() -> None:
    """``uniform`` is one stratum, so its HS half-width at n scored items is
    B&M corollary 2.5, ``sqrt(rho_n ln(2 / delta') / (2n))``, at ``delta' = delta / K`` with
    K = budget // check_every + 1 (the final interval)."""
    population: dict[Hashable, FloatArray] = {"all": np.repeat([0.0, 1.0], 250)}
    config = AdaptiveConfig(policy=Policy.UNIFORM, budget=200, check_every=20, delta=0.1)
    _, decisions = _run(config, population)
    assert [n for n, _ in decisions] == list(range(20, 201, 20))
    for n, d in decisions:
        expected = math.sqrt(serfling_rho(n, 500) * math.log(2 / (0.1 / 11)) / (2 * n))
        assert d.halfwidth == pytest.approx(expected)


@pytest.mark.parametrize("budget", [25, 30, 103])
def test_a_session_reports_no_more_intervals_than_the_schedule_pays_for(budget: int) -> None:
    """Each interval is computed at delta / K, K = schedule.checks; by the union bound
    the stated confidence holds over the session only if it evaluates at most K
    intervals. A budget that is not on the check grid (25 with a check every 10: checks
    at 10 and 20, K = 2) must not add an extra interval at delta / K at the end."""
    population = _bernoulli({"a": 300, "b": 200}, {"a": 0.5, "b": 0.5})
    config = AdaptiveConfig(policy=Policy.FULL, budget=budget, check_every=10)
    _, decisions = _run(config, population)
    assert decisions[-1][1].stop is StopReason.BUDGET
    assert len(decisions) <= config.schedule.checks, [n for n, _ in decisions]


def test_outstanding_items_scored_after_a_precise_stop_keep_the_reason() -> None:
    """Judged items arrive late: a session that stops for precision while items are
    still outstanding draws nothing more, and the late scores do not relabel the stop as
    'budget' (the budget is neither spent nor the population exhausted)."""
    config = AdaptiveConfig(
        policy=Policy.PROPORTIONAL, budget=100, target_halfwidth=0.3, bound=Bound.NORMAL
    )
    state = AdaptiveState.start(config, {"a": 60, "b": 40})
    keys = []
    for _ in range(12):
        key = state.next_stratum()
        assert key is not None
        state.allocated(key)
        keys.append(key)
    results = [state.scored(key, 1.0) for key in keys]
    assert all(r is None for r in results[:9])
    first = results[9]
    assert first is not None and first.stop is StopReason.PRECISE
    assert state.next_stratum() is None
    later = [r for r in results[10:] if r is not None]
    assert all(r.stop is StopReason.PRECISE for r in later), [r.stop for r in later]


def test_record_rebuilds_the_state_without_deciding_and_check_index_counts_checks() -> None:
    """record() adds scores without evaluating the stopping rule (no decision is made or
    stored); check_index() is how many check points the scored items have passed; a
    decision afterwards matches the one a scored()-driven session makes at that point."""
    population: dict[Hashable, FloatArray] = {"a": np.repeat([0.0, 1.0], 50), "b": np.ones(50)}
    config = AdaptiveConfig(policy=Policy.PROPORTIONAL, budget=80, check_every=10)
    rng = np.random.default_rng(4)
    queues = {k: list(rng.permutation(v)) for k, v in population.items()}
    rebuilt = AdaptiveState.start(config, {"a": 100, "b": 50})
    live = AdaptiveState.start(config, {"a": 100, "b": 50})
    indices = []
    last_live: Decision | None = None
    for _ in range(30):
        key = rebuilt.next_stratum()
        assert key is not None and key == live.next_stratum()
        score = float(queues[str(key)].pop())
        rebuilt.allocated(key)
        rebuilt.record(key, score)
        live.allocated(key)
        last_live = live.scored(key, score) or last_live
        indices.append(rebuilt.check_index())
    assert rebuilt.last is None
    assert indices[:9] == [0] * 9 and indices[9:19] == [1] * 10 and indices[19:29] == [2] * 10
    assert indices[29] == 3
    assert last_live is not None
    decision = rebuilt.decision()
    assert decision.estimate == last_live.estimate
    assert decision.halfwidth == pytest.approx(last_live.halfwidth)


@pytest.mark.parametrize("score", [-0.01, 1.01, 2.0, math.nan, math.inf])
def test_scores_outside_the_unit_interval_are_refused(score: float) -> None:
    """scored() and record() accept scores in [0, 1] only (NaN included in the refusal)."""
    state = AdaptiveState.start(AdaptiveConfig(), {"a": 10})
    with pytest.raises(ValueError):
        state.scored("a", score)
    with pytest.raises(ValueError):
        state.record("a", score)
    assert state.n_scored == 0


def test_start_refuses_empty_strata_and_non_positive_costs() -> None:
    """Every stratum needs an item; costs must be positive."""
    with pytest.raises(ValueError):
        AdaptiveState.start(AdaptiveConfig(), {"a": 10, "b": 0})
    with pytest.raises(ValueError):
        AdaptiveState.start(AdaptiveConfig(), {})
    with pytest.raises(ValueError):
        AdaptiveState.start(AdaptiveConfig(), {"a": 10}, costs={"a": 0.0})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget": 0},
        {"pilot": -1},
        {"check_every": 0},
        {"bands": 0},
        {"target_halfwidth": 0.0},
        {"delta": 0.0},
        {"delta": 1.0},
    ],
)
def test_config_refuses_invalid_settings(kwargs: dict[str, float]) -> None:
    """Non-positive budget, check interval, bands or target, a negative pilot and delta
    outside (0, 1) raise ValueError."""
    with pytest.raises(ValueError):
        AdaptiveConfig(**kwargs)  # type: ignore[arg-type]


def test_costly_strata_get_fewer_items() -> None:
    """With equal sizes and sds, a stratum whose items cost 4 times as much gets about
    half the items (n_h ∝ 1/sqrt(c_h))."""
    population = {"a": np.repeat([0.0, 1.0], 200), "b": np.repeat([0.0, 1.0], 200)}
    config = AdaptiveConfig(policy=Policy.PROPORTIONAL, budget=150, target_halfwidth=NEVER)
    rng = np.random.default_rng(0)
    queues = {k: list(rng.permutation(v)) for k, v in population.items()}
    state = AdaptiveState.start(config, {"a": 400, "b": 400}, costs={"b": 4.0})
    while (key := state.next_stratum()) is not None:
        state.allocated(key)
        state.scored(key, float(queues[str(key)].pop()))
    assert _allocation(state) in ({"a": 100, "b": 50}, {"a": 101, "b": 49}, {"a": 99, "b": 51})


def test_neyman_irt_allocates_toward_bands_the_model_is_unsure_about() -> None:
    """``neyman-irt`` takes each band's sd from the model's predicted score: for a strong
    model, a band of very easy items (p ~ 1) gets fewer draws than a band of items at
    its level (p ~ 0.5)."""
    easy = ItemParameters(np.full(200, 1.5), np.full(200, -4.0))
    level = ItemParameters(np.full(200, 1.5), np.full(200, 2.0))
    population = {"easy": np.ones(200), "level": np.repeat([0.0, 1.0], 100)}
    config = AdaptiveConfig(policy=Policy.NEYMAN_IRT, budget=120, target_halfwidth=NEVER)
    rng = np.random.default_rng(0)
    queues = {k: list(rng.permutation(v)) for k, v in population.items()}
    params: dict[Hashable, ItemParameters] = {"easy": easy, "level": level}
    state = AdaptiveState.start(config, {"easy": 200, "level": 200}, item_parameters=params)
    while (key := state.next_stratum()) is not None:
        state.allocated(key)
        k = str(key)
        state.scored(k, float(queues[k].pop()), item=(1.5, float(params[k].b[0])))
    assert state.strata["easy"].allocated < state.strata["level"].allocated
    assert state.theta > 0


# --------------------------------------------------------------------------- difficulty bands


@pytest.mark.parametrize(("n", "bands"), [(100, 5), (103, 5), (7, 3), (50, 1), (10, 10)])
def test_difficulty_bands_have_equal_counts_in_order_of_difficulty(n: int, bands: int) -> None:
    """Distinct difficulties split into ``bands`` bands whose counts differ by at most 1,
    band 0 the easiest, and a harder item never in an easier band."""
    rng = np.random.default_rng(n)
    difficulty = rng.normal(size=n)
    got = difficulty_bands(difficulty, bands)
    assert len(got) == n
    counts = np.bincount(got, minlength=bands)
    assert counts.size == bands
    assert counts.max() - counts.min() <= 1
    order = np.argsort(difficulty)
    assert list(np.array(got)[order]) == sorted(got)


def test_difficulty_bands_edge_cases() -> None:
    """No items: no bands; one band: all zero; a plain list works."""
    assert difficulty_bands([], 5) == []
    assert difficulty_bands([3.0, 1.0, 2.0], 1) == [0, 0, 0]
    assert difficulty_bands([3.0, 1.0, 2.0, 0.0], 2) == [1, 0, 1, 0]
