"""Tests for judge.contamination.replay: fill-in replay (LLMEval-Fair §3.3)."""

from __future__ import annotations

import difflib
import doctest
import math
from collections.abc import Sequence
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import judge.contamination.replay as replay
from judge.contamination.replay import (
    MAX_MATCH_UNITS,
    ReplayMatch,
    completion_match,
    levenshtein,
    mask_question,
    replay_prompt,
    replay_rate,
    replay_units,
)

FAST = settings(max_examples=200, deadline=None, derandomize=True)

ENGLISH = (
    "Which of the following statements about the second law of thermodynamics "
    "is correct when applied to an isolated system at equilibrium"
)  # 21 words
CHINESE = "下列关于热力学第二定律的说法中，哪一项在孤立系统达到平衡时是正确的？"
CJK_CHARS = "热力学第二定律说法孤立系统平衡正确的"

# text made of words, CJK characters, punctuation and whitespace, for property tests
_pieces = st.one_of(
    st.text("abcxyz019", min_size=1, max_size=6),
    st.sampled_from(list(CJK_CHARS)),
    st.sampled_from([",", ".", "，", "。", "“", "”", "-", "(", ")", "+"]),
    st.sampled_from([" ", "  ", "\n", "\t"]),
)
mixed_texts = st.lists(_pieces, min_size=0, max_size=60).map("".join)


def _reference_levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """The textbook recursion, memoised: the specification the DP must meet."""

    @cache
    def dist(i: int, j: int) -> int:
        if i == 0:
            return j
        if j == 0:
            return i
        return min(
            dist(i - 1, j) + 1,
            dist(i, j - 1) + 1,
            dist(i - 1, j - 1) + (a[i - 1] != b[j - 1]),
        )

    return dist(len(a), len(b))


def _english_units(text: str) -> int:
    return len(text.split())


def _cjk_units(text: str) -> int:
    return sum(char in CJK_CHARS or "\u4e00" <= char <= "\u9fff" for char in text)


def test_doctests() -> None:
    result = doctest.testmod(replay)
    assert result.attempted > 0
    assert result.failed == 0


# --- mask_question ----------------------------------------------------------------------


def test_mask_english_hides_the_last_half_of_the_words() -> None:
    masked = mask_question(ENGLISH)
    assert masked.unit == "word"
    assert masked.units == 21
    assert masked.hidden_units == 11  # ceil(0.5 * 21)
    assert _english_units(masked.hidden) == 11
    assert _english_units(masked.prefix) == 10
    assert masked.prefix == "Which of the following statements about the second law of"
    assert masked.separator == " "
    assert masked.prefix + masked.separator + masked.hidden == ENGLISH


def test_mask_chinese_counts_characters_and_skips_punctuation() -> None:
    masked = mask_question(CHINESE)
    assert masked.unit == "character"
    # 32 CJK characters; "，" and "？" are not units of their own
    assert masked.units == 32
    assert masked.hidden_units == 16
    assert _cjk_units(masked.hidden) == 16
    assert masked.separator == ""
    assert masked.prefix + masked.hidden == CHINESE
    assert masked.hidden.startswith("一")
    # a cut after "，": the comma stays with the prefix, the hidden part starts on "哪"
    masked = mask_question(CHINESE, hidden_fraction=0.53)  # ceil(16.96) = 17 units
    assert masked.hidden == "哪一项在孤立系统达到平衡时是正确的？"
    assert masked.prefix == "下列关于热力学第二定律的说法中，"


def test_mask_mixed_text_counts_cjk_characters_and_latin_words() -> None:
    text = "使用Python语言编写一个程序，计算两个数的和并输出结果。"
    masked = mask_question(text)
    assert masked.unit == "mixed"
    assert masked.units == 23  # "Python" is one unit, each Chinese character another
    assert masked.hidden_units == 12
    assert masked.prefix == "使用Python语言编写一个程序，"
    assert masked.hidden == "计算两个数的和并输出结果。"


