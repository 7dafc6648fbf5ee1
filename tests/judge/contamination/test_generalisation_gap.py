"""Tests for judge.contamination.generalisation_gap: the gap between public and private
anchor scores (ReLE §4.3)."""

from __future__ import annotations

import doctest
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

import judge.contamination.generalisation_gap as generalisation_gap_module
from judge.contamination.generalisation_gap import ScoreEstimate, generalisation_gap

FAST = settings(max_examples=200, deadline=None, derandomize=True)


def test_doctests() -> None:
    result = doctest.testmod(generalisation_gap_module)
    assert result.attempted > 0
    assert result.failed == 0


def _est(mean: float, se: float = 1.0) -> ScoreEstimate:
    return ScoreEstimate(mean, se)


def test_gap_excess_flag_and_reported_lower_bound() -> None:
    # the anchor set is ~4 points harder for everyone; "leaky" gains 12 points more
    public = {
        "a": _est(70.0),
        "b": _est(62.0),
        "leaky": _est(85.0, 1.5),
        "c": _est(55.0),
        "noisy": _est(80.0, 6.0),
    }
    anchor = {
        "a": _est(66.0),
        "b": _est(58.5),
        "leaky": _est(69.0, 1.5),
        "c": _est(50.0),
        "noisy": _est(68.0, 6.0),
    }
    report = generalisation_gap(public, anchor)
    z = norm.ppf(0.975)
    assert report.z == pytest.approx(z)
    assert report.relative_to_median
    assert report.missing == ()
    assert [m.model for m in report.models] == ["a", "b", "leaky", "c", "noisy"]
    # gaps 4, 3.5, 16, 5, 12 -> median 5
    assert report.median_gap == 5.0
    leaky = report.get("leaky")
    assert leaky.gap == 16.0
    assert leaky.standard_error == pytest.approx(math.sqrt(1.5**2 + 1.5**2))
    assert leaky.excess == 11.0
    assert leaky.excess_lower == pytest.approx(11.0 - z * math.sqrt(4.5))
    assert leaky.flagged
    assert leaky.reported_score == pytest.approx(85.0 - z * 1.5)
    # large excess (7 > 5) but not significant: 7 - 1.96 * 8.49 < 0
    noisy = report.get("noisy")
    assert noisy.excess == 7.0
    assert not noisy.flagged
    assert noisy.reported_score == 80.0
    # everyone else: small excess, reported mean
    for model in ("a", "b", "c"):
        entry = report.get(model)
        assert not entry.flagged
        assert entry.reported_score == public[model].mean
    assert report.get("c").excess == 0.0
    assert report.get("b").excess == -1.5
    assert report.flagged == ("leaky",)
    assert report.threshold == 5.0
    with pytest.raises(KeyError):
        report.get("nobody")


def test_gap_significant_but_below_threshold_is_not_flagged() -> None:
    public = {"a": _est(60, 0.1), "b": _est(60, 0.1), "c": _est(64, 0.1)}
    anchor = {"a": _est(55, 0.1), "b": _est(55, 0.1), "c": _est(55, 0.1)}
    report = generalisation_gap(public, anchor)
    assert report.get("c").excess == 4.0
    assert report.get("c").excess_lower > 0
    assert report.flagged == ()
    assert generalisation_gap(public, anchor, threshold=3.0).flagged == ("c",)
    # the threshold is strict: an excess equal to it is not flagged
    assert generalisation_gap(public, anchor, threshold=4.0).flagged == ()


def test_a_shared_gap_flags_nobody() -> None:
    public = {m: _est(70 + i, 0.5) for i, m in enumerate("abcdef")}
    anchor = {m: _est(50 + i, 0.5) for i, m in enumerate("abcdef")}
    report = generalisation_gap(public, anchor)
    assert report.median_gap == 20.0
    assert all(m.excess == 0.0 for m in report.models)
    assert report.flagged == ()


def test_gap_with_fewer_than_three_models_uses_the_raw_gap() -> None:
    public = {"a": _est(80.0, 1.0), "b": _est(60.0, 1.0)}
    anchor = {"a": _est(70.0, 1.0), "b": _est(58.0, 1.0)}
    report = generalisation_gap(public, anchor)
    assert not report.relative_to_median
    assert report.median_gap == 6.0  # still reported
    assert report.get("a").excess == report.get("a").gap == 10.0
    assert report.flagged == ("a",)
    assert report.get("a").reported_score == pytest.approx(80.0 - norm.ppf(0.975))


