"""Numbers as they leave the program: into JSON, and into text for people.

Statistics here may be NaN (too little data) or infinite (a degenerate ratio); JSON has
neither, and a table cell should say "n/a" rather than "nan". Every writer of figures goes
through these two functions so that a missing figure looks the same everywhere.
"""

from __future__ import annotations

import math

MISSING = "n/a"
"""What a table cell shows for a figure that does not exist."""


def json_float(value: float | None) -> float | None:
    """``value`` as a JSON number: NaN, infinities and ``None`` become ``None``."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def format_number(value: float | None, digits: int = 2, *, missing: str = MISSING) -> str:
    """``value`` with ``digits`` decimals, or ``missing`` when it is None, NaN or infinite."""
    number = json_float(value)
    return missing if number is None else f"{number:.{digits}f}"
