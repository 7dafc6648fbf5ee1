"""Parsing untrusted JSON: every way a text can fail is a :class:`JsonProblem` with its
line and column, never another exception.

Python's :func:`json.loads` accepts or fails on hostile input in ways a reader must not
pass on as a traceback: ``RecursionError`` on deep nesting (the C decoder recurses per
level), ``ValueError`` from the 4,300-digit limit of ``int()``, ``NaN`` and ``Infinity``
(not JSON; PostgreSQL refuses them in JSON columns), numbers such as ``1e999`` that become
``inf``, and ``UnicodeDecodeError`` on bytes that are not UTF-8. :func:`check_json` scans
the text first (strings skipped; brackets, numbers and constants looked at) and refuses:

* nesting deeper than :data:`MAX_DEPTH` levels, so the C recursion is never the only
  guard;
* a number longer than :data:`MAX_NUMBER_CHARS` characters, or one that overflows a float;
* the constants ``NaN``, ``Infinity`` and ``-Infinity``;
* a NUL character anywhere (never text; PostgreSQL cannot store it).

:func:`parse_json` decodes bytes as UTF-8, runs the check, then :func:`json.loads` with
hooks that refuse the same things again, and turns any remaining failure into a
``JsonProblem``. Readers report ``problem.line`` and :meth:`JsonProblem.describe` in their
own ``file:line: field: what`` form.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 64
"""Deepest accepted nesting of arrays and objects (the top-level value is level 1)."""

MAX_NUMBER_CHARS = 100
"""Longest accepted number literal; far below ``int()``'s 4,300-digit limit."""

_TOKEN = re.compile(
    r"""
    (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")    # a complete string: skipped
    | (?P<open>[\[{]) | (?P<close>[\]}])
    | (?P<constant>-?Infinity|NaN)
    | (?P<number>-?\d[\d.eE+-]*)
    | (?P<unterminated>")                   # json.loads reports it
    """,
    re.VERBOSE,
)


class JsonProblem(ValueError):
    """Text that is not acceptable JSON.

    Attributes
    ----------
    message : str
        What is wrong, without the position.
    line, column : int
        1-based position in the text (column in characters; for bytes that are not UTF-8,
        the byte of the line).
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column
        super().__init__(self.describe())

    def describe(self) -> str:
        """``message (column N)``."""
        return f"{self.message} (column {self.column})"


def _position(text: str, pos: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, pos) + 1
    return text.count("\n", 0, pos) + 1, pos - line_start + 1


def _problem(text: str, pos: int, message: str) -> JsonProblem:
    return JsonProblem(message, *_position(text, pos))


def decode_utf8(data: bytes) -> str:
    """``data`` as UTF-8 text, without a leading byte-order mark.

    Raises
    ------
    JsonProblem
        "not valid UTF-8" at the line of the first bad byte, its column counted in bytes.
    """
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - line_start + 1
        raise JsonProblem("not valid UTF-8", line, column) from None


def check_json(text: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse what :func:`json.loads` must never see (see the module docstring).

    Syntax is not checked: a text that passes may still be invalid JSON, which
    :func:`json.loads` then reports by itself, without recursing deeper than ``max_depth``.

    Raises
    ------
    JsonProblem
        At the first NUL, too-deep bracket, too-long or overflowing number, or constant.
    """
    nul = text.find("\x00")
    if nul >= 0:
        raise _problem(text, nul, "contains a NUL character")
    depth = 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "open":
            depth += 1
            if depth > max_depth:
                raise _problem(text, match.start(), f"nested deeper than {max_depth} levels")
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "number":
            _check_number(text, match)
        elif kind == "constant":
            raise _problem(text, match.start(), f"{match.group()} is not a JSON number")
        elif kind == "unterminated":
            return


def _check_number(text: str, match: re.Match[str]) -> None:
    token = match.group()
    if len(token) > MAX_NUMBER_CHARS:
        raise _problem(
            text,
            match.start(),
            f"a number of {len(token)} characters (at most {MAX_NUMBER_CHARS})",
        )
    if any(c in token for c in ".eE"):
        try:
            value = float(token)
        except ValueError:
            return  # malformed: json.loads reports it
        if not math.isfinite(value):
            raise _problem(text, match.start(), f"number {token} is out of range")


def _refuse_constant(name: str) -> Any:
    raise JsonProblem(f"{name} is not a JSON number", 1, 1)


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise JsonProblem(f"number {token} is out of range", 1, 1)
    return value


DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
"""A decoder that refuses ``NaN``, ``Infinity`` and overflowing floats; for
``raw_decode`` of a text :func:`check_json` has passed."""


def parse_json(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode one JSON value from untrusted ``data``.

    Parameters
    ----------
    data : str or bytes
        Bytes are decoded as UTF-8 (a leading byte-order mark is dropped).
    max_depth : int
        Deepest accepted nesting, :data:`MAX_DEPTH` by default.

    Returns
    -------
    Any
        The value, as :func:`json.loads` gives it; numbers are ints or finite floats.

    Raises
    ------
    JsonProblem
        Never another exception: bytes that are not UTF-8, a NUL character, nesting
        deeper than ``max_depth``, a number too long or out of range, ``NaN`` or
        ``Infinity``, or invalid JSON, each with its line and column.
    """
    text = decode_utf8(data) if isinstance(data, bytes) else data
    check_json(text, max_depth=max_depth)
    try:
        return DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except JsonProblem:
        raise
    except (RecursionError, ValueError) as exc:  # backstops; check_json refuses these first
        raise JsonProblem(f"cannot be decoded: {exc}", 1, 1) from None


__all__ = [
    "DECODER",
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "JsonProblem",
    "check_json",
    "decode_utf8",
    "parse_json",
]


def json_type(value: object) -> str:
    """What kind of JSON value a decoded ``value`` is, for messages ("a string", "an
    object", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