def test_gap_lists_models_missing_from_either_map() -> None:
    public = {"a": _est(70), "only_public": _est(60), "b": _est(65), "c": _est(50)}
    anchor = {"c": _est(45), "only_anchor": _est(40), "a": _est(60), "b": _est(61)}
    report = generalisation_gap(public, anchor)
    assert report.missing == ("only_public", "only_anchor")
    assert [m.model for m in report.models] == ["a", "b", "c"]
    assert report.relative_to_median


def test_gap_without_common_models() -> None:
    report = generalisation_gap({"a": _est(70)}, {"b": _est(60)})
    assert report.models == ()
    assert report.median_gap is None
    assert not report.relative_to_median
    assert report.missing == ("a", "b")
    assert generalisation_gap({}, {}).models == ()


def test_gap_confidence_level_changes_z() -> None:
    public = {"a": _est(80.0, 2.0)}
    anchor = {"a": _est(70.0, 2.0)}
    # excess 10, se 2.83: significant at 95% (10 - 5.54 > 0), not at 99.9999% (z 4.89)
    assert generalisation_gap(public, anchor).flagged == ("a",)
    strict = generalisation_gap(public, anchor, confidence_level=0.999999)
    assert strict.z == pytest.approx(norm.ppf(1 - 0.000001 / 2))
    assert strict.flagged == ()


@pytest.mark.parametrize(
    ("mean", "se", "message"),
    [
        (math.nan, 1.0, "ScoreEstimate.mean must be finite"),
        (math.inf, 1.0, "ScoreEstimate.mean must be finite"),
        (50.0, -0.1, "ScoreEstimate.standard_error must be at least 0"),
        (50.0, math.nan, "ScoreEstimate.standard_error must be finite"),
        (True, 1.0, "ScoreEstimate.mean must be a finite number"),
        ("50", 1.0, "ScoreEstimate.mean must be a finite number"),
    ],
)
def test_score_estimate_validation(mean: object, se: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoreEstimate(mean, se)  # type: ignore[arg-type]


def test_score_estimate_is_frozen_and_float() -> None:
    estimate = ScoreEstimate(70, 1)
    assert isinstance(estimate.mean, float)
    with pytest.raises(AttributeError):
        estimate.mean = 3.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("public", "anchor", "kwargs", "message"),
    [
        ({"a": _est(1)}, {"a": _est(1)}, {"threshold": -1.0}, "threshold must be at least 0"),
        ({"a": _est(1)}, {"a": _est(1)}, {"threshold": math.inf}, "threshold must be finite"),
        ({"a": _est(1)}, {"a": _est(1)}, {"confidence_level": 0.0}, "confidence_level must lie"),
        ({"a": (70.0, 1.0)}, {"a": _est(1)}, {}, r"public\['a'\] must be a ScoreEstimate"),
        ({"a": _est(1)}, {"": _est(1)}, {}, "private_anchor: model names must be non-empty"),
        ([("a", _est(1))], {"a": _est(1)}, {}, "public must be a mapping"),
    ],
)
def test_generalisation_gap_validation(
    public: object, anchor: object, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        generalisation_gap(public, anchor, **kwargs)  # type: ignore[arg-type]


@FAST
@given(
    st.lists(
        st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(0, 5), st.floats(0, 5)),
        min_size=1,
        max_size=12,
    ),
    st.floats(0, 20),
)
def test_gap_properties(rows: list[tuple[float, float, float, float]], threshold: float) -> None:
    public = {f"m{i}": ScoreEstimate(p, sp) for i, (p, _, sp, _) in enumerate(rows)}
    anchor = {f"m{i}": ScoreEstimate(a, sa) for i, (_, a, _, sa) in enumerate(rows)}
    report = generalisation_gap(public, anchor, threshold=threshold)
    gaps = sorted(p - a for p, a, _, _ in rows)
    assert report.median_gap == pytest.approx(
        (gaps[(len(gaps) - 1) // 2] + gaps[len(gaps) // 2]) / 2
    )
    assert report.relative_to_median == (len(rows) >= 3)
    for entry in report.models:
        assert entry.flagged == (entry.excess > threshold and entry.excess_lower > 0)
        assert entry.reported_score <= entry.public.mean
        assert (entry.reported_score < entry.public.mean) <= entry.flagged
