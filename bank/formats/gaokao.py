"""Reader for GAOKAO-Bench files (OpenLMLab/GAOKAO-Bench, Apache-2.0).

Each file is ``{"keywords": ..., "example": [item, ...]}``; an item has ``year``,
``category`` (exam paper), ``question``, ``answer``, ``analysis``, ``score`` and
``index``. Subject and question type are only in the file name, so every known file
name (without its ``2010-2022_`` year prefix) is listed in :data:`FILE_KINDS`; an
unknown name is an error rather than a guess.

Mapping to the canonical record (:mod:`bank.records`):

* single-answer multiple-choice items (one answer letter) become ``multiple_choice``:
  the options are cut out of the question text by :func:`split_options`; when that is
  not reliable the item keeps its whole text, the file's fallback type and the letter as
  text, and :class:`GaokaoStats` counts it;
* multi-answer objective items (reading comprehension, cloze, grouped questions, and
  multiple-select answers such as ``"AC"``) keep their whole text, the file's type and
  an answer like ``"1. A; 2. C; 3. D"``;
* subjective items keep the reference answer text and the file's type.

``id`` is ``uuid5(NAMESPACE, "gaokao:<file stem>:<index>")`` so a re-import is stable;
the record's line is the line where the item's object starts in the file.
"""

from __future__ import annotations

import json
import re
import uuid
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bank.formats.safe_json import DECODER, JsonProblem, check_json, decode_utf8
from bank.records import OPTION_LETTERS, RawRecord, RecordError, SourceLocation

NAMESPACE = uuid.UUID("a3f7298f-1827-4d31-be12-874547c02f4e")
"""Namespace of the deterministic GAOKAO item ids; never change it."""

SOURCE_MAX = 200


@dataclass(frozen=True, slots=True)
class FileKind:
    """What a GAOKAO-Bench file holds, known from its name.

    ``qtype`` is the type of every item of the file, except that in an ``mcq`` file a
    single-answer item whose options parse becomes ``multiple_choice``; ``qtype`` is
    then the fallback. ``objective`` files have lists of answer letters.
    """

    discipline: str
    subdiscipline: str
    qtype: str
    objective: bool
    mcq: bool = False
    language: str = "zh"


def _mcq(discipline: str, subdiscipline: str, language: str = "zh") -> FileKind:
    return FileKind(discipline, subdiscipline, "reading_comprehension", True, True, language)


def _open(discipline: str, subdiscipline: str, qtype: str, language: str = "zh") -> FileKind:
    return FileKind(discipline, subdiscipline, qtype, False, False, language)


FILE_KINDS: dict[str, FileKind] = {
    # Objective_Questions
    "English_MCQs": _mcq("English", "Grammar and Vocabulary", "en"),
    "Biology_MCQs": _mcq("Biology", "Multiple Choice"),
    "Chemistry_MCQs": _mcq("Chemistry", "Multiple Choice"),
    "Chinese_Lang_and_Usage_MCQs": _mcq("Chinese", "Language and Usage"),
    "Chinese_Modern_Lit": FileKind("Chinese", "Modern Literature", "reading_comprehension", True),
    "English_Fill_in_Blanks": FileKind("English", "Cloze", "cloze", True, language="en"),
    "English_Reading_Comp": FileKind(
        "English", "Reading Comprehension", "reading_comprehension", True, language="en"
    ),
    "Geography_MCQs": _mcq("Geography", "Multiple Choice"),
    "History_MCQs": _mcq("History", "Multiple Choice"),
    "Math_I_MCQs": _mcq("Mathematics", "Math I"),
    "Math_II_MCQs": _mcq("Mathematics", "Math II"),
    "Physics_MCQs": _mcq("Physics", "Multiple Choice"),
    "Political_Science_MCQs": _mcq("Political Science", "Multiple Choice"),
    "English_Cloze_Test": FileKind("English", "Seven-Option Cloze", "cloze", True, language="en"),
    # Subjective_Questions
    "Biology_Open-ended_Questions": _open("Biology", "Open-ended Questions", "short_answer"),
    "Chemistry_Open-ended_Questions": _open("Chemistry", "Open-ended Questions", "short_answer"),
    "Chinese_Language_Ancient_Poetry_Reading": _open(
        "Chinese", "Ancient Poetry Reading", "short_answer"
    ),
    "Chinese_Language_Classical_Chinese_Reading": _open(
        "Chinese", "Classical Chinese Reading", "short_answer"
    ),
    "Chinese_Language_Famous_Passages_and_Sentences_Dictation": _open(
        "Chinese", "Famous Passages and Sentences", "dictation"
    ),
    "Chinese_Language_Language_and_Writing_Skills_Open-ended_Questions": _open(
        "Chinese", "Language and Writing Skills", "short_answer"
    ),
    "Chinese_Language_Literary_Text_Reading": _open(
        "Chinese", "Literary Text Reading", "short_answer"
    ),
    "Chinese_Language_Practical_Text_Reading": _open(
        "Chinese", "Practical Text Reading", "short_answer"
    ),
    "Geography_Open-ended_Questions": _open("Geography", "Open-ended Questions", "short_answer"),
    "History_Open-ended_Questions": _open("History", "Open-ended Questions", "short_answer"),
    "Math_I_Fill-in-the-Blank": _open("Mathematics", "Math I", "fill_in"),
    "Math_I_Open-ended_Questions": _open("Mathematics", "Math I", "calculation"),
    "Math_II_Fill-in-the-Blank": _open("Mathematics", "Math II", "fill_in"),
    "Math_II_Open-ended_Questions": _open("Mathematics", "Math II", "calculation"),
    "Physics_Open-ended_Questions": _open("Physics", "Open-ended Questions", "short_answer"),
    "Political_Science_Open-ended_Questions": _open(
        "Political Science", "Open-ended Questions", "short_answer"
    ),
    "English_Language_Error_Correction": _open(
        "English", "Error Correction", "error_correction", "en"
    ),
    "English_Language_Cloze_Passage": _open("English", "Grammar Cloze Passage", "cloze", "en"),
}
"""Every GAOKAO-Bench file name, without its year-range prefix, and what it holds."""

