"""Tests for judge.reasoning.split_reasoning."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judge.reasoning import split_reasoning


@pytest.mark.parametrize(
    ("text", "final", "trace"),
    [
        ("The answer is 42.", "The answer is 42.", None),
        ("  \n  padded answer \n", "padded answer", None),
        ("", "", None),
        ("<think>2+2 is 4</think>Answer: 4", "Answer: 4", "2+2 is 4"),
        ("\n\n  <think>\nstep 1\nstep 2\n</think>\n\nAnswer: C", "Answer: C", "step 1\nstep 2"),
        ("<THINK>upper</THINK>final", "final", "upper"),
        ("<Thinking>mixed case</thinking> yes", "yes", "mixed case"),
        ("<reasoning>r</reasoning>answer", "answer", "r"),
        ("< think >spaced</ think >answer", "answer", "spaced"),
        # several blocks are joined with a blank line; the answer pieces are concatenated
        ("<think>a</think>mid<thinking>b</thinking> end", "mid end", "a\n\nb"),
        ("x = <think>hmm</think>3", "x = 3", "hmm"),
        # unclosed opener: a truncated output, everything after it is trace
        (
            "<think>still thinking when the tokens ran out",
            "",
            "still thinking when the tokens ran out",
        ),
        ("Preamble <think>never closed", "Preamble", "never closed"),
        # stray closer: DeepSeek-R1 with the opener in the chat template
        ("I should compute 6*7.</think>\n\n42", "42", "I should compute 6*7."),
        ("first</think>second</think>third", "third", "first\n\nsecond"),
        ("<think>a</think> b </think> c", "c", "a\n\nb"),
        # nesting is tracked
        ("<think>a<think>b</think>c</think>d", "d", "a\n\nb\n\nc"),
        # tags present but empty: trace is "" rather than None
        ("<think></think>42", "42", ""),
        ("<think>   </think>  42  ", "42", ""),
        # Chinese answer after a trace
        ("<think>先算面积</think>答案：12平方米", "答案：12平方米", "先算面积"),
        # other angle-bracket text is not a tag
        ("a <b> c </thinker> <thinkx>", "a <b> c </thinker> <thinkx>", None),
    ],
)
def test_split_reasoning(text: str, final: str, trace: str | None) -> None:
    assert split_reasoning(text) == (final, trace)


def test_unclosed_think_has_empty_final_answer() -> None:
    final, trace = split_reasoning("<think>Let me consider the options. A is")
    assert final == ""
    assert trace == "Let me consider the options. A is"


_TAGS = st.sampled_from(
    ["<think>", "</think>", "<THINKING>", "</thinking>", "<reasoning>", "</ reasoning>"]
)
# Text that cannot form a tag (no "<"), including whitespace and Chinese.
_PLAIN = st.text(alphabet=st.characters(blacklist_characters="<", codec="utf-8"), max_size=30)


def _non_space(text: str) -> Counter[str]:
    return Counter(char for char in text if not char.isspace())


@given(st.lists(st.one_of(_TAGS, _PLAIN), max_size=12))
def test_split_reasoning_never_loses_non_tag_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    plain = "".join(piece for piece in pieces if not piece.startswith("<"))
    final, trace = split_reasoning(text)
    assert _non_space(final) + _non_space(trace or "") == _non_space(plain)
    assert "<think" not in final.lower() and "</think" not in final.lower()


@given(_PLAIN)
def test_text_without_tags_is_all_final_answer(text: str) -> None:
    assert split_reasoning(text) == (text.strip(), None)


@given(st.lists(st.one_of(_TAGS, _PLAIN), min_size=1, max_size=12))
def test_trace_is_none_exactly_when_there_is_no_tag(pieces: list[str]) -> None:
    text = "".join(pieces)
    _, trace = split_reasoning(text)
    assert (trace is None) == (not any(piece.startswith("<") for piece in pieces))
