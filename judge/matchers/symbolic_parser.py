"""The safe parser: untrusted answer text to a SymPy expression (:func:`parse_answer`).

Security: answers are untrusted model output. This module never hands text to
``sympify``/``parse_expr`` (both call ``eval``); it converts a little LaTeX, checks the
result against a character whitelist, tokenises it and builds the SymPy expression with
its own recursive-descent parser that knows only numbers, single-letter variables,
``pi``/``e``, ``sin cos tan log ln exp sqrt`` and ``+ - * / ^``. Input length, nesting
depth, exponent sizes and exponential towers are bounded (the limits below), and
``simplify`` runs only on small expressions (:mod:`judge.matchers.symbolic`), so a
hostile answer such as ``9^9^9`` is refused in microseconds.

The pipeline: :func:`_expression_text` picks the expression out of the answer,
:func:`_convert_latex` rewrites the LaTeX subset, the whitelist and :func:`_tokens` check
the characters and words, :class:`_Parser` builds the expression (:func:`_safe_power`
and :func:`_check_exp_argument` bound the work SymPy does) and :func:`_tower` rejects
towers of exponentials. Anything outside the subset raises :class:`_Refused`;
:func:`parse_answer` turns that, and any SymPy error, into None.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from fractions import Fraction
from functools import cache
from types import ModuleType
from typing import Any, TypeAlias

from judge.matchers.text import answer_line, brace_group, last_boxed, prepare

SympyExpr: TypeAlias = Any
"""A SymPy expression (SymPy is untyped)."""

MAX_EXPRESSION_CHARS = 200
"""Longest expression (after extraction, before LaTeX conversion) the parser accepts."""
_MAX_CONVERTED_CHARS = 400
_MAX_DEPTH = 40
_MAX_SYMBOLIC_EXPONENT = 64
_MAX_RESULT_BITS = 4096
_MAX_EXP_ARGUMENT = 1000
_MAX_TOWER = 2

_FUNCTION_NAMES: dict[str, str] = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "log": "log",
    "ln": "log",
    "exp": "exp",
    "sqrt": "sqrt",
}
"""The function names the parser accepts -> the SymPy function each one means."""
_CONSTANT_NAMES: dict[str, str] = {"pi": "pi", "e": "E"}
_NAMES = sorted([*_FUNCTION_NAMES, "pi"], key=len, reverse=True)


@cache
def sympy_module() -> ModuleType:
    """SymPy, imported on first use.

    Importing it costs about 0.3 s and 40 MB, and most processes (the API workers, most
    ``proctor`` commands) never parse a formula.
    """
    return importlib.import_module("sympy")


@cache
def _functions() -> dict[str, Callable[[SympyExpr], SympyExpr]]:
    sympy = sympy_module()
    return {name: getattr(sympy, target) for name, target in _FUNCTION_NAMES.items()}


@cache
def _constants() -> dict[str, SympyExpr]:
    sympy = sympy_module()
    return {name: getattr(sympy, target) for name, target in _CONSTANT_NAMES.items()}


_ALLOWED = re.compile(r"[0-9A-Za-z+\-*/^().\s]*")
_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d*)?|\.\d+)|(?P<name>[A-Za-z]+)|(?P<op>[-+*/^()]))")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPERSCRIPT_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_MATH_SEGMENT = re.compile(
    r"\$\$([^$]{1,400})\$\$|\$([^$]{1,400})\$|\\\((.{1,400}?)\\\)|\\\[(.{1,400}?)\\\]", re.DOTALL
)
_SIMPLE_LHS = re.compile(
    r"^\s*[A-Za-z](?:'{1,2})?(?:\s*\(\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*\))?\s*$"
)
_LATEX_SIMPLE: tuple[tuple[str, str], ...] = (
    (r"\left", ""),
    (r"\right", ""),
    (r"\displaystyle", ""),
    (r"\dfrac", r"\frac"),
    (r"\tfrac", r"\frac"),
    (r"\cdot", "*"),
    (r"\times", "*"),
    (r"\div", "/"),
    (r"\,", " "),
    (r"\;", " "),
    (r"\:", " "),
    (r"\!", ""),
    (r"\ ", " "),
    (r"\quad", " "),
)
_LATEX_NAMES = re.compile(r"\\(sin|cos|tan|log|ln|exp|pi)(?![A-Za-z])")
_LATEX_WRAPPERS = re.compile(r"\\(?:text|mathrm|rm|operatorname|mathit)\s*(?=\{)")


class _Refused(Exception):
    """The expression is outside what the safe parser accepts."""


SYMPY_ERRORS: tuple[type[Exception], ...] = (
    ArithmeticError,  # ZeroDivisionError, OverflowError, SymPy's PrecisionExhausted
    TypeError,
    ValueError,
    AttributeError,
    NotImplementedError,
    RecursionError,
)
"""What SymPy may raise on an odd but whitelisted expression; treated as "undecided"."""


def _convert_latex(text: str) -> str:
    """Rewrite the LaTeX subset into plain infix; raise :class:`_Refused` on anything else."""
    for old, new in _LATEX_SIMPLE:
        text = text.replace(old, new)
    text = _LATEX_NAMES.sub(r" \1 ", text)
    for _ in range(_MAX_DEPTH):
        changed = False
        found = _LATEX_WRAPPERS.search(text)
        if found is not None:
            group = brace_group(text, found.end())
            if group is None:
                raise _Refused("unbalanced braces")
            text = text[: found.start()] + group[0] + text[group[1] :]
            changed = True
        index = text.find(r"\frac")
        if index >= 0:
            first = brace_group(text, _skip_spaces(text, index + 5))
            second = None if first is None else brace_group(text, _skip_spaces(text, first[1]))
            if first is None or second is None:
                raise _Refused(r"\frac without two brace groups")
            text = text[:index] + f"(({first[0]})/({second[0]}))" + text[second[1] :]
            changed = True
        index = text.find(r"\sqrt")
        if index >= 0:
            position = _skip_spaces(text, index + 5)
            root = None
            if position < len(text) and text[position] == "[":
                close = text.find("]", position)
                if close < 0:
                    raise _Refused(r"\sqrt[ without ]")
                root = text[position + 1 : close]
                position = _skip_spaces(text, close + 1)
            group = brace_group(text, position)
            if group is None:
                replacement, end = " sqrt ", position
                if root is not None:
                    raise _Refused(r"\sqrt[n] without a brace group")
            elif root is None:
                replacement, end = f" sqrt(({group[0]}))", group[1]
            else:
                replacement, end = f"(({group[0]})^(1/({root})))", group[1]
            text = text[:index] + replacement + text[end:]
            changed = True
        if not changed:
            break
    if "\\" in text:
        raise _Refused("unsupported LaTeX command")
    return text.replace("{", "(").replace("}", ")")


def _skip_spaces(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _expression_text(text: str) -> str:
    """The part of an answer that states the expression.

    The last ``\\boxed{}``; else the last ``$...$``/``\\(...\\)`` segment; else the last
    answer line; else the whole text. A simple left-hand side (``y =``, ``f(x) =``) is
    dropped; with several ``=`` the last right-hand side is kept.
    """
    prepared = _SUPERSCRIPT_RUN.sub(
        lambda run: "^(" + run.group(0).translate(_SUPERSCRIPTS) + ")", text
    )
    prepared = prepare(prepared).replace("√", " sqrt ").replace("π", " pi ")
    prepared = prepared.replace("×", "*").replace("·", "*").replace("÷", "/")
    boxed = last_boxed(prepared)
    if boxed is not None:
        chosen = boxed
    else:
        segments = [
            next(g for g in m.groups() if g is not None) for m in _MATH_SEGMENT.finditer(prepared)
        ]
        if segments:
            chosen = segments[-1]
        else:
            line = answer_line(prepared)
            chosen = line if line is not None else prepared
    chosen = chosen.strip().rstrip(".。;；,，").strip()
    if len(chosen) > MAX_EXPRESSION_CHARS:
        raise _Refused("expression too long")
    if "=" in chosen:
        parts = chosen.split("=")
        if not _SIMPLE_LHS.match(parts[0]):
            raise _Refused("an equation, not an expression")
        chosen = parts[-1]
    return chosen


class _Parser:
    """Recursive-descent parser over whitelisted tokens that builds SymPy objects directly.

    Grammar: ``expr := term (('+'|'-') term)*``; ``term := unary (('*'|'/') unary |
    implicit unary)*``; ``unary := ('+'|'-') unary | power``; ``power := atom ('^' unary)?``
    (right-associative); ``atom := number | variable | pi | e | function [ '^' unary ]
    operand | '(' expr ')'``.
    """

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise _Refused("unexpected end of expression")
        self.position += 1
        return token

    def expect(self, value: str) -> None:
        kind, text = self.take()
        if kind != "op" or text != value:
            raise _Refused(f"expected {value!r}")

    def parse(self) -> SympyExpr:
        result = self.expr()
        if self.peek() is not None:
            raise _Refused("trailing tokens")
        return result

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Refused("nested too deeply")

    def expr(self) -> SympyExpr:
        self.enter()
        result = self.term()
        while (token := self.peek()) is not None and token in (("op", "+"), ("op", "-")):
            self.take()
            right = self.term()
            result = result + right if token[1] == "+" else result - right
        self.depth -= 1
        return result

    def term(self) -> SympyExpr:
        result = self.unary()
        while (token := self.peek()) is not None:
            if token in (("op", "*"), ("op", "/")):
                self.take()
                right = self.unary()
                if token[1] == "/":
                    if right == 0:
                        raise _Refused("division by zero")
                    result = result / right
                else:
                    result = result * right
            elif token[0] in ("number", "name") or token == ("op", "("):
                result = result * self.power()
            else:
                break
        return result

    def unary(self) -> SympyExpr:
        token = self.peek()
        if token in (("op", "-"), ("op", "+")):
            self.take()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return -operand if token == ("op", "-") else operand
        return self.power()

    def power(self) -> SympyExpr:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.take()
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return _safe_power(base, exponent)
        return base

    def atom(self) -> SympyExpr:
        kind, text = self.take()
        if kind == "number":
            return sympy_module().Rational(*_fraction_parts(text))
        if kind == "name":
            if text in _CONSTANT_NAMES:
                return _constants()[text]
            if text in _FUNCTION_NAMES:
                return self.function(text)
            return sympy_module().Symbol(text)
        if text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        raise _Refused(f"unexpected {text!r}")

    def function(self, name: str) -> SympyExpr:
        exponent = None
        if self.peek() == ("op", "^"):  # sin^2(x)
            self.take()
            exponent = self.unary()
        self.enter()
        argument = self.atom() if self.peek() == ("op", "(") else self.power()
        self.depth -= 1
        if name == "exp":
            _check_exp_argument(argument)
        value = _functions()[name](argument)
        return value if exponent is None else _safe_power(value, exponent)


def _fraction_parts(text: str) -> tuple[int, int]:
    value = Fraction(text)
    return value.numerator, value.denominator


def _magnitude(value: SympyExpr) -> float | None:
    """``|value|`` as a float for a numeric SymPy value, None when not a finite real."""
    try:
        number = complex(value.evalf(15))
    except SYMPY_ERRORS:
        return None
    magnitude = abs(number)
    return magnitude if math.isfinite(magnitude) else None


def _check_exp_argument(argument: SympyExpr) -> None:
    if argument.is_number:
        magnitude = _magnitude(argument)
        if magnitude is None or magnitude > _MAX_EXP_ARGUMENT:
            raise _Refused("exponential argument too large")


def _safe_power(base: SympyExpr, exponent: SympyExpr) -> SympyExpr:
    """``base ** exponent`` after bounding the work SymPy would do to evaluate it."""
    if exponent.is_number:
        size = _magnitude(exponent)
        if size is None or size > _MAX_SYMBOLIC_EXPONENT * 16:
            raise _Refused("exponent too large")
        if base.is_number:
            base_size = _magnitude(base)
            if base_size is None:
                raise _Refused("base is not a finite number")
            if base_size > 1 and size * math.log2(base_size) > _MAX_RESULT_BITS:
                raise _Refused("power too large")
            if 0 < base_size < 1 and size * -math.log2(base_size) > _MAX_RESULT_BITS:
                raise _Refused("power too small")
        elif size > _MAX_SYMBOLIC_EXPONENT:
            raise _Refused("exponent too large for a symbolic base")
    if base == 0 and exponent.is_number and exponent.is_nonpositive:
        raise _Refused("zero to a non-positive power")
    return sympy_module().Pow(base, exponent)


def _tokens(text: str) -> list[tuple[str, str]]:
    """Whitelisted tokens; letter runs split into known names and single-letter variables."""
    tokens: list[tuple[str, str]] = []
    position = 0
    previous_name_run = False
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None or found.end() == position:
            if text[position:].strip() == "":
                break
            raise _Refused(f"unexpected character {text[position]!r}")
        spaced = found.group(0)[:1].isspace()
        position = found.end()
        if found.group("number") is not None:
            if tokens and not spaced and tokens[-1][0] == "name" and len(tokens[-1][1]) == 1:
                raise _Refused("a letter followed by digits (H2O, x2) is not a formula")
            tokens.append(("number", found.group("number")))
            previous_name_run = False
        elif found.group("name") is not None:
            run = found.group("name")
            pieces = _split_name_run(run)
            unknown = any(piece not in _FUNCTION_NAMES and piece != "pi" for piece in pieces)
            if spaced and previous_name_run and unknown:
                raise _Refused("words, not a formula")
            tokens.extend(("name", piece) for piece in pieces)
            previous_name_run = unknown
        else:
            tokens.append(("op", found.group("op")))
            previous_name_run = False
    return tokens


def _split_name_run(run: str) -> list[str]:
    """``"sinx"`` -> ``["sin", "x"]``; refuse runs with more than two single letters."""
    pieces: list[str] = []
    index = 0
    while index < len(run):
        for name in _NAMES:
            if run.startswith(name, index):
                pieces.append(name)
                index += len(name)
                break
        else:
            pieces.append(run[index])
            index += 1
    if sum(len(piece) == 1 for piece in pieces) > 2:
        raise _Refused(f"{run!r} is a word, not a formula")
    return pieces


def _tower(expr: SympyExpr) -> int:
    """Height of the tower of exponentials with non-constant exponents."""
    sympy = sympy_module()
    if isinstance(expr, sympy.exp):
        return 1 + _tower(expr.args[0])
    if isinstance(expr, sympy.Pow) and not expr.exp.is_number:
        return max(_tower(expr.base), 1 + _tower(expr.exp))
    return max((_tower(arg) for arg in expr.args), default=0)


def _parse_expression(text: str) -> SympyExpr:
    """Parse untrusted text into a SymPy expression; raise :class:`_Refused` if unsafe."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise _Refused("expression too long")
    if "__" in text:
        raise _Refused("double underscore")
    converted = _convert_latex(text).replace("**", "^")
    if len(converted) > _MAX_CONVERTED_CHARS:
        raise _Refused("expression too long")
    if not _ALLOWED.fullmatch(converted):
        raise _Refused("characters outside the whitelist")
    tokens = _tokens(converted)
    if not tokens:
        raise _Refused("empty expression")
    expression = _Parser(tokens).parse()
    if _tower(expression) > _MAX_TOWER:
        raise _Refused("tower of exponentials")
    return expression


def parse_answer(text: str) -> SympyExpr | None:
    try:
        return _parse_expression(_expression_text(text))
    except _Refused:
        return None
    except SYMPY_ERRORS:
        return None
