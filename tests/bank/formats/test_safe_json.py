"""``bank.formats.safe_json``: untrusted JSON is a value or a JsonProblem with its line and
column, never another exception (RecursionError, int-limit ValueError, UnicodeDecodeError)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.formats.safe_json import (
    DECODER,
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    JsonProblem,
    check_json,
    parse_json,
)

FAST = settings(max_examples=200, deadline=None, derandomize=True)


def refused(data: str | bytes) -> JsonProblem:
    with pytest.raises(JsonProblem) as caught:
        parse_json(data)
    return caught.value


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_nesting_is_bounded_before_the_decoder_recurses() -> None:
    assert parse_json(nested(MAX_DEPTH)) is not None
    too_deep = refused(nested(MAX_DEPTH + 1))
    assert (too_deep.message, too_deep.line, too_deep.column) == (
        f"nested deeper than {MAX_DEPTH} levels",
        1,
        MAX_DEPTH + 1,
    )
    # 200,000 levels: far past the C decoder's recursion limit, refused in linear time
    hostile = refused('{"a": ' + nested(200_000) + "}")
    assert hostile.message == f"nested deeper than {MAX_DEPTH} levels"
    assert hostile.column == len('{"a": ') + MAX_DEPTH
    # objects count as levels too; brackets inside strings do not
    assert refused('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)).line == 1
    in_string = "[" * 1000 + '"{'  # with an escaped quote that does not end the string
    assert parse_json(json.dumps({"q": in_string})) == {"q": in_string}


def test_numbers_are_bounded_and_finite() -> None:
    long = refused('{"discipline": ' + "9" * 5000 + "}")
    assert long.message == f"a number of 5000 characters (at most {MAX_NUMBER_CHARS})"
    assert long.column == len('{"discipline": ') + 1
    assert parse_json("9" * MAX_NUMBER_CHARS) == int("9" * MAX_NUMBER_CHARS)
    assert refused("[1e999]").message == "number 1e999 is out of range"
    assert refused("-1E+400").message == "number -1E+400 is out of range"
    assert parse_json("[1e308, -0.5, 0]") == [1e308, -0.5, 0]
    # digits inside strings are text
    assert parse_json(json.dumps({"id": "9" * 5000})) == {"id": "9" * 5000}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_numbers(constant: str) -> None:
    problem = refused(f'{{"x": [1, {constant}]}}')
    assert problem.message == f"{constant} is not a JSON number"
    assert problem.column == len('{"x": [1, ') + 1
    with pytest.raises(JsonProblem):  # the decoder's own hooks refuse them too
        DECODER.decode(f"[{constant}]")
    assert parse_json(json.dumps({"x": constant})) == {"x": constant}


def test_nul_bytes_and_invalid_utf8_are_problems_with_their_position() -> None:
    nul = refused('{"a": 1,\n "q": "x\x00y"}')
    assert (nul.message, nul.line, nul.column) == ("contains a NUL character", 2, 9)
    assert refused(b"[1]\x00").message == "contains a NUL character"
    bad = refused(b'{"a": 1,\n "q": "\xff"}')
    assert (bad.message, bad.line, bad.column) == ("not valid UTF-8", 2, 8)
    assert parse_json(b'\xef\xbb\xbf{"q": "\xe4\xb8\xad"}') == {"q": "中"}  # BOM dropped


def test_invalid_json_has_the_decoders_message_and_position() -> None:
    problem = refused('{"a": 1,\n  "b": }')
    assert problem.message.startswith("invalid JSON: Expecting value")
    assert (problem.line, problem.column) == (2, 8)
    assert problem.describe() == f"{problem.message} (column 8)"
    assert refused('{"q": "unterminated [[[[').message.startswith("invalid JSON")
    assert refused("").message.startswith("invalid JSON")


def test_check_json_refuses_in_text_order() -> None:
    with pytest.raises(JsonProblem, match="NaN is not a JSON number"):
        check_json("[NaN, " + nested(100) + "]")
    check_json("{not json but harmless")  # syntax is json.loads's job


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@FAST
@given(json_values)
def test_acceptable_json_parses_like_json_loads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        if "\x00" in text:
            continue
        assert parse_json(text) == json.loads(text)
        if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):  # else not encodable
            assert parse_json(text.encode("utf-8")) == json.loads(text)


@FAST
@given(
    st.one_of(
        st.binary(max_size=200),
        st.text(alphabet='[]{}",:0123456789.eE+-NaInfty \\\x00\n', max_size=200),
    )
)
def test_any_input_is_a_value_or_a_json_problem(data: str | bytes) -> None:
    try:
        value = parse_json(data)
    except JsonProblem as problem:
        assert problem.line >= 1 and problem.column >= 1 and problem.message
    else:
        assert not any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(value))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
