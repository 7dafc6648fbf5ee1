"""The discipline maps of the source formats: shipped ones and ``--discipline-map`` files.

A reader yields its source's own category names; :func:`map_disciplines` files them
under the bank's disciplines with the format's shipped map (``bank/data/disciplines/``)
and, over it, the operator's map. When a category goes to another discipline (MMLU-Pro
``biology`` to ``science``), the category stays at the head of the sub-discipline
(``biology / ori mmlu-high school biology``), so the finer subject is kept for stage 3 of
the sampling and for people.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

from bank.records import RawRecord, SourceLocation
from bank.taxonomy import DisciplineMap, MapFileError, parse_discipline_map

SHIPPED_MAPS: dict[str, str] = {"gaokao": "gaokao_bench.csv", "mmlu_pro": "mmlu_pro.csv"}
"""Format -> its map file in ``bank/data/disciplines/``; formats without one map nothing."""
MAX_MAP_BYTES = 1_000_000


def shipped_map(fmt: str) -> DisciplineMap:
    """The map shipped for format ``fmt`` (empty for the canonical ``jsonl``)."""
    name = SHIPPED_MAPS.get(fmt)
    if name is None:
        return DisciplineMap()
    resource = resources.files("bank").joinpath("data", "disciplines", name)
    return parse_discipline_map(
        resource.read_text(encoding="utf-8"), f"bank/data/disciplines/{name}"
    )


def load_discipline_map(path: Path) -> DisciplineMap:
    """Read an operator's map file (see :func:`bank.taxonomy.parse_discipline_map`).

    Raises
    ------
    MapFileError
        ``file:line: field: what`` for a file that is too big, not UTF-8, or malformed.
    OSError
        If the file cannot be read.
    """
    data = path.read_bytes()
    if len(data) > MAX_MAP_BYTES:
        raise MapFileError(
            SourceLocation(str(path), 1), "file", f"larger than {MAX_MAP_BYTES} bytes"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise MapFileError(SourceLocation(str(path), line), "file", "not valid UTF-8") from None
    return parse_discipline_map(text, str(path))


def map_disciplines(records: Iterable[RawRecord], mapping: DisciplineMap) -> Iterator[RawRecord]:
    """``records`` with their ``discipline`` mapped (see the module docstring)."""
    for raw in records:
        category = raw.data.get("discipline")
        if not isinstance(category, str):
            yield raw  # validation reports it
            continue
        mapped = mapping.apply(category)
        data = dict(raw.data, discipline=mapped.discipline)
        sub = raw.data.get("subdiscipline")
        if mapped.renamed and isinstance(sub, str) and sub.strip():
            data["subdiscipline"] = f"{category.strip()} / {sub.strip()}"
        yield RawRecord(raw.location, data)