_YEARS_PREFIX = re.compile(r"^\d{4}-\d{4}_")


@dataclass(slots=True)
class GaokaoStats:
    """Counts filled in by :func:`read_gaokao` while it reads (pass one in to get them).

    ``single_answer_mcqs`` counts items of multiple-choice files with exactly one
    answer letter; ``parsed_mcqs`` those whose options were split out; ``unparsed``
    the locations of the others (kept whole, not guessed). ``multi_select`` counts
    items whose single answer entry has several letters (e.g. physics ``"AC"``).
    """

    files: int = 0
    records: int = 0
    single_answer_mcqs: int = 0
    parsed_mcqs: int = 0
    unparsed: list[SourceLocation] = field(default_factory=list)
    multi_select: int = 0

    @property
    def parse_rate(self) -> float:
        """Share of single-answer multiple-choice items whose options were parsed."""
        if not self.single_answer_mcqs:
            return 1.0
        return self.parsed_mcqs / self.single_answer_mcqs


def file_kind(path: Path) -> FileKind | None:
    """The :class:`FileKind` of a GAOKAO-Bench file, by name; ``None`` if unknown."""
    return FILE_KINDS.get(_YEARS_PREFIX.sub("", path.stem))


def read_gaokao(path: Path, stats: GaokaoStats | None = None) -> Iterator[RawRecord]:
    """Yield canonical records from one GAOKAO-Bench file or a directory of them.

    A directory is searched recursively for ``*.json`` files, read in sorted order.
    If ``stats`` is given it is updated as records are yielded.

    Raises
    ------
    RecordError
        ``file:line: field: ...`` for invalid JSON, a missing or non-list
        ``"example"``, an item without a non-empty ``question``, ``answer`` or an
        ``index``, or a file name not in :data:`FILE_KINDS` (field ``file``).
    ValueError
        If ``path`` is a directory without any ``*.json`` file.
    OSError
        If a file cannot be read (e.g. ``path`` does not exist).
    """
    stats = stats if stats is not None else GaokaoStats()
    if path.is_dir():
        files = sorted(path.rglob("*.json"))
        if not files:
            raise ValueError(f"{path}: no GAOKAO-Bench *.json files in this directory")
    else:
        files = [path]
    for file in files:
        yield from _read_file(file, stats)


def _read_file(path: Path, stats: GaokaoStats) -> Iterator[RawRecord]:
    kind = file_kind(path)
    if kind is None:
        raise RecordError(
            SourceLocation(str(path), 1),
            "file",
            f"unknown GAOKAO-Bench file name {path.stem!r}; known names (after the year "
            f"prefix): {', '.join(sorted(FILE_KINDS))}",
        )
    stats.files += 1
    for line, item in _located_examples(path):
        location = SourceLocation(str(path), line)
        record = RawRecord(location, _convert(item, kind, path.stem, location, stats))
        stats.records += 1
        yield record