@pytest.mark.parametrize(
    ("words", "fraction", "min_hidden", "min_prefix", "hidden"),
    [
        (20, 0.5, 8, 1, 10),
        (20, 0.25, 1, 1, 5),
        (10, 0.3, 1, 1, 3),  # 0.3 * 10 is 3.0000000000000004 in floating point
        (10, 0.31, 1, 1, 4),  # rounded up
        (20, 0.1, 8, 1, 8),  # min_hidden raises the count
        (9, 0.5, 8, 1, 8),  # shortest text the defaults accept: one visible word
        (20, 0.9, 1, 1, 18),
        (20, 0.99, 1, 1, 19),  # the prefix is never empty
        (20, 0.9, 1, 5, 15),  # min_prefix caps the hidden part
    ],
)
def test_mask_fraction_and_bounds(
    words: int, fraction: float, min_hidden: int, min_prefix: int, hidden: int
) -> None:
    text = " ".join(f"w{i}" for i in range(words))
    masked = mask_question(
        text, hidden_fraction=fraction, min_hidden=min_hidden, min_prefix=min_prefix
    )
    assert masked.hidden_units == hidden
    assert masked.hidden == " ".join(f"w{i}" for i in range(words - hidden, words))
    assert masked.prefix == " ".join(f"w{i}" for i in range(words - hidden))


def test_mask_keeps_the_spacing_of_the_prefix() -> None:
    text = "  Line one\n\tof   the question  ,  and then\n the end of it here  \n"
    masked = mask_question(text, hidden_fraction=0.55, min_hidden=4)  # 7 of 12 words
    assert masked.prefix + masked.separator + masked.hidden == text
    assert masked.prefix == "  Line one\n\tof   the question  ,"
    assert masked.separator == "  "
    assert masked.hidden == "and then\n the end of it here  \n"
    assert masked.hidden_units == 7


@pytest.mark.parametrize(
    "text",
    ["", "   ", "，。！", "one two three four five six seven eight", "短问题", "a b c d e f g h"],
)
def test_mask_refuses_texts_too_short(text: str) -> None:
    with pytest.raises(ValueError, match="too short to mask"):
        mask_question(text)


def test_mask_too_short_message_gives_the_numbers() -> None:
    with pytest.raises(ValueError, match=r"has 3 unit\(s\).*at least 6 \(2 visible \+ 4 hidden\)"):
        mask_question("一二三", min_hidden=4, min_prefix=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden_fraction": 0.0}, "hidden_fraction must lie strictly between 0 and 1"),
        ({"hidden_fraction": 1.0}, "hidden_fraction must lie strictly between 0 and 1"),
        ({"hidden_fraction": math.nan}, "hidden_fraction must lie strictly between 0 and 1"),
        ({"hidden_fraction": True}, "hidden_fraction must be a number"),
        ({"hidden_fraction": "0.5"}, "hidden_fraction must be a number"),
        ({"min_hidden": 0}, "min_hidden must be at least 1"),
        ({"min_hidden": 2.0}, "min_hidden must be an integer"),
        ({"min_prefix": 0}, "min_prefix must be at least 1"),
        ({"min_prefix": True}, "min_prefix must be an integer"),
    ],
)
def test_mask_validates_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mask_question(ENGLISH, **kwargs)  # type: ignore[arg-type]


def test_mask_refuses_non_strings() -> None:
    with pytest.raises(ValueError, match="text must be a string"):
        mask_question(None)  # type: ignore[arg-type]


@FAST
@given(mixed_texts, st.floats(0.01, 0.99), st.integers(1, 10), st.integers(1, 5))
def test_mask_properties(text: str, fraction: float, min_hidden: int, min_prefix: int) -> None:
    try:
        masked = mask_question(
            text, hidden_fraction=fraction, min_hidden=min_hidden, min_prefix=min_prefix
        )
    except ValueError as error:
        assert "too short to mask" in str(error)
        return
    # nothing lost, nothing changed
    assert masked.prefix + masked.separator + masked.hidden == text
    assert masked.separator.strip() == ""
    assert masked.prefix == masked.prefix.rstrip()
    assert masked.prefix.strip()
    assert masked.hidden[:1].strip()  # starts on a unit, not on whitespace
    # the counts
    n, h = masked.units, masked.hidden_units
    assert min_hidden <= h <= n - min_prefix
    assert h == min(max(math.ceil(round(fraction * n, 9)), min_hidden), n - min_prefix)
    # deterministic, and the two parts re-count to the same units
    assert (
        mask_question(text, hidden_fraction=fraction, min_hidden=min_hidden, min_prefix=min_prefix)
        == masked
    )
    if n - h >= 2 and h >= 1:
        again = mask_question(masked.prefix, hidden_fraction=0.5, min_hidden=1)
        assert again.units == n - h


