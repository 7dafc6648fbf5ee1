"""Neyman allocation, the regularised standard deviations and the greedy marginal gain."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bank.adaptive.allocation import bounded_sd, marginal_gain, shrunk_sd
from tests.bank.adaptive.neyman_reference import neyman_allocation

KEYS = "abcdef"


@st.composite
def designs(draw: st.DrawFn, max_strata: int = 6) -> dict[str, dict[str, float]]:
    """Strata with positive weights, sds and costs (keys a, b, ...)."""
    h = draw(st.integers(1, max_strata))
    positive = st.floats(0.01, 1.0, allow_nan=False)
    return {
        KEYS[i]: {
            "weight": draw(positive),
            "sd": draw(positive),
            "cost": draw(st.floats(0.25, 4.0, allow_nan=False)),
        }
        for i in range(h)
    }


def _exact_shares(total: float, design: dict[str, dict[str, float]]) -> dict[str, float]:
    """The real-valued Neyman shares total * W S / sqrt(c) / sum(W S / sqrt(c))."""
    x = {k: d["weight"] * d["sd"] / math.sqrt(d["cost"]) for k, d in design.items()}
    return {k: total * v / sum(x.values()) for k, v in x.items()}


def _greedy(total: int, design: dict[str, dict[str, float]]) -> dict[str, int]:
    """Item after item to the stratum with the largest marginal gain (first key on ties)."""
    n = dict.fromkeys(design, 0)
    for _ in range(total):
        best = max(
            design,
            key=lambda k: marginal_gain(
                design[k]["weight"], design[k]["sd"], n[k], design[k]["cost"]
            ),
        )
        n[best] += 1
    return n


# --------------------------------------------------------------------------- neyman_allocation


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 3000), design=designs())
def test_neyman_allocation_is_within_one_of_the_exact_share_without_caps(
    total: int, design: dict[str, dict[str, float]]
) -> None:
    """Without sizes or minimums every n_h is the floor or ceiling of the real-valued
    share total * (W_h S_h / sqrt(c_h)) / sum_k (W_k S_k / sqrt(c_k)), and they sum to total."""
    alloc = neyman_allocation(
        total,
        weights={k: d["weight"] for k, d in design.items()},
        sds={k: d["sd"] for k, d in design.items()},
        costs={k: d["cost"] for k, d in design.items()},
    )
    assert set(alloc) == set(design)
    assert sum(alloc.values()) == total
    for key, exact in _exact_shares(total, design).items():
        assert abs(alloc[key] - exact) < 1.0 + 1e-9, (key, alloc[key], exact)


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(0, 3000),
    design=designs(),
    size_seed=st.lists(st.integers(1, 600), min_size=6, max_size=6),
    min_seed=st.lists(st.integers(0, 30), min_size=6, max_size=6),
)
def test_neyman_allocation_respects_sizes_and_minimums_and_sums_to_what_fits(
    total: int,
    design: dict[str, dict[str, float]],
    size_seed: list[int],
    min_seed: list[int],
) -> None:
    """With caps and a pilot minimum: n_h <= N_h, n_h >= min(minimum_h, N_h), and the
    allocation sums to min(total, sum N_h) (when the minimums fit in total)."""
    sizes = {k: size_seed[i] for i, k in enumerate(design)}
    minimum = {k: min_seed[i] for i, k in enumerate(design)}
    needed = sum(min(minimum[k], sizes[k]) for k in design)
    kwargs = {
        "weights": {k: d["weight"] for k, d in design.items()},
        "sds": {k: d["sd"] for k, d in design.items()},
        "costs": {k: d["cost"] for k, d in design.items()},
        "sizes": sizes,
        "minimum": minimum,
    }
    if needed > total:
        with pytest.raises(ValueError, match="pilot"):
            neyman_allocation(total, **kwargs)  # type: ignore[arg-type]
        return
    alloc: dict[str, int] = neyman_allocation(total, **kwargs)  # type: ignore[arg-type]
    assert sum(alloc.values()) == min(total, sum(sizes.values()))
    for key in design:
        assert min(minimum[key], sizes[key]) <= alloc[key] <= sizes[key]


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 2000), design=designs(), pilot=st.integers(0, 20))
def test_neyman_allocation_spreads_the_rest_after_the_pilot_by_neyman_shares(
    total: int, design: dict[str, dict[str, float]], pilot: int
) -> None:
    """With an uncapped pilot minimum m per stratum the allocation is m plus the floor or
    ceiling of the Neyman share of the remaining total - H m items."""
    rest = total - pilot * len(design)
    if rest < 0:
        return
    alloc = neyman_allocation(
        total,
        weights={k: d["weight"] for k, d in design.items()},
        sds={k: d["sd"] for k, d in design.items()},
        costs={k: d["cost"] for k, d in design.items()},
        minimum=dict.fromkeys(design, pilot),
    )
    for key, exact in _exact_shares(rest, design).items():
        assert math.floor(exact) <= alloc[key] - pilot <= math.ceil(exact)


def test_neyman_allocation_worked_example() -> None:
    """Cochran's proportions: W = (0.5, 0.3, 0.2), S = (1, 2, 4), equal costs; x = (0.5,
    0.6, 0.8), so 190 items split 50, 60, 80; quadrupling c_c halves its share."""
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    sds = {"a": 1.0, "b": 2.0, "c": 4.0}
    assert neyman_allocation(190, weights=weights, sds=sds) == {"a": 50, "b": 60, "c": 80}
    assert neyman_allocation(150, weights=weights, sds=sds, costs={"c": 4.0}) == {
        "a": 50,
        "b": 60,
        "c": 40,
    }


def test_neyman_allocation_caps_a_stratum_and_moves_the_rest_to_the_others() -> None:
    """A stratum whose Neyman share exceeds its population gets its population; the
    remainder goes to the others in their Neyman proportion."""
    alloc = neyman_allocation(
        100,
        weights={"a": 0.5, "b": 0.25, "c": 0.25},
        sds={"a": 1.0, "b": 1.0, "c": 3.0},
        sizes={"a": 1000, "b": 1000, "c": 20},
    )
    assert alloc == {"a": 53, "b": 27, "c": 20}


def test_neyman_allocation_with_all_sds_zero_falls_back_to_the_weights() -> None:
    """With every S_h = 0 the Neyman shares are undefined; the weights are used instead."""
    alloc = neyman_allocation(10, weights={"a": 0.8, "b": 0.2}, sds={"a": 0.0, "b": 0.0})
    assert alloc == {"a": 8, "b": 2}


def test_neyman_allocation_with_a_zero_sd_stratum_still_spends_what_fits() -> None:
    """The docstring promises a sum of min(total, sum(sizes)) when the minimums fit: when
    the only stratum with S_h > 0 is capped, the items left over must still be placed
    (here in the zero-sd stratum), not silently dropped."""
    alloc = neyman_allocation(
        10, weights={"a": 0.5, "b": 0.5}, sds={"a": 1.0, "b": 0.0}, sizes={"a": 3, "b": 10}
    )
    assert alloc["a"] == 3
    assert sum(alloc.values()) == 10


@pytest.mark.parametrize(
    ("total", "overrides"),
    [
        (10, {"weights": {"a": -0.5, "b": 0.5}}),
        (10, {"sds": {"a": -1.0, "b": 1.0}}),
        (10, {"costs": {"a": 0.0}}),
        (10, {"costs": {"b": -2.0}}),
        (10, {"minimum": {"a": 6, "b": 5}}),  # the pilot needs more than the total
        (-1, {}),
        (10, {"minimum": {"a": -3}}),
        (10, {"sizes": {"a": -3, "b": 5}}),
    ],
    ids=[
        "negative-weight",
        "negative-sd",
        "zero-cost",
        "negative-cost",
        "pilot-over-total",
        "negative-total",
        "negative-minimum",
        "negative-size",
    ],
)
def test_neyman_allocation_refuses_negative_or_impossible_inputs(
    total: int, overrides: dict[str, dict[str, float]]
) -> None:
    """Negative weights, sds, totals, minimums or sizes, non-positive costs and a pilot
    larger than the total raise ValueError (none may yield a negative allocation)."""
    kwargs: dict[str, dict[str, float]] = {
        "weights": {"a": 0.5, "b": 0.5},
        "sds": {"a": 1.0, "b": 1.0},
    }
    kwargs.update(overrides)
    with pytest.raises(ValueError):
        neyman_allocation(total, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- shrunk_sd / bounded_sd


@given(
    sample_sd=st.floats(0.0, 2.0),
    n=st.integers(0, 500),
    prior_sd=st.floats(0.0, 2.0),
    prior_weight=st.floats(0.0, 50.0),
    floor=st.floats(0.0, 1.0),
)
def test_shrunk_sd_pools_variances_with_pseudo_observations_and_floors(
    sample_sd: float, n: int, prior_sd: float, prior_weight: float, floor: float
) -> None:
    """S = max(floor, sqrt((n s^2 + k S0^2) / (n + k))); with n + k = 0 the prior."""
    got = shrunk_sd(sample_sd, n, prior_sd=prior_sd, prior_weight=prior_weight, floor=floor)
    if n + prior_weight == 0:
        expected = max(prior_sd, floor)
    else:
        expected = max(
            floor, math.sqrt((n * sample_sd**2 + prior_weight * prior_sd**2) / (n + prior_weight))
        )
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert got >= floor


def test_shrunk_sd_worked_values() -> None:
    """Four pilot scores with s = 0 and a prior of 0.5 at weight 4 give sqrt(0.125); a
    floor above that wins; many observations dominate the prior."""
    assert shrunk_sd(0.0, 4, prior_sd=0.5, prior_weight=4.0, floor=0.1) == pytest.approx(
        math.sqrt(0.125)
    )
    assert shrunk_sd(0.0, 4, prior_sd=0.5, prior_weight=4.0, floor=0.4) == 0.4
    assert shrunk_sd(0.2, 10**6, prior_sd=0.5, prior_weight=4.0, floor=0.0) == pytest.approx(
        0.2, rel=1e-4
    )
    assert shrunk_sd(0.3, 0, prior_sd=0.05, prior_weight=4.0, floor=0.1) == 0.1


@given(
    sample_mean=st.floats(0.0, 1.0),
    n=st.integers(0, 500),
    prior_mean=st.floats(0.0, 1.0),
    prior_weight=st.floats(0.0, 50.0),
    floor=st.floats(0.0, 0.6),
)
def test_bounded_sd_is_the_bernoulli_sd_of_the_shrunk_mean(
    sample_mean: float, n: int, prior_mean: float, prior_weight: float, floor: float
) -> None:
    """sqrt(mu (1 - mu)) for mu = (n ybar + k mu0) / (n + k), at least ``floor``."""
    got = bounded_sd(sample_mean, n, prior_mean=prior_mean, prior_weight=prior_weight, floor=floor)
    mu = (
        prior_mean
        if n + prior_weight == 0
        else ((n * sample_mean + prior_weight * prior_mean) / (n + prior_weight))
    )
    assert got == pytest.approx(max(floor, math.sqrt(mu * (1 - mu))), rel=1e-9, abs=1e-12)
    assert floor <= got <= max(floor, 0.5)


def test_bounded_sd_worked_values() -> None:
    """A pilot of 4 ones shrunk toward 0.5 at weight 4 has mu = 0.75, sd sqrt(3)/4; all
    ones with no prior has sd 0 and returns the floor."""
    assert bounded_sd(1.0, 4, prior_mean=0.5, prior_weight=4.0, floor=0.1) == pytest.approx(
        math.sqrt(3) / 4
    )
    assert bounded_sd(1.0, 4, prior_mean=1.0, prior_weight=4.0, floor=0.1) == 0.1
    assert bounded_sd(0.0, 0, prior_mean=0.2, prior_weight=0.0, floor=0.0) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "call",
    [
        lambda: shrunk_sd(0.5, -1, prior_sd=0.5, prior_weight=1.0, floor=0.1),
        lambda: shrunk_sd(0.5, 1, prior_sd=0.5, prior_weight=-1.0, floor=0.1),
        lambda: shrunk_sd(0.5, 1, prior_sd=0.5, prior_weight=1.0, floor=-0.1),
        lambda: bounded_sd(0.5, -1, prior_mean=0.5, prior_weight=1.0, floor=0.1),
        lambda: bounded_sd(1.2, 1, prior_mean=0.5, prior_weight=1.0, floor=0.1),
        lambda: bounded_sd(0.5, 1, prior_mean=-0.1, prior_weight=1.0, floor=0.1),
    ],
)
def test_sd_helpers_refuse_negative_counts_and_means_outside_the_unit_interval(
    call: object,
) -> None:
    """Negative n, prior weight or floor and means outside [0, 1] raise ValueError."""
    assert callable(call)
    with pytest.raises(ValueError):
        call()


# --------------------------------------------------------------------------- marginal_gain


@given(
    weight=st.floats(0.01, 1.0),
    sd=st.floats(0.0, 1.0),
    n=st.integers(1, 10_000),
    extra=st.integers(1, 10_000),
    cost=st.floats(0.1, 10.0),
)
def test_marginal_gain_is_the_variance_term_removed_by_one_more_item_per_cost(
    weight: float, sd: float, n: int, extra: int, cost: float
) -> None:
    """gain = [W^2 S^2 (1/n - 1/N) - W^2 S^2 (1/(n+1) - 1/N)] / c, whatever N >= n + 1."""
    population = n + extra
    before = weight**2 * sd**2 * (1 / n - 1 / population)
    after = weight**2 * sd**2 * (1 / (n + 1) - 1 / population)
    assert marginal_gain(weight, sd, n, cost) == pytest.approx(
        (before - after) / cost, rel=1e-9, abs=1e-15
    )


def test_marginal_gain_of_an_empty_stratum_is_infinite() -> None:
    """A stratum with no item yet must be drawn from first."""
    assert marginal_gain(0.1, 0.2, 0, 3.0) == math.inf


@settings(max_examples=150, deadline=None)
@given(total=st.integers(1, 400), design=designs(max_strata=4))
def test_greedy_marginal_gain_reproduces_neyman_allocation_within_one(
    total: int, design: dict[str, dict[str, float]]
) -> None:
    """Giving each next item to the stratum with the largest marginal gain ends within
    ±1 of neyman_allocation per stratum, whenever every exact Neyman share is at least 1
    (the greedy's first item per stratum has infinite gain, a forced minimum of 1)."""
    assume(min(_exact_shares(total, design).values()) >= 1.0)
    greedy = _greedy(total, design)
    neyman = neyman_allocation(
        total,
        weights={k: d["weight"] for k, d in design.items()},
        sds={k: d["sd"] for k, d in design.items()},
        costs={k: d["cost"] for k, d in design.items()},
    )
    assert sum(greedy.values()) == total
    for key in design:
        assert abs(greedy[key] - neyman[key]) <= 1, (key, greedy, neyman)


@settings(max_examples=100, deadline=None)
@given(total=st.integers(4, 300), design=designs(max_strata=4))
def test_greedy_allocation_has_the_smallest_variance_among_integer_allocations(
    total: int, design: dict[str, dict[str, float]]
) -> None:
    """The greedy allocation (equal costs) minimises sum W^2 S^2 / n_h over integer
    allocations with n_h >= 1: moving one item between any two strata never helps."""
    for d in design.values():
        d["cost"] = 1.0
    if total < len(design):
        return
    greedy = _greedy(total, design)

    def variance(n: dict[str, int]) -> float:
        return sum(d["weight"] ** 2 * d["sd"] ** 2 / n[k] for k, d in design.items())

    best = variance(greedy)
    for src in design:
        for dst in design:
            if src == dst or greedy[src] <= 1:
                continue
            moved = dict(greedy)
            moved[src] -= 1
            moved[dst] += 1
            assert variance(moved) >= best * (1 - 1e-12)
