"""Numbers with optional units: :func:`match_number`.

The reference must be one number with an optional unit (:mod:`judge.matchers.units`);
the answer's number is the last one in its last ``\\boxed{}``, else its last answer
line, else its whole text. Values compare with ``math.isclose``, after converting units
of the same dimension; different dimensions are wrong. When the answer's final number is
an operand of a closed-form expression (``\\sqrt{2}/2``), the expression's value from
:mod:`judge.matchers.symbolic` is compared instead. :func:`reference_quantity` also tells
:mod:`judge.matchers.dispatch` whether a reference is numeric.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from judge.matchers.outcome import Match
from judge.matchers.symbolic import constant_value
from judge.matchers.text import LEADING_LABEL, answer_line, last_boxed, prepare
from judge.matchers.units import UNIT_PATTERN, UNITS

_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])"
    r"(?P<sign>[+-])?"
    r"(?:"
    r"(?P<pow10>10\s*\^\s*(?:\{\s*)?(?P<pow10exp>[+-]?\d{1,4})(?:\s*\})?)"
    r"|(?P<body>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+)(?![\d.]))?"
    r"(?:[eE](?P<eexp>[+-]?\d{1,4})"
    r"|\s*[x×*·]\s*10\s*\^\s*(?:\{\s*)?(?P<sciexp>[+-]?\d{1,4})(?:\s*\})?)?"
    r")"
    r"(?:[ \t]{0,2}(?P<unit>" + UNIT_PATTERN + r"))?"
)
_LATEX_NUMBER_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\\[dt]?frac\s*\{\s*([+-]?[\d.]+)\s*\}\s*\{\s*([\d.]+)\s*\}"), r"\1/\2"),
    (re.compile(r"\\(?:text|mathrm|rm|textrm|operatorname)\s*\{([^{}]*)\}"), r" \1"),
    (re.compile(r"\^\s*(?:\{\s*)?\\circ(?:\s*\})?"), "°"),
    (re.compile(r"\\(?:circ|degree)"), "°"),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\\times"), "×"),
    (re.compile(r"\\cdot"), "·"),
    (re.compile(r"\\Omega"), "Ω"),
    (re.compile(r"\\mu"), "μ"),
    (re.compile(r"\\[,;:! ]|~"), " "),
    (re.compile(r"\\(?:left|right)(?![A-Za-z])"), ""),
    (re.compile(r"(?<=[A-Za-z])\^\s*(?:\{\s*)?(-?\d)(?:\s*\})?"), r"\1"),
    (re.compile(r"\$"), " "),
)
_EXPRESSION_BEFORE = frozenset("+-/^*×·\\{√")
_EXPRESSION_AFTER = frozenset("^(/*×·!\\{π")
_REFERENCE_PREFIX = re.compile(
    r"^\s*(?:[A-Za-z](?:_?\w{0,3})?\s*=|≈|~|约|大约|about|approximately|approx\.?)\s*",
    re.IGNORECASE,
)
_MAX_NUMBER_TEXT = 120


@dataclass(frozen=True, slots=True)
class _Quantity:
    value: float
    unit: str | None
    text: str


def _number_text(text: str) -> str:
    """``text`` with the LaTeX that numbers and units are written in turned into plain text."""
    prepared = prepare(text)
    for pattern, replacement in _LATEX_NUMBER_REWRITES:
        prepared = pattern.sub(replacement, prepared)
    return prepared


def _quantity(found: re.Match[str]) -> _Quantity | None:
    """The value of a :data:`_NUMBER` match, or None if it is not a finite number."""
    if len(found.group(0)) > _MAX_NUMBER_TEXT:
        return None
    try:
        if found.group("pow10") is not None:
            value = Fraction(10) ** int(found.group("pow10exp"))
        else:
            value = Fraction(found.group("body").replace(",", ""))
            if found.group("den") is not None:
                denominator = Fraction(found.group("den"))
                if denominator == 0:
                    return None
                value /= denominator
            exponent = found.group("eexp") or found.group("sciexp")
            if exponent is not None:
                value *= Fraction(10) ** int(exponent)
        if found.group("sign") == "-":
            value = -value
        number = float(value)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    if not math.isfinite(number):
        return None
    return _Quantity(number, found.group("unit"), found.group(0).strip())


def _in_expression(text: str, found: re.Match[str]) -> bool:
    """True when the number is an operand of a larger expression (``pi/6``, ``2^10``)."""
    before = text[: found.start()].rstrip()
    if before and before[-1] in _EXPRESSION_BEFORE:
        return True
    if before.endswith("(") and re.search(r"[A-Za-z]\s*\($", before):
        return True
    if found.group("unit") is None:
        end = found.end()
        if end < len(text) and (text[end].isascii() and text[end].isalpha()):
            return True
    after = text[found.end() :].lstrip()
    return bool(after) and after[0] in _EXPRESSION_AFTER


def reference_quantity(reference: str) -> _Quantity | None:
    """The reference as a single number with an optional unit, or None."""
    text = _number_text(reference).strip()
    boxed = last_boxed(text)
    if boxed is not None:
        text = boxed
    text = LEADING_LABEL.sub("", text, count=1)
    text = _REFERENCE_PREFIX.sub("", text, count=1).strip().rstrip(".。").strip()
    found = _NUMBER.fullmatch(text)
    if found is None:
        return None
    return _quantity(found)


def _final_quantity(answer: str) -> tuple[_Quantity | None, str]:
    """The answer's final number: last number of the last ``\\boxed{}`` or answer line,
    else of the whole text."""
    text = _number_text(answer)
    regions: list[tuple[str, str]] = []
    boxed = last_boxed(text)
    if boxed is not None:
        regions.append((boxed, "boxed"))
    else:
        line = answer_line(text)
        if line is not None:
            regions.append((line, "answer line"))
    regions.append((text, "text"))
    for region, where in regions:
        matches = list(_NUMBER.finditer(region))
        if not matches:
            continue
        last = matches[-1]
        if _in_expression(region, last):
            return None, f"the last number in the {where} is part of an expression"
        quantity = _quantity(last)
        if quantity is None:
            return None, f"{last.group(0)!r} is not a finite number"
        return quantity, where
    return None, "no number in the answer"


def _compare_quantities(
    got: _Quantity, expected: _Quantity, rel_tol: float, abs_tol: float
) -> Match:
    got_value, expected_value = got.value, expected.value
    note = ""
    if got.unit is not None and expected.unit is not None and got.unit != expected.unit:
        got_dim, got_factor, got_offset = UNITS[got.unit]
        exp_dim, exp_factor, exp_offset = UNITS[expected.unit]
        if got_dim != exp_dim:
            return Match(
                False, "number", f"unit {got.unit} ({got_dim}) vs {expected.unit} ({exp_dim})"
            )
        got_value = got_value * got_factor + got_offset
        expected_value = expected_value * exp_factor + exp_offset
        note = f" after converting {got.unit} and {expected.unit}"
    ok = math.isclose(got_value, expected_value, rel_tol=rel_tol, abs_tol=abs_tol)
    relation = "equals" if ok else "differs from"
    return Match(ok, "number", f"{got.text!r} {relation} reference {expected.text!r}{note}")


def match_number(
    answer: str, reference: str, *, rel_tol: float = 1e-4, abs_tol: float = 1e-9
) -> Match:
    """Compare the answer's final number with a numeric reference.

    The reference must be one number with an optional unit (``"3.5 m/s"``, ``"-1/2"``,
    ``"1,234"``, ``"6.02e23"``, ``"3×10^8 m/s"``, ``"50%"``, ``"\\frac{1}{2}"``, an optional
    ``"x ="``/``"约"`` prefix). The answer's number is the last number of the last
    ``\\boxed{}``, else of the last answer line (``Answer:``, ``答案：``, ``the answer is``),
    else of the whole text. Numbers have optional signs, decimals, thousands separators,
    fractions ``a/b``, ``e``-notation and ``× 10^k``; LaTeX ``\\frac{a}{b}`` with numeric
    parts, ``$``, ``\\text{}`` and ``^\\circ`` are understood.

    Units (:data:`UNITS`) are compared only when both sides carry a known unit: same
    dimension -> convert (``1 km`` == ``1000 m``, ``0 °C`` == ``273.15 K``); different
    dimensions -> wrong. A unit on one side only is ignored.

    Percentages: ``%`` is a unit of its own dimension, not a factor of 1/100. So ``50%``
    equals ``50%`` and (unit on one side ignored) ``50``, but ``50%`` and ``0.5`` are NOT
    equal in either direction: the written numbers differ, and reading one as the other
    would be a guess about the question's wording.

    Values are equal when ``math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)``.
    When the final number is an operand of an expression (``sin(pi/6)``, ``\\sqrt{2}/2``)
    and that expression is a closed-form constant the safe parser of
    :func:`match_symbolic` accepts, its numeric value is compared instead.

    Returns None when the reference is not numeric, the answer has no number, or its final
    number belongs to an expression that cannot be evaluated.
    """
    expected = reference_quantity(reference)
    if expected is None:
        return Match(None, "number", f"reference {reference[:40]!r} is not a number")
    got, where = _final_quantity(answer)
    if got is not None:
        return _compare_quantities(got, expected, rel_tol, abs_tol)
    value = constant_value(answer)
    if value is None:
        return Match(None, "number", where)
    ok = math.isclose(value, expected.value, rel_tol=rel_tol, abs_tol=abs_tol)
    relation = "equals" if ok else "differs from"
    return Match(ok, "number", f"expression value {value:.12g} {relation} {expected.text!r}")