# --- locating the items in the file text -------------------------------------------

_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _located_examples(path: Path) -> list[tuple[int, Any]]:
    """The items of the file's ``"example"`` array, each with its 1-based start line.

    The text passes :func:`~bank.formats.safe_json.check_json` (nesting, numbers,
    constants, NUL) before anything decodes it."""
    try:
        text = decode_utf8(path.read_bytes())
        check_json(text)
        document, offsets = _scan_document(text)
    except json.JSONDecodeError as exc:
        raise RecordError(
            SourceLocation(str(path), exc.lineno), "json", f"invalid JSON: {exc.msg}"
        ) from None
    except JsonProblem as refused:
        raise RecordError(
            SourceLocation(str(path), refused.line), "json", refused.describe()
        ) from None
    items = document.get("example")
    if not isinstance(items, list):
        problem = "missing" if items is None else "not a list"
        raise RecordError(
            SourceLocation(str(path), 1),
            "example",
            f'{problem}; expected a file like {{"keywords": ..., "example": [...]}}',
        )
    newlines = [match.start() for match in re.finditer("\n", text)]
    return [
        (bisect_right(newlines, offset) + 1, item)
        for offset, item in zip(offsets, items, strict=True)
    ]


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def _expect(text: str, pos: int, char: str) -> None:
    if not text.startswith(char, pos):
        raise json.JSONDecodeError(f"expected {char!r}", text, pos)


def _scan_document(text: str) -> tuple[dict[str, Any], list[int]]:
    """Decode the top-level object; also return the offsets of the "example" items."""
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        raise json.JSONDecodeError("expected a JSON object at the top level", text, pos)
    document: dict[str, Any] = {}
    offsets: list[int] = []
    pos = _skip(text, pos + 1)
    more = not text.startswith("}", pos)
    while more:
        key, pos = DECODER.raw_decode(text, pos)
        if not isinstance(key, str):
            raise json.JSONDecodeError("expected a property name", text, pos)
        pos = _skip(text, pos)
        _expect(text, pos, ":")
        pos = _skip(text, pos + 1)
        if key == "example" and text.startswith("[", pos):
            document[key], offsets, pos = _scan_array(text, pos)
        else:
            document[key], pos = DECODER.raw_decode(text, pos)
        pos, more = _separator(text, pos, "}")
    pos = _skip(text, pos + 1)
    if pos != len(text):
        raise json.JSONDecodeError("extra data after the top-level object", text, pos)
    return document, offsets


def _scan_array(text: str, pos: int) -> tuple[list[Any], list[int], int]:
    """Decode the array starting at ``pos`` (a ``[``): values, their offsets, end."""
    values: list[Any] = []
    offsets: list[int] = []
    pos = _skip(text, pos + 1)
    more = not text.startswith("]", pos)
    while more:
        offsets.append(pos)
        value, pos = DECODER.raw_decode(text, pos)
        values.append(value)
        pos, more = _separator(text, pos, "]")
    return values, offsets, pos + 1


def _separator(text: str, pos: int, closing: str) -> tuple[int, bool]:
    """After a member: skip a ``,`` (more follow) or stop at ``closing`` (its offset)."""
    pos = _skip(text, pos)
    if text.startswith(",", pos):
        return _skip(text, pos + 1), True
    _expect(text, pos, closing)
    return pos, False


# --- converting one item ------------------------------------------------------------


def _convert(
    item: Any, kind: FileKind, stem: str, location: SourceLocation, stats: GaokaoStats
) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise RecordError(location, "example", "each item must be a JSON object")
    question = _required_text(item, "question", location)
    answers = _answers(item, location)
    record: dict[str, Any] = {
        "id": str(uuid.uuid5(NAMESPACE, f"gaokao:{stem}:{_index(item, location)}")),
        "discipline": kind.discipline,
        "subdiscipline": kind.subdiscipline,
        "qtype": kind.qtype,
        "question": question,
        "answer": _answer_text(answers, kind),
        "source": _source(item),
        "language": kind.language,
    }
    if kind.mcq and len(answers) == 1:
        _apply_choices(record, answers[0], location, stats)
    explanation = _explanation(item, location)
    if explanation:
        record["explanation"] = explanation
    return record


def _required_text(item: dict[str, Any], name: str, location: SourceLocation) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value.strip():
        problem = "missing" if value is None else "empty or not a string"
        raise RecordError(location, name, f"{problem}; every item needs a non-empty {name}")
    return value.strip()


