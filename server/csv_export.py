"""CSV files for people's spreadsheets: the one writer every export uses (``proctor
leaderboard --csv``, ``proctor bank health --items-csv``, the console's downloads).

Cells come from vendors (model names, families) and from the audit log (paths, subjects):
a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a
formula to a spreadsheet (OWASP, "CSV Injection"), so it is written with a leading ``'``.
A number, or text that is only a number (``-0.25``), is written as it is.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet takes for the start of a formula."""


def safe_cell(value: object) -> object:
    """``value`` as a cell: ``""`` for None, ISO 8601 for a time, a leading ``'`` before
    text a spreadsheet would run as a formula; numbers unchanged."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _is_number(value):
        return "'" + value
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_row(values: Iterable[object]) -> list[object]:
    return [safe_cell(value) for value in values]


def write_rows(handle: TextIO, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """A header of ``columns``, then each row's values of those columns (other keys
    dropped, missing ones empty), every cell made safe (``safe_cell``)."""
    writer = csv.writer(handle)
    writer.writerow(safe_row(columns))
    for row in rows:
        writer.writerow(safe_row(row.get(column) for column in columns))


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """``write_rows`` into a string."""
    out = io.StringIO()
    write_rows(out, columns, rows)
    return out.getvalue()
