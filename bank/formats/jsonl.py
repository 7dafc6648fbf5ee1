"""Reader for the canonical JSONL format: one item object per line.

The field names are the canonical ones of :mod:`bank.records`; this module only parses
lines and says where each object came from. Checking the fields is
:func:`bank.records.validate_record`'s job.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bank.formats.safe_json import JsonProblem, decode_utf8, json_type, parse_json
from bank.records import RawRecord, RecordError, SourceLocation


def read_jsonl(path: Path) -> Iterator[RawRecord]:
    """Yield one ``RawRecord`` per non-blank line of ``path``.

    Line numbers are 1-based physical lines (split on ``\\n`` only). Blank lines are
    skipped. A UTF-8 byte-order mark at the start of a line is ignored. Lines are parsed by
    :func:`bank.formats.safe_json.parse_json`, so hostile input (nesting deeper than 64
    levels, a 5,000-digit number, ``NaN``, a NUL byte) is a problem like any other.

    Raises
    ------
    RecordError
        ``path:line: json: ...`` for a line that is not UTF-8, not acceptable JSON
        (see :func:`~bank.formats.safe_json.parse_json`), or not a JSON object.
    OSError
        If the file cannot be opened.
    """
    with path.open("rb") as stream:
        for lineno, raw_line in enumerate(stream, start=1):
            location = SourceLocation(str(path), lineno)
            try:
                text = decode_utf8(raw_line)
                if not text.strip():
                    continue
                value = parse_json(text)
            except JsonProblem as problem:
                raise RecordError(location, "json", problem.describe()) from None
            if not isinstance(value, dict):
                raise RecordError(
                    location, "json", f"expected a JSON object, got {json_type(value)}"
                )
            yield RawRecord(location, value)