# --- replay_prompt ----------------------------------------------------------------------


def test_replay_prompt_english() -> None:
    prompt = replay_prompt("Which of the following", language="en")
    assert prompt.endswith("\nWhich of the following")
    assert "exactly" in prompt
    assert "only the continuation" in prompt.lower()


@pytest.mark.parametrize("language", ["zh", "zh-CN", "ZH-Hans", " zh "])
def test_replay_prompt_chinese(language: str) -> None:
    prompt = replay_prompt("下列关于热力学", language=language)
    assert prompt.endswith("\n下列关于热力学")
    assert "续写" in prompt
    assert "只输出" in prompt


@pytest.mark.parametrize("language", ["en", "fr", ""])
def test_replay_prompt_falls_back_to_english(language: str) -> None:
    assert replay_prompt("x", language=language).startswith("The following text")


def test_replay_prompt_keeps_the_prefix_verbatim() -> None:
    prefix = "  {braces} and\n spacing  "
    assert replay_prompt(prefix, language="en").endswith(prefix)


def test_replay_prompt_validation() -> None:
    with pytest.raises(ValueError, match="prefix is blank"):
        replay_prompt(" \n", language="en")
    with pytest.raises(ValueError, match="prefix must be a string"):
        replay_prompt(3, language="en")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="language must be a string"):
        replay_prompt("x", language=None)  # type: ignore[arg-type]


# --- units and Levenshtein --------------------------------------------------------------


def test_replay_units_normalises() -> None:
    assert replay_units("Hello,   WORLD!") == ("hello", "world")
    assert replay_units("ＨＥＬＬＯ　ｗｏｒｌｄ") == ("hello", "world")  # full-width, NFKC
    assert replay_units("x+y = 3") == replay_units("x + y=3") == ("x", "+", "y", "=", "3")
    assert replay_units("光合作用，产物。") == ("光", "合", "作", "用", "产", "物")
    assert replay_units("“Straße”") == ("strasse",)  # casefold
    assert replay_units(" ，。！ ") == ()


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("kitten", "sitting", 3),
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("flaw", "lawn", 2),
        ("intention", "execution", 5),
        (("the", "lazy", "dog"), ("the", "dog"), 1),
    ],
)
def test_levenshtein_known_values(a: Sequence[str], b: Sequence[str], distance: int) -> None:
    assert levenshtein(a, b) == distance


unit_lists = st.lists(st.sampled_from("abcd"), max_size=12)


@FAST
@given(unit_lists, unit_lists)
def test_levenshtein_matches_the_recursive_definition(a: list[str], b: list[str]) -> None:
    assert levenshtein(a, b) == _reference_levenshtein(tuple(a), tuple(b))


@FAST
@given(unit_lists, unit_lists, unit_lists)
def test_levenshtein_is_a_metric(a: list[str], b: list[str], c: list[str]) -> None:
    d = levenshtein(a, b)
    assert d == levenshtein(b, a)
    assert abs(len(a) - len(b)) <= d <= max(len(a), len(b))
    assert (d == 0) == (a == b)
    assert levenshtein(a, c) <= d + levenshtein(b, c)


# --- completion_match -------------------------------------------------------------------


def test_verbatim_continuation_with_trailing_text_is_near_exact() -> None:
    hidden = "is correct when applied to an isolated system at equilibrium"
    completion = hidden + "? A. Entropy decreases B. Entropy increases. The answer is B."
    match = completion_match(completion, hidden)
    assert match.similarity == 1.0
    assert match.near_exact
    assert match.distance == 0
    assert match.compared_units == match.completion_units == 10


