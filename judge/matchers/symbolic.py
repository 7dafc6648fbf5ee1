"""Symbolic equality of formulas: :func:`match_symbolic`, :func:`looks_like_formula`.

Both sides are parsed by :mod:`judge.matchers.symbolic_parser` (never by SymPy's
``eval``-based parsers), then compared: SymPy's automatic canonicalisation, then numeric
probes at six fixed points, then ``simplify`` only for small expressions (the limits
below). :func:`constant_value` evaluates a closed-form answer (``sin(pi/6)``) for
:mod:`judge.matchers.numbers`.
"""

from __future__ import annotations

import math
import random
import re

from judge.matchers.outcome import Match
from judge.matchers.symbolic_parser import SYMPY_ERRORS, SympyExpr, parse_answer, sympy_module
from judge.matchers.text import prepare

_MAX_SIMPLIFY_OPS = 40
_MAX_SIMPLIFY_POWER = 8
_NUMERIC_PROBES = 6


def constant_value(answer: str) -> float | None:
    """The real value of the answer's expression when it has no variables, else None."""
    expression = parse_answer(answer)
    if expression is None or expression.free_symbols:
        return None
    try:
        value = complex(expression.evalf(30))
    except SYMPY_ERRORS:
        return None
    if not math.isfinite(value.real) or abs(value.imag) > 1e-12 * max(1.0, abs(value.real)):
        return None
    return value.real


def looks_like_formula(reference: str) -> bool:
    """True when ``reference`` is a formula the safe parser accepts (``x^2+2x``,
    ``\\frac{1}{2}``, ``sqrt(2)``) rather than words or a bare name (``Paris``, ``No``)."""
    prepared = prepare(reference)
    if not re.search(r"[0-9+\-*/^()=\\√π]", prepared):
        return False
    return parse_answer(reference) is not None


def _numeric_probe(left: SympyExpr, right: SympyExpr) -> tuple[int, int, bool]:
    """Evaluate both sides at fixed pseudo-random points.

    Returns ``(points agreeing, points evaluated, a positive point disagreed)``. Points are
    half positive (where real-domain identities such as ``ln(x^2) = 2 ln x`` hold) and
    half negative.
    """
    sympy = sympy_module()
    symbols = sorted(left.free_symbols | right.free_symbols, key=lambda symbol: symbol.name)
    generator = random.Random(20240531)
    agree = evaluated = 0
    positive_disagreement = False
    for probe in range(_NUMERIC_PROBES):
        sign = 1 if probe % 2 == 0 else -1
        point = {
            symbol: sympy.Rational(sign * generator.randint(110, 290), 97) for symbol in symbols
        }
        try:
            a = complex(left.evalf(30, subs=point))
            b = complex(right.evalf(30, subs=point))
        except SYMPY_ERRORS:
            continue
        if not all(math.isfinite(part) for part in (a.real, a.imag, b.real, b.imag)):
            continue
        evaluated += 1
        if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)):
            agree += 1
        elif sign > 0:
            positive_disagreement = True
        if not symbols:
            break
    return agree, evaluated, positive_disagreement


def _cheap_to_simplify(expression: SympyExpr) -> bool:
    """Small enough that ``simplify`` stays fast: few operations, small integer powers."""
    sympy = sympy_module()
    if sympy.count_ops(expression) > _MAX_SIMPLIFY_OPS:
        return False
    for power in expression.atoms(sympy.Pow):
        if power.exp.is_Integer and abs(int(power.exp)) > _MAX_SIMPLIFY_POWER:
            return False
    return True


def match_symbolic(answer: str, reference: str) -> Match:
    """Symbolic equality of the answer's expression and the reference expression.

    The expression is taken from the last ``\\boxed{}``, ``$...$`` segment or answer line
    (a simple left-hand side ``y =`` / ``f(x) =`` is dropped). Simple LaTeX is converted
    (``\\frac``, ``\\sqrt``, ``\\sqrt[n]``, ``\\cdot``, ``\\times``, ``^{}``, ``\\left(``,
    ``\\pi``, ``\\sin``...), then the text must consist only of digits, ``+ - * / ^ ( ) .``,
    spaces, the names ``sin cos tan log ln exp sqrt pi e`` and single-letter variables
    (``2xy`` is ``2*x*y``; ``log`` and ``ln`` are the natural logarithm). Everything else -
    quotes, ``__``, brackets, subscripts, words (a letter run with more than two variables,
    two letter runs side by side), a letter followed by digits (``H2O``), more than 200
    characters - is refused, and so
    are exponents above 1024 (above 64 on a symbolic base), numeric powers above 4096 bits
    and towers of exponentials.

    Decision: equal if ``a - b`` is 0 after SymPy's automatic canonicalisation
    (``x(x+2)`` vs ``x^2+2x`` is not caught here: nothing is expanded, because expanding
    ``(x+y+z+1)^64`` would hang). Otherwise both sides are evaluated at six fixed
    pseudo-random points (half positive, half negative; 30 digits; equal within a relative
    1e-9): a disagreement at a positive point -> False; agreement at every point -> True
    (this is what SymPy's ``equals`` does too); agreement only at the positive points ->
    None (equal on a restricted domain only, e.g. ``ln(x^2)`` vs ``2ln(x)``,
    ``sqrt(x^2)`` vs ``x``). When no point evaluates to a finite number,
    ``simplify(a - b) == 0`` decides True - only for expressions of at most 40 operations
    and integer powers up to 8, so it stays cheap - else None.

    Returns None when either side is not parseable.
    """
    expected = parse_answer(reference)
    if expected is None:
        return Match(None, "symbolic", f"reference {reference[:40]!r} is not a formula")
    got = parse_answer(answer)
    if got is None:
        return Match(None, "symbolic", "no parseable expression in the answer")
    sympy = sympy_module()
    shown = f"{sympy.sstr(got)[:60]} vs {sympy.sstr(expected)[:60]}"
    try:
        difference = got - expected  # SymPy's automatic canonicalisation only
        if difference == 0:
            return Match(True, "symbolic", f"{shown}: a - b == 0")
        agree, evaluated, positive_disagreement = _numeric_probe(got, expected)
        if positive_disagreement:
            return Match(False, "symbolic", f"{shown}: differ numerically")
        if evaluated and agree == evaluated:
            return Match(True, "symbolic", f"{shown}: equal at {evaluated} numeric points")
        if evaluated:
            return Match(None, "symbolic", f"{shown}: equal only for positive values")
        if _cheap_to_simplify(difference) and sympy.simplify(difference) == 0:
            return Match(True, "symbolic", f"{shown}: simplify(a - b) == 0")
    except SYMPY_ERRORS:
        return Match(None, "symbolic", f"{shown}: could not compare")
    return Match(None, "symbolic", f"{shown}: could not decide")
