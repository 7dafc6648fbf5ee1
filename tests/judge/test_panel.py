"""The panel rule and the score an answer counts with (people first, then the panel)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judge.panel import PanelRule, answer_verdict, combine

scores = st.lists(st.integers(0, 3), min_size=1, max_size=7)


@given(scores)
def test_the_median_rule_is_statistics_median(values: list[int]) -> None:
    assert combine(values, PanelRule.MEDIAN) == statistics.median(values)
    assert combine(values, PanelRule.MEAN) == pytest.approx(statistics.fmean(values))


def test_three_judges_give_their_median_and_one_stray_judge_does_not_move_it() -> None:
    assert answer_verdict([3, 3, 0], [], PanelRule.MEDIAN) == 3
    assert answer_verdict([3, 3, 0], [], PanelRule.MEAN) == 2


def test_a_judge_that_left_the_answer_for_review_is_skipped() -> None:
    assert answer_verdict([None, 1, 2], [], PanelRule.MEDIAN) == 2  # 1.5 -> 2 (half to even)
    assert answer_verdict([None, None], [], PanelRule.MEDIAN) is None


def test_people_outrank_the_judges_and_their_mean_is_rounded_half_to_even() -> None:
    assert answer_verdict([3, 3, 3], [0], PanelRule.MEDIAN) == 0
    assert answer_verdict([None], [1, 2], PanelRule.MEDIAN) == 2
    assert answer_verdict([None], [2, 3], PanelRule.MEDIAN) == 2


@given(
    st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=5),
    st.lists(st.integers(0, 3), max_size=3),
)
def test_a_verdict_is_a_rubric_point_or_none(judges: list[int | None], humans: list[int]) -> None:
    verdict = answer_verdict(judges, humans, PanelRule.MEAN)
    if not humans and all(score is None for score in judges):
        assert verdict is None
    else:
        assert verdict in (0, 1, 2, 3)


def test_no_scores_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        combine([], PanelRule.MEDIAN)
    assert not math.isnan(combine([0.0], PanelRule.MEAN))
