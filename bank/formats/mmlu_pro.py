"""Reader for MMLU-Pro ``items.jsonl`` (TIGER-AI-Lab/MMLU-Pro, Apache-2.0).

One JSON object per line with ``question_id``, ``category``, ``src``, ``question``,
``options``, ``answer`` (a letter) and ``answer_index``. Mapping to the canonical
record (:mod:`bank.records`):

* ``discipline`` = ``category`` as given (``"math"``, ``"computer science"``...);
* ``subdiscipline`` = ``src`` with ``_`` replaced by a space and nothing else changed
  (``"ori_mmlu-high_school_physics"`` -> ``"ori mmlu-high school physics"``): the
  prefix says which collection the item came from (original MMLU, STEM-EZ,
  TheoremQA, SciBench), and keeping it keeps the 91 sources distinct and traceable;
* ``qtype`` ``multiple_choice``, ``answer`` the letter, ``source`` ``"MMLU-Pro"``,
  ``language`` ``"en"``, ``id`` ``uuid5(NAMESPACE, "mmlu_pro:<question_id>")``;
* ``options`` as given, except that exact ``"N/A"`` padding options are dropped when
  they all come after the correct option (dropping them then leaves every letter up to
  the answer unchanged); otherwise they are kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Any

from bank.formats.jsonl import read_jsonl
from bank.records import OPTION_LETTERS, RawRecord, RecordError, SourceLocation

NAMESPACE = uuid.UUID("35252f4f-c02f-4226-8073-ec535431e410")
"""Namespace of the deterministic MMLU-Pro item ids; never change it."""

SOURCE = "MMLU-Pro"
PADDING = "N/A"


def read_mmlu_pro(path: Path) -> Iterator[RawRecord]:
    """Yield one canonical record per non-blank line of an MMLU-Pro ``items.jsonl``.

    Raises
    ------
    RecordError
        ``file:line: field: ...`` for a line that is not a JSON object (field
        ``json``), a missing or mistyped ``question_id``, ``options`` or
        ``answer_index``, or an ``answer`` letter that is not
        ``OPTION_LETTERS[answer_index]`` (field ``answer``).
    """
    for raw in read_jsonl(path):
        yield RawRecord(raw.location, _convert(raw.data, raw.location))


def _convert(item: dict[str, Any], location: SourceLocation) -> dict[str, Any]:
    question_id = _field(item, "question_id", int | str, location)
    options = _field(item, "options", list, location)
    answer_index = _answer_index(item, len(options), location)
    answer = item.get("answer")
    expected = OPTION_LETTERS[answer_index]
    if answer != expected:
        raise RecordError(
            location,
            "answer",
            f"{answer!r} does not match answer_index {answer_index} (expected {expected!r})",
        )
    src = item.get("src")
    return {
        "id": str(uuid.uuid5(NAMESPACE, f"mmlu_pro:{question_id}")),
        "discipline": item.get("category"),
        "subdiscipline": src.replace("_", " ") if isinstance(src, str) else src,
        "qtype": "multiple_choice",
        "question": item.get("question"),
        "options": drop_padding(options, answer_index),
        "answer": answer,
        "source": SOURCE,
        "language": "en",
    }


def _field(
    item: dict[str, Any], name: str, kind: type[Any] | UnionType, location: SourceLocation
) -> Any:
    value = item.get(name)
    if value is None or isinstance(value, bool) or not isinstance(value, kind):
        problem = "missing" if value is None else f"wrong type {type(value).__name__}"
        raise RecordError(location, name, problem)
    return value


def _answer_index(item: dict[str, Any], n_options: int, location: SourceLocation) -> int:
    index: int = _field(item, "answer_index", int, location)
    if not 0 <= index < min(n_options, len(OPTION_LETTERS)):
        raise RecordError(location, "answer_index", f"{index} is outside the {n_options} options")
    return index


def drop_padding(options: list[Any], answer_index: int) -> list[Any]:
    """Drop exact ``"N/A"`` options if they all come after ``answer_index``.

    Removing options only after the answer keeps the answer's letter; if any padding
    option comes before the answer (or is the answer), the list is returned unchanged.
    """
    padding = [index for index, option in enumerate(options) if option == PADDING]
    if not padding or padding[0] <= answer_index:
        return list(options)
    return [option for option in options if option != PADDING]
