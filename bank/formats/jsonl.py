"""Reader for the canonical JSONL format: one item object per line.

The field names are the canonical ones of :mod:`bank.records`; this module only parses
lines and says where each object came from. Checking the fields is
:func:`bank.records.validate_record`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from bank.records import RawRecord, RecordError, SourceLocation

_BOM = "\ufeff"


def read_jsonl(path: Path) -> Iterator[RawRecord]:
    """Yield one ``RawRecord`` per non-blank line of ``path``.

    Line numbers are 1-based physical lines (split on ``\\n`` only). Blank lines are
    skipped. A UTF-8 byte-order mark on the first line is ignored.

    Raises
    ------
    RecordError
        ``path:line: json: ...`` for a line that is not UTF-8, not valid JSON, or
        not a JSON object.
    OSError
        If the file cannot be opened.
    """
    with path.open("rb") as stream:
        for lineno, raw_line in enumerate(stream, start=1):
            location = SourceLocation(str(path), lineno)
            text = _decode_line(raw_line, location)
            if lineno == 1:
                text = text.removeprefix(_BOM)
            if not text.strip():
                continue
            yield RawRecord(location, _parse_object(text, location))


def _decode_line(raw_line: bytes, location: SourceLocation) -> str:
    try:
        return raw_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(
            location, "json", f"not valid UTF-8 (byte {exc.start + 1} of the line)"
        ) from None


def _parse_object(text: str, location: SourceLocation) -> dict[str, object]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(
            location, "json", f"invalid JSON: {exc.msg} (column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise RecordError(location, "json", f"expected a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    """Name a decoded JSON value the way JSON does (array, string, number...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"
