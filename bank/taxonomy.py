"""The bank's discipline taxonomy: canonical keys, display names, and source mappings.

Pure: no I/O. A discipline has one canonical *key* (:func:`canonical_key`: Unicode NFKC,
case-folded, surrounding space stripped, every run of spaces, ``_`` and ``-`` one ``-``),
so ``"Biology"``, ``" biology "`` and ``"BIOLOGY"`` are one discipline, and a *display
name* for people.

The default taxonomy is the 13 primary disciplines of the Chinese discipline
classification (China's Ministry of Education) that "LLMEval-Fair: A Large-Scale
Longitudinal Study on Robust and Fair Evaluation of Large Language Models" (Zhang, Shen,
Deng, Wang et al.) builds its bank on (appendix A.1.1). Ten are evaluated (§2.1 and its
footnote: Agronomy, Arts and Philosophy are left out for lack of questions); their keys
and display names are the column names of the paper's table 8 (the per-discipline
leaderboard). Other spellings the paper uses (appendix A.1.1, the abbreviations of
figure 1) and the Chinese names are aliases.

A :class:`DisciplineMap` maps a source's own category names (matched by canonical key) to
the bank's disciplines; each source format ships one (see :mod:`bank.formats`).
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from bank.records import RecordError, SourceLocation

MAX_KEY = 100
"""Length of the database columns that hold a discipline key."""
MAX_DISPLAY_NAME = 200

_SEPARATORS = re.compile(r"[\s_\-]+")


def canonical_key(name: str) -> str:
    """The canonical key of a discipline name: case-insensitive, whitespace-normalised.

    NFKC-normalised (full-width letters become ASCII), case-folded, stripped, and every
    run of whitespace, underscores and hyphens replaced by one ``-``.
    """
    folded = unicodedata.normalize("NFKC", name).casefold().strip()
    return _SEPARATORS.sub("-", folded).strip("-")


@dataclass(frozen=True, slots=True)
class Discipline:
    """A discipline of the taxonomy; ``key`` is canonical (see :func:`canonical_key`)."""

    key: str
    display_name: str
    evaluated: bool = False
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if canonical_key(self.key) != self.key or not self.key:
            raise ValueError(f"{self.key!r} is not a canonical discipline key")


def _paper(key: str, display: str, *aliases: str, evaluated: bool = True) -> Discipline:
    return Discipline(key, display, evaluated, aliases)


DEFAULT_TAXONOMY: tuple[Discipline, ...] = (
    _paper("engineering", "Engineering", "Eng.", "工学"),
    _paper("economics", "Economics", "Economic Sciences", "Econ.", "经济学"),
    _paper("education", "Education", "Edu.", "教育学"),
    _paper("law", "Law", "法学"),
    _paper("literature", "Literature", "Lit.", "文学"),
    _paper("management", "Management", "Management Sciences", "Mgmt.", "管理学"),
    _paper("science", "Science", "Sciences", "Sci.", "理学"),
    _paper("history", "History", "Hist.", "历史学"),
    _paper("medicine", "Medicine", "Med.", "医学"),
    _paper("military", "Military", "Military Science", "Mil.", "军事学"),
    _paper("philosophy", "Philosophy", "Philosophical Sciences", "哲学", evaluated=False),
    _paper("agronomy", "Agronomy", "农学", evaluated=False),
    _paper("arts", "Arts", "艺术学", evaluated=False),
)
"""The 13 primary disciplines, the ten evaluated ones in table 8's order first."""


class MapFileError(RecordError):
    """A bad line of a discipline map file; ``str()`` is ``file:line: field: what``."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """Where a source category goes: the discipline's name and whether it was renamed."""

    discipline: str
    renamed: bool


@dataclass(frozen=True, slots=True)
class DisciplineMap:
    """Source category (by canonical key) -> the bank discipline's name.

    Names not in the map go through unchanged; the importer canonicalises and checks them
    against the bank's taxonomy. ``merged`` lays another map over this one.
    """

    targets: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> DisciplineMap:
        return cls({canonical_key(source): target for source, target in pairs})

    @classmethod
    def aliases(cls, taxonomy: Iterable[Discipline] = DEFAULT_TAXONOMY) -> DisciplineMap:
        """Every display name and alias of ``taxonomy`` -> its discipline key."""
        return cls.of((name, d.key) for d in taxonomy for name in (d.display_name, *d.aliases))

    def merged(self, over: DisciplineMap) -> DisciplineMap:
        """This map with ``over`` 's entries added, replacing any for the same source."""
        return DisciplineMap({**self.targets, **over.targets})

    def apply(self, category: str) -> Mapped:
        """The discipline ``category`` goes to; ``renamed`` if it is another discipline."""
        target = self.targets.get(canonical_key(category))
        if target is None:
            return Mapped(category, renamed=False)
        return Mapped(target, renamed=canonical_key(target) != canonical_key(category))


MAP_HEADER = ("source", "discipline")


def parse_discipline_map(text: str, path: str) -> DisciplineMap:
    """Parse a discipline map: CSV with the header ``source,discipline``, one mapping per
    row (``#`` starts a comment line; blank lines are skipped).

    Raises
    ------
    MapFileError
        ``path:line: field: what`` for a missing header, a row without exactly two
        columns, an empty or over-long name, a source given twice.
    """
    rows = _rows(text, path)
    first = next(rows, None)
    if first is None or tuple(c.strip().lower() for c in first[1]) != MAP_HEADER:
        line = first[0] if first else 1
        raise MapFileError(SourceLocation(path, line), "header", f"expected {','.join(MAP_HEADER)}")
    seen: dict[str, int] = {}
    pairs: list[tuple[str, str]] = []
    for line, row in rows:
        if len(row) != len(MAP_HEADER):
            raise MapFileError(
                SourceLocation(path, line), "row", f"expected 2 columns, got {len(row)}"
            )
        source, target = (
            _name(path, line, name, value) for name, value in zip(MAP_HEADER, row, strict=True)
        )
        key = canonical_key(source)
        if key in seen:
            raise MapFileError(
                SourceLocation(path, line), "source", f"{source!r} is mapped on line {seen[key]}"
            )
        seen[key] = line
        pairs.append((source, target))
    return DisciplineMap.of(pairs)


def _rows(text: str, path: str) -> Iterator[tuple[int, list[str]]]:
    """CSV rows with their 1-based line numbers, without blank and comment lines."""
    reader = csv.reader(text.splitlines())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise MapFileError(SourceLocation(path, reader.line_num), "csv", str(error)) from None
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        yield reader.line_num, row


def _name(path: str, line: int, field_name: str, value: str) -> str:
    name = value.strip()
    if not name:
        raise MapFileError(SourceLocation(path, line), field_name, "empty")
    if len(name) > MAX_KEY or len(canonical_key(name)) > MAX_KEY:
        raise MapFileError(
            SourceLocation(path, line), field_name, f"longer than {MAX_KEY} characters"
        )
    if "\x00" in name or not canonical_key(name):
        raise MapFileError(
            SourceLocation(path, line), field_name, f"{name!r} is not a discipline name"
        )
    return name
