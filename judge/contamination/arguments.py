"""Checks of the arguments of the contamination statistics.

Each function returns the value as the type it must have, or raises ``ValueError`` naming
the argument (``name``) and what is wrong with it; bools are refused where a number is
expected.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


def _real(value: object, name: str, expected: str) -> float:
    """``value`` as a float if it is a real number (not a bool), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return float(value)


def check_fraction(value: object, name: str) -> float:
    """A float strictly inside (0, 1)."""
    number = _real(value, name, "a number in (0, 1)")
    if not 0.0 < number < 1.0:  # also refuses NaN
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {number!r}")
    return number


def check_unit_interval(value: object, name: str) -> float:
    """A float in [0, 1]."""
    number = _real(value, name, "a number in [0, 1]")
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {number!r}")
    return number


def check_finite(value: object, name: str) -> float:
    """A finite float."""
    number = _real(value, name, "a finite number")
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number!r}")
    return number


def check_count(value: object, name: str, minimum: int) -> int:
    """An integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {number}")
    return number


def check_text(value: object, name: str) -> str:
    """A string."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value
