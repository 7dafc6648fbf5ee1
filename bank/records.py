"""The canonical item record and its validation.

Every importer (JSONL, GAOKAO-Bench, MMLU-Pro) turns its source into ``RawRecord`` s:
a dict in the canonical field names plus the place it came from. ``validate_record``
turns one into an ``ItemRecord`` or raises ``RecordError`` naming file, line and field.

Canonical JSONL format, one item per line (see docs/bank.md, "Canonical import format")::

    {"id": "<uuid, optional>", "discipline": "...", "subdiscipline": "...",
     "qtype": "multiple_choice", "question": "...", "options": ["...", ...],
     "answer": "B", "explanation": "...", "source": "...", "language": "zh"}

For ``multiple_choice`` the answer is the letter of the correct option (``A`` is the
first option) or that option's exact text; it is stored as the letter.
"""

from __future__ import annotations

import string
import uuid
from dataclasses import dataclass, field
from typing import Any

QTYPES: frozenset[str] = frozenset(
    {
        "multiple_choice",
        "true_false",
        "fill_in",
        "short_answer",
        "calculation",
        "essay",
        "material_analysis",
        "reading_comprehension",
        "cloze",
        "error_correction",
        "dictation",
    }
)
"""Question types the bank knows. Objective types are scored by matchers later."""

MIN_OPTIONS = 2
MAX_OPTIONS = 26
OPTION_LETTERS = string.ascii_uppercase
CANONICAL_FIELDS: frozenset[str] = frozenset(
    {
        "id",
        "discipline",
        "subdiscipline",
        "qtype",
        "question",
        "options",
        "answer",
        "explanation",
        "source",
        "language",
    }
)
REQUIRED_FIELDS: tuple[str, ...] = ("discipline", "subdiscipline", "qtype", "question", "answer")
MAX_TEXT = 100_000
FIELD_LIMITS: dict[str, int] = {"discipline": 100, "subdiscipline": 200, "qtype": 40}
"""Lengths of the database columns these fields are stored in."""


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a record came from: a file and a 1-based line number."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class RecordError(ValueError):
    """A record that cannot be imported; ``str()`` is ``file:line: field: what is wrong``."""

    def __init__(self, location: SourceLocation, field_name: str, message: str) -> None:
        self.location = location
        self.field = field_name
        self.message = message
        super().__init__(f"{location}: {field_name}: {message}")

    def __reduce__(self) -> tuple[type[RecordError], tuple[SourceLocation, str, str]]:
        # pickled by the import's worker processes (bank.import_prepare)
        return type(self), (self.location, self.field, self.message)


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A source record in canonical field names, not yet validated."""

    location: SourceLocation
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """A validated item, ready to be hashed, augmented and stored."""

    location: SourceLocation
    discipline: str
    subdiscipline: str
    qtype: str
    question: str
    answer: str
    id: uuid.UUID | None = None
    options: tuple[str, ...] | None = None
    explanation: str | None = None
    source: str | None = None
    language: str = "zh"
    extra: dict[str, Any] = field(default_factory=dict)


def _text(raw: RawRecord, name: str, *, required: bool, max_len: int = MAX_TEXT) -> str | None:
    value = raw.data.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RecordError(raw.location, name, "required field is missing or empty")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RecordError(raw.location, name, f"must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if len(text) > max_len:
        raise RecordError(raw.location, name, f"longer than {max_len} characters")
    _check_characters(raw, name, text)
    return text


def _check_characters(raw: RawRecord, name: str, text: str) -> None:
    """Refuse what PostgreSQL cannot store (NUL) and what is not Unicode text (lone
    surrogates from a broken decoder)."""
    if "\x00" in text:
        raise RecordError(raw.location, name, "contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RecordError(
            raw.location, name, f"is not valid Unicode at character {error.start}"
        ) from None


def _options(raw: RawRecord) -> tuple[str, ...] | None:
    value = raw.data.get("options")
    if value is None:
        return None
    if not isinstance(value, list):
        raise RecordError(raw.location, "options", "must be a list of strings")
    options: list[str] = []
    for index, option in enumerate(value):
        if not isinstance(option, str | int | float) or isinstance(option, bool):
            raise RecordError(raw.location, f"options[{index}]", "must be a string")
        text = str(option).strip()
        if not text:
            raise RecordError(raw.location, f"options[{index}]", "is empty")
        if len(text) > MAX_TEXT:
            raise RecordError(
                raw.location, f"options[{index}]", f"longer than {MAX_TEXT} characters"
            )
        _check_characters(raw, f"options[{index}]", text)
        options.append(text)
    return tuple(options)


def _choice_answer(raw: RawRecord, answer: str, options: tuple[str, ...]) -> str:
    """Return the answer as a letter; accept a letter or the exact option text."""
    letter = answer.strip().rstrip(".．、").upper()
    in_range = len(letter) == 1 and letter in OPTION_LETTERS[: len(options)]
    if not in_range and answer in options:
        return OPTION_LETTERS[options.index(answer)]
    if len(letter) == 1 and letter in OPTION_LETTERS:
        if not in_range:
            raise RecordError(
                raw.location,
                "answer",
                f"{letter!r} is not among the {len(options)} options "
                f"(A-{OPTION_LETTERS[len(options) - 1]})",
            )
        return letter
    raise RecordError(
        raw.location, "answer", f"{answer[:40]!r} is neither an option letter nor an option's text"
    )


def validate_record(raw: RawRecord) -> ItemRecord:
    """Check one raw record against the canonical schema.

    Raises
    ------
    RecordError
        For the first problem found, naming the field.
    """
    unknown = sorted(set(raw.data) - CANONICAL_FIELDS - {"extra"})
    if unknown:
        raise RecordError(raw.location, unknown[0], "unknown field")
    values = {
        name: _text(raw, name, required=True, max_len=FIELD_LIMITS.get(name, MAX_TEXT))
        for name in REQUIRED_FIELDS
    }
    qtype = str(values["qtype"])
    if qtype not in QTYPES:
        raise RecordError(
            raw.location, "qtype", f"{qtype!r} is not one of {', '.join(sorted(QTYPES))}"
        )
    options = _options(raw)
    answer = str(values["answer"])
    if qtype == "multiple_choice":
        if options is None:
            raise RecordError(raw.location, "options", "required for multiple_choice")
        if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
            raise RecordError(
                raw.location,
                "options",
                f"{len(options)} options; multiple_choice needs {MIN_OPTIONS}-{MAX_OPTIONS}",
            )
        if len(set(options)) != len(options):
            raise RecordError(raw.location, "options", "two options have the same text")
        answer = _choice_answer(raw, answer, options)
    elif options is not None:
        raise RecordError(raw.location, "options", f"only multiple_choice has options, not {qtype}")
    item_id = raw.data.get("id")
    parsed_id: uuid.UUID | None = None
    if item_id not in (None, ""):
        try:
            parsed_id = uuid.UUID(str(item_id))
        except ValueError:
            raise RecordError(raw.location, "id", f"{item_id!r} is not a UUID") from None
    extra = raw.data.get("extra") or {}
    if not isinstance(extra, dict):
        raise RecordError(raw.location, "extra", "must be an object")
    return ItemRecord(
        location=raw.location,
        id=parsed_id,
        discipline=str(values["discipline"]),
        subdiscipline=str(values["subdiscipline"]),
        qtype=qtype,
        question=str(values["question"]),
        options=options,
        answer=answer,
        explanation=_text(raw, "explanation", required=False),
        source=_text(raw, "source", required=False, max_len=200),
        language=_text(raw, "language", required=False, max_len=16) or "zh",
        extra=extra,
    )
