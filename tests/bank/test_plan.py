"""Quota arithmetic of the three-stage plan (pure, property-based)."""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from bank.sampling.plan import StratumSupply, apportion, plan_quotas
from bank.stratum_key import StratumKey

weights_st = st.dictionaries(
    st.text(alphabet="abcdefgh", min_size=1, max_size=3),
    st.integers(min_value=1, max_value=10_000),
    min_size=1,
    max_size=12,
)


@given(total=st.integers(0, 5000), weights=weights_st)
def test_apportion_sums_exactly_and_each_share_is_floor_or_ceiling(
    total: int, weights: dict[str, int]
) -> None:
    shares = apportion(total, {k: float(w) for k, w in weights.items()})
    assert sum(shares.values()) == total
    weight_sum = sum(weights.values())
    for key, share in shares.items():
        exact = total * weights[key] / weight_sum
        assert math.floor(exact) <= share <= math.ceil(exact)


@given(
    total=st.integers(0, 5000),
    weights=weights_st,
    cap_seed=st.lists(st.integers(0, 800), min_size=12, max_size=12),
)
def test_apportion_respects_caps_and_moves_the_rest_to_siblings(
    total: int, weights: dict[str, int], cap_seed: list[int]
) -> None:
    caps = {k: cap_seed[i] for i, k in enumerate(weights)}
    shares = apportion(total, {k: float(w) for k, w in weights.items()}, caps)
    assert sum(shares.values()) == min(total, sum(caps.values()))
    assert all(0 <= shares[k] <= caps[k] for k in weights)
    # nobody below its cap could have been given more than its proportional due:
    open_keys = [k for k in weights if shares[k] < caps[k]]
    if open_keys and sum(shares.values()) < total:
        raise AssertionError("capacity left unused while the total is not met")


def _supply(cells: dict[tuple[str, str, str], tuple[int, int]]) -> list[StratumSupply]:
    return [StratumSupply(StratumKey(*k), bank=b, available=a) for k, (b, a) in cells.items()]


cells_st = st.dictionaries(
    st.tuples(
        st.sampled_from([f"d{i}" for i in range(10)]),
        st.sampled_from(["multiple_choice", "true_false", "fill_in", "essay"]),
        st.sampled_from([f"s{i}" for i in range(6)]),
    ),
    st.integers(1, 400),
    min_size=1,
    max_size=80,
)


@settings(max_examples=200)
@given(n=st.integers(1, 2000), sizes=cells_st)
def test_plan_with_ample_supply_meets_every_quota_rule(
    n: int, sizes: dict[tuple[str, str, str], int]
) -> None:
    big = {k: (v * 2000, v * 2000) for k, v in sizes.items()}  # supply never binds
    plan = plan_quotas(n, _supply(big))
    assert plan.total == n
    assert plan.shortfall == {"unplaced": 0}
    by_discipline: dict[str, int] = defaultdict(int)
    by_type: dict[tuple[str, str], int] = defaultdict(int)
    for key, quota in plan.quotas.items():
        by_discipline[key.discipline] += quota
        by_type[(key.discipline, key.qtype)] += quota
    disciplines = {k[0] for k in big}
    counts = [by_discipline.get(d, 0) for d in disciplines]
    assert max(counts) - min(counts) <= 1
    # type quotas within +-1 of the bank's proportions inside each discipline
    bank_d: dict[str, int] = defaultdict(int)
    bank_dt: dict[tuple[str, str], int] = defaultdict(int)
    bank_dts: dict[tuple[str, str, str], int] = defaultdict(int)
    for (d, t, s), (b, _) in big.items():
        bank_d[d] += b
        bank_dt[(d, t)] += b
        bank_dts[(d, t, s)] += b
    for (d, t), b in bank_dt.items():
        ideal = by_discipline[d] * b / bank_d[d]
        assert abs(by_type.get((d, t), 0) - ideal) < 1
    for (d, t, s), b in bank_dts.items():
        ideal = by_type.get((d, t), 0) * b / bank_dt[(d, t)]
        assert abs(plan.quotas.get(StratumKey(d, t, s), 0) - ideal) < 1


@settings(max_examples=200)
@given(
    n=st.integers(1, 2000),
    sizes=cells_st,
    fractions=st.lists(st.floats(0, 1), min_size=80, max_size=80),
)
def test_plan_never_exceeds_availability_and_reports_what_it_could_not_place(
    n: int, sizes: dict[tuple[str, str, str], int], fractions: list[float]
) -> None:
    cells = {k: (v, int(v * fractions[i])) for i, (k, v) in enumerate(sizes.items())}
    plan = plan_quotas(n, _supply(cells))
    available = sum(a for _, a in cells.values())
    assert plan.total == min(n, available)
    assert plan.shortfall["unplaced"] == n - plan.total
    for key, quota in plan.quotas.items():
        assert quota <= cells[(key.discipline, key.qtype, key.subdiscipline)][1]


def test_a_short_stratum_hands_its_share_to_its_siblings_and_says_so() -> None:
    cells = {
        ("law", "essay", "civil"): (100, 100),
        ("law", "essay", "criminal"): (100, 3),
        ("math", "essay", "algebra"): (200, 200),
    }
    plan = plan_quotas(100, _supply(cells))
    assert plan.quotas[StratumKey("law", "essay", "criminal")] == 3
    assert plan.quotas[StratumKey("law", "essay", "civil")] == 47
    assert plan.quotas[StratumKey("math", "essay", "algebra")] == 50
    assert plan.shortfall["by_subdiscipline"] == {"law/essay/criminal": 22}
    assert plan.shortfall["unplaced"] == 0


def test_a_short_discipline_hands_its_share_to_the_other_disciplines() -> None:
    cells = {("law", "essay", "civil"): (10, 10), ("math", "essay", "algebra"): (500, 500)}
    plan = plan_quotas(100, _supply(cells))
    assert plan.quotas[StratumKey("law", "essay", "civil")] == 10
    assert plan.quotas[StratumKey("math", "essay", "algebra")] == 90
    assert plan.shortfall["by_discipline"] == {"law": 40}


def test_ties_are_broken_by_the_seed_not_always_by_name() -> None:
    cells = {(f"d{i}", "essay", "s"): (100, 100) for i in range(3)}
    lucky = set()
    for seed in range(30):
        plan = plan_quotas(10, _supply(cells), tie_seed=str(seed))
        lucky.add(max(plan.quotas, key=lambda k: plan.quotas[k]).discipline)
    assert lucky == {"d0", "d1", "d2"}
