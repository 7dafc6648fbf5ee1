"""Source-format readers: each turns a file (or directory) into canonical ``RawRecord`` s.

Readers only parse and map field names; :func:`bank.records.validate_record` checks
the result. Formats:

* ``jsonl``: the canonical JSONL format (:mod:`bank.formats.jsonl`);
* ``gaokao``: GAOKAO-Bench JSON files or a directory of them (:mod:`bank.formats.gaokao`);
* ``mmlu_pro``: MMLU-Pro ``items.jsonl`` (:mod:`bank.formats.mmlu_pro`).

Every reader parses untrusted JSON with :func:`bank.formats.safe_json.parse_json` (or its
check), so hostile input is a ``file:line: json: ...`` problem, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from bank.formats.discipline_maps import map_disciplines, shipped_map
from bank.formats.gaokao import read_gaokao
from bank.formats.jsonl import read_jsonl
from bank.formats.mmlu_pro import read_mmlu_pro
from bank.formats.safe_json import JsonProblem, parse_json
from bank.records import RawRecord
from bank.taxonomy import DisciplineMap

FORMATS: tuple[str, ...] = ("jsonl", "gaokao", "mmlu_pro")

_READERS: dict[str, Callable[[Path], Iterator[RawRecord]]] = {
    "jsonl": read_jsonl,
    "gaokao": read_gaokao,
    "mmlu_pro": read_mmlu_pro,
}

__all__ = ["FORMATS", "detect_format", "read_gaokao", "read_jsonl", "read_mmlu_pro", "read_records"]


def detect_format(path: Path) -> str:
    """Guess the format of ``path`` from its kind, suffix and first record.

    * a directory, or a ``.json`` file whose top-level object has ``"example"``:
      ``gaokao``;
    * a ``.jsonl`` file whose first non-blank line is an object with ``question_id``
      and ``category``: ``mmlu_pro``; any other ``.jsonl``: ``jsonl``.

    Raises
    ------
    ValueError
        If the format cannot be told (other suffixes, a ``.json`` file that is not a
        GAOKAO-Bench file, a path that does not exist).
    OSError
        If the file exists but cannot be read.
    """
    if path.is_dir():
        return "gaokao"
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _detect_json(path)
    if suffix == ".jsonl":
        return _detect_jsonl(path)
    raise ValueError(
        f"{path}: cannot tell the format from the suffix {path.suffix!r}; expected a "
        f"GAOKAO-Bench directory or .json file, or a .jsonl file (formats: "
        f"{', '.join(FORMATS)})"
    )


def _detect_json(path: Path) -> str:
    try:
        document = parse_json(path.read_bytes())
    except JsonProblem as problem:
        raise ValueError(
            f"{path}:{problem.line}: json: {problem.describe()}; not valid JSON, cannot "
            "detect its format"
        ) from None
    if isinstance(document, dict) and "example" in document:
        return "gaokao"
    raise ValueError(
        f'{path}: a .json file without a top-level "example" list is not a GAOKAO-Bench '
        "file; canonical items go in a .jsonl file, one object per line"
    )


def _detect_jsonl(path: Path) -> str:
    with path.open(encoding="utf-8-sig", errors="replace") as stream:
        first = next((line for line in stream if line.strip()), "")
    try:
        value = parse_json(first)
    except JsonProblem:
        return "jsonl"  # read_jsonl reports the bad line with its number
    if isinstance(value, dict) and "question_id" in value and "category" in value:
        return "mmlu_pro"
    return "jsonl"


def read_records(
    path: Path, fmt: str | None = None, discipline_map: DisciplineMap | None = None
) -> Iterator[RawRecord]:
    """Read ``path`` in format ``fmt`` (detected with :func:`detect_format` if ``None``),
    its categories mapped onto the bank's disciplines by the format's shipped map with
    ``discipline_map`` laid over it (:mod:`bank.formats.discipline_maps`).

    Raises
    ------
    ValueError
        For an unknown ``fmt`` or an undetectable format.
    RecordError
        From the reader, for the first malformed record (``file:line: field: ...``).
    """
    name = detect_format(path) if fmt is None else fmt
    reader = _READERS.get(name)
    if reader is None:
        raise ValueError(f"unknown format {name!r}; expected one of {', '.join(FORMATS)}")
    mapping = shipped_map(name).merged(discipline_map or DisciplineMap())
    return map_disciplines(reader(path), mapping)