def test_normalisation_differences_do_not_hide_a_replay() -> None:
    hidden = "is correct when applied to an isolated system, at equilibrium?"
    match = completion_match(
        "  IS correct when applied to an\nisolated system at equilibrium", hidden
    )
    assert match.similarity == 1.0


def test_paraphrase_is_not_near_exact() -> None:
    hidden = "is correct when applied to an isolated system at equilibrium"
    paraphrase = "holds true for a closed system which has reached a steady state"
    match = completion_match(paraphrase, hidden)
    assert not match.near_exact
    assert match.similarity < 0.5


def test_chinese_near_exact_counts_characters() -> None:
    hidden = "哪一项在孤立系统达到平衡时是正确的？"  # 17 characters
    one_wrong = "哪一项在孤立体系达到平衡时是正确的"  # 系统 -> 体系: 2 substitutions
    match = completion_match(one_wrong, hidden)
    assert match.compared_units == 17
    assert match.distance == 2
    assert match.similarity == pytest.approx(1 - 2 / 17)
    assert not match.near_exact  # 0.882 < 0.9, the default
    assert completion_match(one_wrong, hidden, threshold=0.85).near_exact


def test_threshold_is_inclusive() -> None:
    hidden = " ".join(f"w{i}" for i in range(10))
    completion = " ".join(f"w{i}" for i in range(9)) + " other"
    match = completion_match(completion, hidden, threshold=0.9)
    assert match.similarity == pytest.approx(0.9)
    assert match.near_exact
    assert not completion_match(completion, hidden, threshold=0.91).near_exact


def test_short_completion_is_penalised() -> None:
    hidden = "one two three four five six seven eight nine ten"
    match = completion_match("one two three four five", hidden)
    assert match.completion_units == 5
    assert match.similarity == pytest.approx(0.5)
    assert not match.near_exact


@pytest.mark.parametrize("completion", ["", "   ", "...，。"])
def test_empty_completion_scores_zero(completion: str) -> None:
    match = completion_match(completion, "jumps over the lazy dog")
    assert match.similarity == 0.0
    assert not match.near_exact
    assert match.completion_units == 0


def test_threshold_zero_still_gives_zero_similarity_for_empty() -> None:
    match = completion_match("", "jumps over the lazy dog", threshold=0.0)
    assert match.similarity == 0.0
    assert match.near_exact  # every completion counts at threshold 0


def test_echoed_prefix_is_dropped() -> None:
    prefix, hidden = "The quick brown fox", "jumps over the lazy dog"
    echoed = "The quick brown fox jumps over the lazy dog."
    assert completion_match(echoed, hidden).similarity < 0.5
    match = completion_match(echoed, hidden, prefix=prefix)
    assert match.echoed_prefix
    assert match.similarity == 1.0
    plain = completion_match(hidden, hidden, prefix=prefix)
    assert not plain.echoed_prefix
    assert plain.similarity == 1.0


def test_long_hidden_parts_are_capped() -> None:
    hidden = " ".join(f"w{i}" for i in range(MAX_MATCH_UNITS + 100))
    completion = " ".join(f"w{i}" for i in range(MAX_MATCH_UNITS)) + " then something else"
    match = completion_match(completion, hidden)
    assert match.hidden_truncated
    assert match.compared_units == MAX_MATCH_UNITS
    assert match.similarity == 1.0
    assert not completion_match(hidden, hidden[:200]).hidden_truncated


def test_similarity_agrees_with_difflib_where_both_are_exact() -> None:
    # identical -> 1 and disjoint -> 0 for both measures (they differ in between)
    for hidden, completion, expected in [
        ("jumps over the lazy dog", "jumps over the lazy dog", 1.0),
        ("jumps over the lazy dog", "alpha beta gamma delta epsilon", 0.0),
        ("孤立系统达到平衡", "孤立系统达到平衡", 1.0),
        ("孤立系统达到平衡", "一二三四五六七八", 0.0),
    ]:
        ratio = difflib.SequenceMatcher(
            a=replay_units(completion), b=replay_units(hidden), autojunk=False
        ).ratio()
        assert ratio == expected
        assert completion_match(completion, hidden).similarity == expected


