"""Problems found in an input file, reported all at once as ``file:line: field: what``.

The readers of recorded responses (``bank.adaptive.recorded``), ratings
(``judge.agreement``), score tables and static leaderboards (``judge.ranking``) collect
every problem of a file before refusing it, so a user fixes them in one go; their errors
subclass ``InputError``. It lives in the bank, the lowest of the packages, next to
:mod:`bank.formats.safe_json`, so that every reader above it can use it.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_REPORTED_ERRORS = 50
"""How many problems ``str(InputError)`` spells out; ``errors`` holds them all."""


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One thing wrong with a file; ``str()`` is ``file:line: field: what``."""

    path: str
    line: int | None
    field: str
    """The column (or ``file``, ``csv``) the problem is in."""
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


class InputError(ValueError):
    """A file that cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[InputProblem]) -> None:
        self.errors = list(errors)
        super().__init__(problem_lines(self.errors))


def problem_lines(problems: Sequence[object]) -> str:
    """The first :data:`MAX_REPORTED_ERRORS` problems, a line each, and how many more."""
    shown = "\n".join(str(p) for p in problems[:MAX_REPORTED_ERRORS])
    more = len(problems) - MAX_REPORTED_ERRORS
    return shown + (f"\n... and {more} more" if more > 0 else "")


def read_text(path: str | os.PathLike[str], error: type[InputError]) -> tuple[str, str]:
    """``(name, text)`` of the UTF-8 file at ``path`` (a byte-order mark is dropped);
    ``error`` naming the line of the first byte that is not UTF-8. OSError if unreadable."""
    name = os.fspath(path)
    data = Path(path).read_bytes()
    try:
        return name, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error([InputProblem(name, line, "file", "not valid UTF-8")]) from None


def numbered_rows(
    text: str,
    *,
    path: str,
    problems: list[InputProblem],
    delimiter: str = ",",
    strict: bool = True,
) -> Iterator[tuple[int, list[str]]]:
    """The non-blank CSV records of ``text`` with the line each starts on (a quoted field
    may span lines). A malformed record is reported in ``problems`` (field ``csv``) and ends
    the reading."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=strict)
    end = 0  # the last physical line read so far
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(InputProblem(path, end + 1, "csv", str(exc)))
            return
        line, end = end + 1, reader.line_num
        if any(cell.strip() for cell in row):
            yield line, row
