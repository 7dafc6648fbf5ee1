"""Review rules: each fires on a crafted item, never on NaN, at configurable thresholds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.health.flags import (
    FlagRule,
    FlagThresholds,
    flag_items,
    flag_masks,
    rule_counts,
)
from bank.health.results import ItemStatistics

NAN = np.nan


def make_stats(
    p: list[float],
    *,
    high: list[float] | None = None,
    cas: list[float] | None = None,
    inversions: list[int] | None = None,
) -> ItemStatistics:
    """Item statistics with the figures the rules read; the rest are neutral."""
    n = len(p)
    pa = np.asarray(p, dtype=np.float64)
    high_a = np.full(n, 0.5) if high is None else np.asarray(high, dtype=np.float64)
    cas_a = np.full(n, 0.5) if cas is None else np.asarray(cas, dtype=np.float64)
    inv = np.zeros(n, np.int64) if inversions is None else np.asarray(inversions, np.int64)
    return ItemStatistics(
        n=np.full(n, 10, np.int64),
        p=pa,
        difficulty=1.0 - pa,
        point_biserial=high_a - 0.2,
        point_biserial_low=high_a - 0.4,
        point_biserial_high=high_a,
        spearman=np.full(n, 0.5),
        cas=cas_a,
        cas_kfold=cas_a,
        inversions=inv,
        pairs=np.full(n, 6, np.int64),
        cad=np.exp(-12.0 * inv / 6.0),
        separation=np.full(n, 0.5),
    )


def test_saturated_and_floor_at_their_bounds() -> None:
    stats = make_stats([0.95, 0.95 - 1e-6, 1.0, 0.05, 0.05 + 1e-6, 0.0, NAN, 0.5])
    masks = flag_masks(stats)
    assert masks[FlagRule.SATURATED].tolist() == [1, 0, 1, 0, 0, 0, 0, 0]
    assert masks[FlagRule.FLOOR].tolist() == [0, 0, 0, 1, 0, 1, 0, 0]


def test_saturated_bound_survives_float_noise() -> None:
    p = np.array([19 / 20, sum([0.95 / 3] * 3), 0.1 + 0.2 - 0.25])  # 0.95 and 0.05 with noise
    masks = flag_masks(make_stats(p.tolist()))
    assert masks[FlagRule.SATURATED].tolist() == [True, True, False]
    assert masks[FlagRule.FLOOR].tolist() == [False, False, True]


def test_negative_discrimination_needs_the_whole_interval_below_zero() -> None:
    stats = make_stats([0.5] * 4, high=[-0.01, 0.0, 0.3, NAN])
    assert flag_masks(stats)[FlagRule.NEGATIVE_DISCRIMINATION].tolist() == [1, 0, 0, 0]


def test_low_cas_only_where_saturation_does_not_explain_it() -> None:
    stats = make_stats(
        [0.5, 0.5, 0.5, 0.97, 0.02, 0.5, NAN], cas=[0.05, 0.1, 0.3, 0.0, 0.0, NAN, 0.0]
    )
    masks = flag_masks(stats)
    assert masks[FlagRule.LOW_CAS].tolist() == [1, 0, 0, 0, 0, 0, 1]
    assert masks[FlagRule.SATURATED][3] and masks[FlagRule.FLOOR][4]


def test_family_inversion() -> None:
    stats = make_stats([0.5] * 4, inversions=[0, 1, 3, 0])
    assert flag_masks(stats)[FlagRule.FAMILY_INVERSION].tolist() == [0, 1, 1, 0]
    strict = FlagThresholds(family_inversions=2)
    assert flag_masks(stats, strict)[FlagRule.FAMILY_INVERSION].tolist() == [0, 0, 1, 0]


def test_judge_disagreement() -> None:
    stats = make_stats([0.5] * 5)
    share = np.array([0.25, 0.5, 0.2, 1.0, NAN])
    judged = np.array([4, 1, 5, 2, 0])
    masks = flag_masks(stats, judge_disagreement=share, judged=judged)
    assert masks[FlagRule.JUDGE_DISAGREEMENT].tolist() == [1, 0, 0, 1, 0]
    assert not flag_masks(stats)[FlagRule.JUDGE_DISAGREEMENT].any()
    with pytest.raises(ValueError, match="together"):
        flag_masks(stats, judge_disagreement=share)
    with pytest.raises(ValueError, match="one value per item"):
        flag_masks(stats, judge_disagreement=share[:3], judged=judged[:3])


def test_nan_never_flags() -> None:
    n = 3
    stats = make_stats([NAN] * n, high=[NAN] * n, cas=[NAN] * n)
    masks = flag_masks(stats, judge_disagreement=np.full(n, NAN), judged=np.full(n, 9))
    assert not any(mask.any() for mask in masks.values())
    assert flag_items(stats) == {}


def test_thresholds_are_configurable() -> None:
    stats = make_stats([0.9, 0.12, 0.5], high=[0.5, 0.5, 0.05], cas=[0.5, 0.5, 0.25])
    assert flag_items(stats) == {}
    loose = FlagThresholds(
        saturated_p=0.9, floor_p=0.12, negative_discrimination_high=0.1, low_cas=0.3
    )
    assert flag_items(stats, loose) == {
        0: (FlagRule.SATURATED,),
        1: (FlagRule.FLOOR,),
        2: (FlagRule.NEGATIVE_DISCRIMINATION, FlagRule.LOW_CAS),
    }
    assert loose.to_dict()["saturated_p"] == 0.9
    with pytest.raises(ValueError):
        FlagThresholds(saturated_p=1.5)
    with pytest.raises(ValueError):
        FlagThresholds(judged_minimum=0)


def test_flag_items_and_rule_counts() -> None:
    stats = make_stats(
        [0.99, 0.01, 0.5, 0.5],
        high=[0.5, 0.5, -0.2, 0.5],
        cas=[0.0, 0.0, 0.0, 0.6],
        inversions=[1, 0, 2, 0],
    )
    flags = flag_items(stats)
    assert flags == {
        0: (FlagRule.SATURATED, FlagRule.FAMILY_INVERSION),
        1: (FlagRule.FLOOR,),
        2: (FlagRule.NEGATIVE_DISCRIMINATION, FlagRule.LOW_CAS, FlagRule.FAMILY_INVERSION),
    }
    counts = rule_counts(flag_masks(stats))
    assert counts == {
        "saturated": 1,
        "floor": 1,
        "negative_discrimination": 1,
        "low_cas": 1,
        "family_inversion": 2,
        "judge_disagreement": 0,
        "any": 3,
    }
    assert rule_counts({})["any"] == 0


_value = st.one_of(st.just(NAN), st.floats(0.0, 1.0))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            _value,
            st.one_of(st.just(NAN), st.floats(-1, 1)),
            _value,
            st.integers(0, 3),
            _value,
            st.integers(0, 4),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_flag_items_matches_a_per_item_reference(
    rows: list[tuple[float, float, float, int, float, int]],
) -> None:
    p, high, cas, inv, share, judged = (list(column) for column in zip(*rows, strict=True))
    stats = make_stats(p, high=high, cas=cas, inversions=inv)
    flags = flag_items(stats, judge_disagreement=np.array(share), judged=np.array(judged))
    t = FlagThresholds()
    for i in range(len(rows)):
        fired: list[FlagRule] = []
        saturated = p[i] >= t.saturated_p - 1e-9
        floor = p[i] <= t.floor_p + 1e-9
        if saturated:
            fired.append(FlagRule.SATURATED)
        if floor:
            fired.append(FlagRule.FLOOR)
        if high[i] < -1e-9:
            fired.append(FlagRule.NEGATIVE_DISCRIMINATION)
        if cas[i] < t.low_cas - 1e-9 and not saturated and not floor:
            fired.append(FlagRule.LOW_CAS)
        if inv[i] >= 1:
            fired.append(FlagRule.FAMILY_INVERSION)
        if share[i] >= 0.25 - 1e-9 and judged[i] >= 2:
            fired.append(FlagRule.JUDGE_DISAGREEMENT)
        assert flags.get(i, ()) == tuple(fired), i


def test_a_million_items_are_flagged_quickly() -> None:
    rng = np.random.default_rng(0)
    n = 1_000_000
    stats = make_stats(
        rng.random(n).tolist(),
        high=rng.uniform(-1, 1, n).tolist(),
        cas=rng.random(n).tolist(),
        inversions=rng.integers(0, 2, n).tolist(),
    )
    flags = flag_items(stats)
    masks = flag_masks(stats)
    assert len(flags) == rule_counts(masks)["any"]
