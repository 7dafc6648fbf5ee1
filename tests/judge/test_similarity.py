"""Tests for judge.similarity: lexical similarity, backends and the cascade's filter."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judge.similarity import (
    LexicalBackend,
    SimilarityBackend,
    SimilarityFilter,
    char_ngram_dice,
    lexical_similarity,
    token_f1,
)


@pytest.mark.parametrize(
    ("answer", "reference", "expected"),
    [
        # identical after normalisation
        ("Paris", "Paris", "match"),
        ("paris.", "Paris", "match"),
        ("Answer: Paris", "Paris", "match"),
        ("Treaty of  Versailles!", "treaty of versailles", "match"),
        ("光合作用", "光合作用", "match"),
        ("答案：光合作用。", "光合作用", "match"),
        # the reference stated inside a longer answer
        (
            "It was ended by the Treaty of Versailles, signed in 1919 after the war.",
            "Treaty of Versailles",
            "match",
        ),
        ("植物通过光合作用制造有机物", "光合作用", "match"),
        # ... unless the answer negates or hedges around it
        ("It is not Paris.", "Paris", "ambiguous"),
        ("Paris or Lyon", "Paris", "ambiguous"),
        ("不是光合作用", "光合作用", "ambiguous"),
        # a fragment of the reference, a paraphrase, a near spelling: ask the judge
        ("Versailles", "Treaty of Versailles", "ambiguous"),
        ("the treaty signed at Versailles", "Treaty of Versailles", "ambiguous"),
        ("photosynthetic", "photosynthesis", "ambiguous"),
        ("colour", "color", "ambiguous"),
        ("呼吸作用", "光合作用", "ambiguous"),
        # nothing in common
        ("London", "Paris", "mismatch"),
        ("photosynthesis converts light", "mitochondrial respiration", "mismatch"),
        ("细胞分裂", "光合作用", "mismatch"),
        ("35", "3", "mismatch"),  # "3" is not contained in "35"
        ("", "Paris", "mismatch"),
    ],
)
def test_default_filter_decisions(answer: str, reference: str, expected: str) -> None:
    assert SimilarityFilter().decide(answer, reference) == expected


def test_containment_is_exactly_one_and_one_directional() -> None:
    answer = "signed the Treaty of Versailles in 1919"
    assert lexical_similarity(answer, "Treaty of Versailles") == 1.0
    assert lexical_similarity("Treaty of Versailles", answer) < 0.85


def test_components() -> None:
    assert token_f1("the cat sat", "the cat") == pytest.approx(0.8)
    assert token_f1("a b", "c d") == 0.0
    assert char_ngram_dice("colour", "color") > 0.5 > token_f1("colour", "color")
    # Chinese: character bigrams ("光合", "合作", "作用" vs "呼吸", "吸作", "作用")
    assert token_f1("光合作用", "呼吸作用") == pytest.approx(1 / 3)
    assert lexical_similarity("", "") == 1.0
    assert lexical_similarity("...", "Paris") == 0.0


_TEXT = st.lists(
    st.sampled_from([*"abcde xyz光合作用呼吸,.!", "the", " cat ", "不是", "or"]), max_size=15
).map("".join)


@given(_TEXT, _TEXT)
def test_similarity_is_in_unit_interval(a: str, b: str) -> None:
    value = lexical_similarity(a, b)
    assert 0.0 <= value <= 1.0
    assert math.isfinite(value)


@given(_TEXT)
def test_a_text_is_fully_similar_to_itself(a: str) -> None:
    assert lexical_similarity(a, a) == 1.0


@given(_TEXT, _TEXT)
def test_components_are_symmetric(a: str, b: str) -> None:
    assert token_f1(a, b) == pytest.approx(token_f1(b, a))
    assert char_ngram_dice(a, b) == pytest.approx(char_ngram_dice(b, a))


@given(_TEXT, _TEXT)
def test_base_score_is_symmetric_without_containment(a: str, b: str) -> None:
    forward, backward = lexical_similarity(a, b), lexical_similarity(b, a)
    if max(forward, backward) < 0.5:  # containment scores are 0.5 or 1.0
        assert forward == pytest.approx(backward)


class _Fixed:
    def __init__(self, value: float) -> None:
        self.value = value

    def similarity(self, a: str, b: str) -> float:
        return self.value


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (1.0, "match"),
        (0.85, "match"),
        (0.8499, "ambiguous"),
        (0.5, "ambiguous"),
        (0.15, "ambiguous"),
        (0.1499, "mismatch"),
        (0.0, "mismatch"),
    ],
)
def test_thresholds_are_inclusive_for_match_and_exclusive_for_mismatch(
    score: float, expected: str
) -> None:
    assert SimilarityFilter(backend=_Fixed(score)).decide("a", "b") == expected


def test_custom_thresholds() -> None:
    strict = SimilarityFilter(match_at=1.0, mismatch_below=0.0, backend=_Fixed(0.99))
    assert strict.decide("a", "b") == "ambiguous"
    assert SimilarityFilter(match_at=1.0, mismatch_below=0.0, backend=_Fixed(0.0)).decide(
        "a", "b"
    ) == ("ambiguous")
    assert SimilarityFilter(match_at=0.6, mismatch_below=0.4, backend=_Fixed(0.6)).decide(
        "a", "b"
    ) == ("match")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"match_at": 0.2, "mismatch_below": 0.5}, "mismatch_below"),
        ({"match_at": 0.5, "mismatch_below": 0.5}, "mismatch_below"),
        ({"match_at": 1.5}, "match_at"),
        ({"match_at": float("nan")}, "match_at"),
        ({"mismatch_below": -0.1}, "mismatch_below"),
        ({"mismatch_below": float("inf")}, "mismatch_below"),
    ],
)
def test_bad_thresholds_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SimilarityFilter(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.2, -0.1, float("nan")])
def test_a_misbehaving_backend_is_an_error(bad: float) -> None:
    with pytest.raises(ValueError, match="similarity backend"):
        SimilarityFilter(backend=_Fixed(bad)).decide("a", "b")


def test_backends_satisfy_the_protocol() -> None:
    assert isinstance(LexicalBackend(), SimilarityBackend)
    assert isinstance(_Fixed(0.5), SimilarityBackend)
    assert LexicalBackend().similarity("Paris", "Paris") == 1.0


def test_answer_label_is_stripped_before_comparing() -> None:
    seen: list[tuple[str, str]] = []

    class Recording:
        def similarity(self, a: str, b: str) -> float:
            seen.append((a, b))
            return 0.5

    SimilarityFilter(backend=Recording()).decide("答案：光合作用", "光合作用")
    SimilarityFilter(backend=Recording()).decide("The answer is Paris", "Paris")
    assert seen == [("光合作用", "光合作用"), ("Paris", "Paris")]