def test_completion_match_validation() -> None:
    with pytest.raises(ValueError, match="hidden has no units"):
        completion_match("anything", " ，。 ")
    with pytest.raises(ValueError, match="threshold must lie in"):
        completion_match("a", "a", threshold=1.5)
    with pytest.raises(ValueError, match="threshold must lie in"):
        completion_match("a", "a", threshold=math.nan)
    with pytest.raises(ValueError, match="threshold must be a number"):
        completion_match("a", "a", threshold=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="completion must be a string"):
        completion_match(None, "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix must be a string"):
        completion_match("a", "a", prefix=1)  # type: ignore[arg-type]


words = st.lists(st.sampled_from(["alpha", "beta", "光", "合", "x", "+", "7"]), max_size=20)


@FAST
@given(words, words.filter(bool), st.floats(0, 1))
def test_completion_match_bounds(completion: list[str], hidden: list[str], cut: float) -> None:
    match = completion_match(" ".join(completion), " ".join(hidden), threshold=cut)
    assert 0.0 <= match.similarity <= 1.0
    assert match.near_exact == (match.similarity >= cut)
    assert match.compared_units == len(hidden)
    assert match.completion_units == min(len(completion), len(hidden))
    assert match.similarity == pytest.approx(
        1 - _reference_levenshtein(tuple(completion[: len(hidden)]), tuple(hidden)) / len(hidden)
    )
    # a completion that starts with the hidden part is a replay, whatever follows
    assert completion_match(" ".join(hidden + completion), " ".join(hidden)).similarity == 1.0


def _equal_length_pair(n: int) -> st.SearchStrategy[tuple[list[str], list[str]]]:
    side = st.lists(st.sampled_from("abc"), min_size=n, max_size=n)
    return st.tuples(side, side)


@FAST
@given(st.integers(1, 15).flatmap(_equal_length_pair))
def test_similarity_is_symmetric_for_equal_lengths(pair: tuple[list[str], list[str]]) -> None:
    a, b = (" ".join(side) for side in pair)
    assert completion_match(a, b).similarity == completion_match(b, a).similarity


# --- replay_rate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (80, 1000), (248, 3000), (1, 2)]
)
@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_clopper_pearson_matches_scipy(k: int, n: int, level: float) -> None:
    rate = replay_rate(near_exact=k, n=n, confidence_level=level)
    expected = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    assert rate.n == n
    assert rate.near_exact == k
    assert rate.rate == k / n
    assert rate.ci_low == pytest.approx(expected.low, abs=1e-12)
    assert rate.ci_high == pytest.approx(expected.high, abs=1e-12)
    assert rate.ci_low <= rate.rate <= rate.ci_high
    assert rate.confidence_level == level


def test_replay_rate_from_outcomes() -> None:
    hit = completion_match("jumps over the lazy dog", "jumps over the lazy dog")
    miss = completion_match("something else", "jumps over the lazy dog")
    assert isinstance(hit, ReplayMatch)
    rate = replay_rate([hit, miss, True, False, False])
    assert (rate.n, rate.near_exact, rate.rate) == (5, 2, 0.4)
    assert rate == replay_rate(near_exact=2, n=5)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "give either matches or both counts"),
        ((), {"n": 5}, "give either matches or both counts"),
        (([True],), {"n": 1}, "not both"),
        (([],), {}, "matches is empty"),
        (([True, 1],), {}, r"matches\[1\] must be a bool or a ReplayMatch"),
        (("yes",), {}, "got a string"),
        ((), {"near_exact": 6, "n": 5}, r"near_exact \(6\) cannot exceed n \(5\)"),
        ((), {"near_exact": -1, "n": 5}, "near_exact must be at least 0"),
        ((), {"near_exact": 0, "n": 0}, "n must be at least 1"),
        ((), {"near_exact": 1.0, "n": 5}, "near_exact must be an integer"),
        ((), {"near_exact": 1, "n": 5, "confidence_level": 1.0}, "confidence_level must lie"),
    ],
)
def test_replay_rate_validation(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        replay_rate(*args, **kwargs)  # type: ignore[arg-type]
