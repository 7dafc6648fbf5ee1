"""Board values as text for the HTML report: escaped, with a fixed number of decimals, and
:data:`MISSING` for whatever the board lacks."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime

from clients.report.board import as_integer, as_mapping, as_number, as_sequence
from judge.numbers import format_number

MISSING = "-"
"""What a missing or null value shows as."""


def escape(value: object) -> str:
    """``value`` as text safe in HTML element content and quoted attributes."""
    return html.escape(str(value), quote=True)


def number_text(value: object, digits: int = 1) -> str:
    """A board figure with ``digits`` decimals, :data:`MISSING` when it is not a finite number."""
    return format_number(as_number(value), digits, missing=MISSING)


def interval_html(summary: object, digits: int = 1) -> str:
    """``mean [low, high]`` of a score summary as HTML; ``-`` without a mean."""
    found = as_mapping(summary)
    mean, low, high = (as_number(found.get(k)) for k in ("mean", "ci_low", "ci_high"))
    if mean is None:
        return MISSING
    text = f"{mean:.{digits}f}"
    if low is not None and high is not None:
        text += f' <span class="ci">[{low:.{digits}f}, {high:.{digits}f}]</span>'
    return text


def rank_range_text(value: object) -> str:
    """A ``[low, high]`` rank range as ``low`` or ``low–high``."""
    bounds = [as_integer(v) for v in as_sequence(value)]
    if len(bounds) != 2 or bounds[0] is None or bounds[1] is None:
        return MISSING
    low, high = bounds
    return str(low) if low == high else f"{low}\u2013{high}"


def usd_text(value: object) -> str:
    """Dollars: two decimals with thousands separators from 1 up, three significant digits
    below."""
    number = as_number(value)
    if number is None:
        return MISSING
    return f"{number:,.2f}" if abs(number) >= 1 else f"{number:.3g}"


def percent_text(level: float) -> str:
    """A confidence level as a percentage: 0.95 -> ``95%``."""
    return f"{level * 100:g}%"


def join_names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (already escaped)."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def timestamp_texts(moment: datetime) -> tuple[str, str]:
    """(machine-readable, human-readable) forms; aware times are shown in UTC."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
        return moment.isoformat(timespec="seconds"), moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.isoformat(timespec="seconds"), moment.strftime("%Y-%m-%d %H:%M:%S")