def _answers(item: dict[str, Any], location: SourceLocation) -> list[str]:
    """The answer as a list of non-empty strings (a plain string is a list of one)."""
    value = item.get("answer")
    values = [value] if isinstance(value, str) else value
    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(entry, str) and entry.strip() for entry in values)
    ):
        problem = "missing" if value is None else "empty or not a string / list of strings"
        raise RecordError(location, "answer", f"{problem}; every item needs an answer")
    return [entry.strip() for entry in values]


def _answer_text(answers: list[str], kind: FileKind) -> str:
    """One letter list entry as is; several numbered ``1. A; 2. C``; text by lines."""
    if not kind.objective:
        return "\n".join(answers)
    if len(answers) == 1:
        return answers[0]
    return "; ".join(f"{number}. {letter}" for number, letter in enumerate(answers, start=1))


def _source(item: dict[str, Any]) -> str:
    """``GAOKAO <year> <exam paper>``, at most ``SOURCE_MAX`` characters."""
    text = f"GAOKAO {item.get('year') or ''} {item.get('category') or ''}"
    return " ".join(text.split())[:SOURCE_MAX]


def _index(item: dict[str, Any], location: SourceLocation) -> str:
    value = item.get("index")
    if isinstance(value, bool) or not isinstance(value, int | str) or str(value) == "":
        raise RecordError(location, "index", "missing or not an integer; the stable id needs it")
    return str(value)


def _explanation(item: dict[str, Any], location: SourceLocation) -> str | None:
    value = item.get("analysis")
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(location, "analysis", "must be a string")
    return value.strip() or None


def _apply_choices(
    record: dict[str, Any], answer: str, location: SourceLocation, stats: GaokaoStats
) -> None:
    """Turn a single-answer item into ``multiple_choice`` if its options parse."""
    letter = answer.upper()
    if len(letter) != 1 or letter not in OPTION_LETTERS:
        stats.multi_select += 1
        return
    stats.single_answer_mcqs += 1
    split = split_options(record["question"])
    if split is None or OPTION_LETTERS.index(letter) >= len(split[1]):
        stats.unparsed.append(location)
        return
    stats.parsed_mcqs += 1
    record["qtype"] = "multiple_choice"
    record["question"], record["options"] = split
    record["answer"] = letter


# --- splitting options out of a question text ---------------------------------------

_MARKER = re.compile(
    # not glued to a preceding Latin letter or TeX (``DNA.``, ``$A$``, ``\\mathrm{A}``);
    # PDF extraction often glues a marker to the previous option (``增加C．``, ``4C．``)
    r"(?<![A-Za-z\\_^{$])"
    r"(?:[(（][ \t]*(?P<paren>[A-Z])[ \t]*[)）]|(?P<dot>[A-Z])[ \t]*[.．、])"
)
MIN_CHOICES = 2


@dataclass(frozen=True, slots=True)
class _Marker:
    letter: str
    start: int
    end: int


def split_options(question: str) -> tuple[str, list[str]] | None:
    """Split ``"stem A．x B．y ..."`` into the stem and the option texts, in order.

    Option markers are ``A.`` ``A．`` ``A、`` ``(A)`` ``（A）`` not glued to a preceding
    Latin letter or TeX, possibly several on one line. The markers
    must run ``A, B, C, ...`` without a gap; the longest such run wins (the later one
    on a tie, so an ``A、B`` in the stem does not start the options).

    Returns ``None`` rather than guessing when fewer than two options are found, when
    the stem or an option is empty, or when two options have the same text.
    """
    chain = _longest_chain([_marker(match) for match in _MARKER.finditer(question)])
    if len(chain) < MIN_CHOICES:
        return None
    stem = question[: chain[0].start].strip()
    ends = [marker.start for marker in chain[1:]] + [len(question)]
    options = [question[marker.end : end].strip() for marker, end in zip(chain, ends, strict=True)]
    if not stem or not all(options) or len(set(options)) != len(options):
        return None
    return stem, options


def _marker(match: re.Match[str]) -> _Marker:
    return _Marker(match.group("paren") or match.group("dot"), match.start(), match.end())


def _longest_chain(markers: list[_Marker]) -> list[_Marker]:
    best: list[_Marker] = []
    for first, marker in enumerate(markers):
        if marker.letter != "A":
            continue
        chain = [marker]
        for following in markers[first + 1 :]:
            if len(chain) < len(OPTION_LETTERS) and following.letter == OPTION_LETTERS[len(chain)]:
                chain.append(following)
        if len(chain) >= len(best):
            best = chain
    return best
