"""Routing of the hybrid cascade: objective -> similarity -> judge (ReLE §3.2)."""

from __future__ import annotations

import pytest

from judge.cascade import Cascade
from judge.matchers import ScorePolicy
from judge.similarity import SimilarityFilter

CASES = [
    # qtype, answer, reference, options, language -> (score, method) or None (ask the judge)
    (
        "multiple_choice",
        "The answer is (C) because 2+2=4.",
        "C",
        ["1", "2", "4", "5"],
        "en",
        (3, "objective"),
    ),
    ("multiple_choice", "I think it's B.", "C", ["1", "2", "4", "5"], "en", (0, "objective")),
    ("true_false", "正确。因为两者相等。", "正确", None, "zh", (3, "objective")),
    ("true_false", "False. The statement mixes up the two.", "True", None, "en", (0, "objective")),
    ("fill_in", "v = 3.50 m/s", "3.5 m/s", None, "en", (3, "objective")),
    ("fill_in", "The answer is 42", "41", None, "en", (0, "objective")),
    ("fill_in", "Treaty of Versailles", "Treaty of Versailles", None, "en", (3, "objective")),
    (
        "cloze",
        "It was ended by the Treaty of Versailles, signed in 1919 after the war.",
        "Treaty of Versailles",
        None,
        "en",
        (3, "similarity"),
    ),
    (
        "dictation",
        "photosynthesis converts light",
        "mitochondrial respiration",
        None,
        "en",
        (0, "similarity"),
    ),
    ("multiple_choice", "", "A", ["x", "y"], "en", (0, "objective")),
    ("short_answer", "Reference answer 3.", "Reference answer 3.", None, "en", None),
    ("essay", "anything", "anything", None, "en", None),
    ("unknown_type", "x", "x", None, "en", None),
]


@pytest.mark.parametrize(("qtype", "answer", "reference", "options", "language", "expected"), CASES)
def test_routes_each_answer_to_the_cheapest_tier_that_can_decide(
    qtype: str,
    answer: str,
    reference: str,
    options: list[str] | None,
    language: str,
    expected: tuple[int, str] | None,
) -> None:
    decision = Cascade().route(
        qtype=qtype, answer=answer, reference=reference, options=options, language=language
    )
    if expected is None:
        assert decision is None
    else:
        assert decision is not None
        assert (decision.score, decision.method) == expected


def test_ambiguous_similarity_goes_to_the_judge() -> None:
    decision = Cascade().route(
        qtype="fill_in",
        answer="the treaty signed at Versailles",
        reference="Treaty of Versailles",
        options=None,
        language="en",
    )
    assert decision is None


def test_an_undecidable_objective_answer_goes_to_the_judge() -> None:
    decision = Cascade().route(
        qtype="true_false",
        answer="It depends on the context.",
        reference="True",
        options=None,
        language="en",
    )
    assert decision is None


def test_thresholds_and_policy_are_configurable() -> None:
    strict = Cascade(similarity=SimilarityFilter(match_at=1.0, mismatch_below=0.0))
    lenient_policy = Cascade(policy=ScorePolicy(correct=2, wrong=1))
    route = dict(
        qtype="cloze",
        answer="signed the Treaty of Versailles in 1919",
        reference="Treaty of Versailles",
        options=None,
        language="en",
    )
    assert strict.route(**route) is not None  # containment is exactly 1.0
    assert strict.route(**{**route, "answer": "a treaty in France"}) is None
    decision = lenient_policy.route(
        qtype="multiple_choice", answer="B", reference="C", options=["a", "b", "c"], language="en"
    )
    assert decision is not None and decision.score == 1


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="mismatch_below"):
        SimilarityFilter(match_at=0.2, mismatch_below=0.5)
