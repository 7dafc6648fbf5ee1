"""Importing records into the bank: all-or-nothing, idempotent, with a report.

``import_records`` validates every record first and refuses the whole batch if any record
is bad (``ImportRefused`` carries every error, each ``file:line: field: what``). Then it
writes originals and their augmented variants in the caller's transaction: the caller
commits (or rolls back on any exception), this module only flushes.

Re-importing is a no-op: an id is the record's own or ``uuid5(content hash)``, variants have
``uuid5(parent, variant)``, and an item already in the bank with the same id and content
is left alone. Every added item starts a new family or joins a new one, so no
organisation's exposure counters change. Exact duplicates (same normalised content) are
skipped and reported; near duplicates (shingle Jaccard >= 0.9) are imported and reported,
never dropped silently.

Every record's discipline is stored as the canonical key of a discipline of the bank's
taxonomy (:mod:`bank.taxonomy`, :mod:`bank.disciplines`); the paper's other names for a
discipline are accepted. A discipline the taxonomy does not know refuses the batch
(``file:line: discipline: unknown discipline 'X' (known: ...)``) unless
``add_disciplines`` is set, which adds it (evaluated) with the record's spelling as its
display name.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.augment import augment as augment_record
from bank.disciplines import add_disciplines as add_to_taxonomy
from bank.disciplines import known_disciplines
from bank.duplicates.exact import content_hash
from bank.duplicates.near import (
    NearDuplicateFinding,
    comparable_text,
    find_and_index_near_duplicates,
)
from bank.formats.input_problems import problem_lines
from bank.locks import lock
from bank.models import Item, make_slot
from bank.records import ItemRecord, RawRecord, RecordError, SourceLocation, validate_record
from bank.strata import StratumKey, reserve_slots
from bank.taxonomy import MAX_KEY, DisciplineMap, canonical_key

ID_NAMESPACE = uuid.UUID("6f1c2a4e-8b7d-4f0a-9c3e-2d5b7a1e9f40")
"""Namespace of content-derived item ids (records that bring no id of their own)."""
IMPORT_LOCK = "bank:import"


class ImportRefused(Exception):
    """The batch was refused; nothing was written. ``errors`` lists every bad record."""

    def __init__(self, errors: Sequence[RecordError]) -> None:
        self.errors = list(errors)
        super().__init__(problem_lines(self.errors))


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A record skipped because the bank or the batch already holds its content."""

    location: SourceLocation
    duplicate_of: str
    """``file:line`` of the earlier record, or ``bank item <uuid>``."""


@dataclass(slots=True)
class ImportReport:
    """What an import did. Counts are items (rows), not records."""

    records: int = 0
    originals_added: int = 0
    variants_added: int = 0
    unchanged: int = 0
    variants_skipped: int = 0
    duplicates: list[Duplicate] = field(default_factory=list)
    near_duplicates: list[NearDuplicateFinding] = field(default_factory=list)
    disciplines_added: list[str] = field(default_factory=list)

    @property
    def items_added(self) -> int:
        return self.originals_added + self.variants_added

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "items_added": self.items_added,
            "originals_added": self.originals_added,
            "variants_added": self.variants_added,
            "unchanged": self.unchanged,
            "variants_skipped": self.variants_skipped,
            "duplicates": [
                {"at": str(d.location), "duplicate_of": d.duplicate_of} for d in self.duplicates
            ],
            "near_duplicates": [n.as_dict() for n in self.near_duplicates],
            "disciplines_added": self.disciplines_added,
        }


@dataclass(slots=True)
class _Candidate:
    record: ItemRecord
    id: uuid.UUID
    content_hash: str


def validate_all(raws: Iterable[RawRecord]) -> tuple[list[ItemRecord], list[RecordError]]:
    """Validate every record; collect errors instead of stopping at the first."""
    records: list[ItemRecord] = []
    errors: list[RecordError] = []
    iterator = iter(raws)
    while True:
        try:
            raw = next(iterator)
        except StopIteration:
            break
        except RecordError as error:  # the reader cannot go past a malformed file
            errors.append(error)
            break
        try:
            records.append(validate_record(raw))
        except RecordError as error:
            errors.append(error)
    return records, errors


@dataclass(slots=True)
class _Disciplines:
    """The bank's taxonomy while a batch is checked, and what the batch would add."""

    known: dict[str, str]
    add: bool
    added: dict[str, str] = field(default_factory=dict)
    aliases: DisciplineMap = field(default_factory=DisciplineMap.aliases)

    def canonical(self, record: ItemRecord) -> ItemRecord:
        """``record`` with its discipline's key.

        Raises
        ------
        RecordError
            For a discipline that is not in the taxonomy (and is not to be added).
        """
        name = self.aliases.apply(record.discipline).discipline.strip()
        key = canonical_key(name)
        if not key or len(key) > MAX_KEY:
            raise RecordError(record.location, "discipline", f"{name!r} is not a discipline name")
        if key not in self.known and key not in self.added:
            if not self.add:
                raise RecordError(
                    record.location,
                    "discipline",
                    f"unknown discipline {record.discipline!r} (known: "
                    f"{', '.join(sorted(self.known))}); map it with --discipline-map or "
                    "add it with --add-disciplines",
                )
            self.added[key] = name
        return dataclasses.replace(record, discipline=key)


def _canonicalise(
    records: Sequence[ItemRecord], disciplines: _Disciplines
) -> tuple[list[ItemRecord], list[RecordError]]:
    canonical: list[ItemRecord] = []
    errors: list[RecordError] = []
    for record in records:
        try:
            canonical.append(disciplines.canonical(record))
        except RecordError as error:
            errors.append(error)
    return canonical, errors


def _identify(records: Sequence[ItemRecord]) -> tuple[list[_Candidate], list[RecordError]]:
    """Give each record its id and hash; refuse an id used twice in the batch for
    different content (the same content twice is an exact duplicate, handled later)."""
    candidates: list[_Candidate] = []
    errors: list[RecordError] = []
    first_of_id: dict[uuid.UUID, tuple[SourceLocation, str]] = {}
    for record in records:
        digest = content_hash(record.qtype, record.question, record.options)
        item_id = record.id or uuid.uuid5(ID_NAMESPACE, digest)
        if item_id in first_of_id:
            where, first_digest = first_of_id[item_id]
            if record.id is not None or first_digest != digest:
                errors.append(
                    RecordError(
                        record.location, "id", f"duplicate id {item_id}, first used at {where}"
                    )
                )
                continue
        else:
            first_of_id[item_id] = (record.location, digest)
        candidates.append(_Candidate(record, item_id, digest))
    return candidates, errors


async def _existing(
    session: AsyncSession, column: Any, values: Sequence[Any]
) -> dict[Any, tuple[uuid.UUID, str]]:
    """Map ``column`` value -> (id, content_hash) for the bank items having those values."""
    found: dict[Any, tuple[uuid.UUID, str]] = {}
    for chunk in bulk.in_chunks(session, values):
        rows = await session.execute(
            select(column, Item.id, Item.content_hash).where(bulk.column_in(session, column, chunk))
        )
        for value, item_id, digest in rows:
            found[value] = (item_id, digest)
    return found


async def _screen(
    session: AsyncSession, candidates: list[_Candidate], report: ImportReport
) -> tuple[list[_Candidate], list[RecordError]]:
    """Drop what the bank or the batch already has; refuse ids reused for other content."""
    by_id = await _existing(session, Item.id, [c.id for c in candidates])
    by_hash = await _existing(session, Item.content_hash, [c.content_hash for c in candidates])
    fresh: list[_Candidate] = []
    errors: list[RecordError] = []
    first_of_hash: dict[str, SourceLocation] = {}
    for cand in candidates:
        known = by_id.get(cand.id)
        if known is not None:
            if known[1] == cand.content_hash:
                report.unchanged += 1
            else:
                errors.append(
                    RecordError(
                        cand.record.location,
                        "id",
                        f"{cand.id} is already in the bank with different content",
                    )
                )
            continue
        if cand.content_hash in by_hash:
            other = by_hash[cand.content_hash][0]
            report.duplicates.append(Duplicate(cand.record.location, f"bank item {other}"))
            continue
        if cand.content_hash in first_of_hash:
            earlier = first_of_hash[cand.content_hash]
            report.duplicates.append(Duplicate(cand.record.location, str(earlier)))
            continue
        first_of_hash[cand.content_hash] = cand.record.location
        fresh.append(cand)
    return fresh, errors


def _item_row(cand: _Candidate) -> dict[str, Any]:
    record = cand.record
    return {
        "id": cand.id,
        "family_id": cand.id,
        "variant": "original",
        "discipline": record.discipline,
        "subdiscipline": record.subdiscipline,
        "qtype": record.qtype,
        "question": record.question,
        "options": list(record.options) if record.options else None,
        "answer": record.answer,
        "explanation": record.explanation,
        "source": record.source,
        "language": record.language,
        "status": "active",
        "content_hash": cand.content_hash,
    }


async def _variant_rows(
    session: AsyncSession,
    originals: Sequence[_Candidate],
    taken_hashes: set[str],
    report: ImportReport,
) -> list[dict[str, Any]]:
    """Rows of the augmented variants; variants whose content already exists are skipped."""
    rows: list[dict[str, Any]] = []
    for cand in originals:
        for variant in augment_record(cand.record, cand.id):
            digest = content_hash(variant.qtype, variant.question, None)
            if digest in taken_hashes:
                report.variants_skipped += 1
                continue
            taken_hashes.add(digest)
            row = _item_row(cand)
            row.update(
                id=variant.id,
                variant=variant.variant,
                qtype=variant.qtype,
                question=variant.question,
                options=None,
                answer=variant.answer,
                content_hash=digest,
            )
            rows.append(row)
    in_bank = await _existing(session, Item.content_hash, [r["content_hash"] for r in rows])
    kept = [r for r in rows if r["content_hash"] not in in_bank]
    report.variants_skipped += len(rows) - len(kept)
    return kept


async def _place(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Assign every row its stratum and a dense slot in it."""
    keys = [StratumKey(r["discipline"], r["qtype"], r["subdiscipline"]) for r in rows]
    firsts = await reserve_slots(session, keys)
    next_rank = dict(firsts)
    for row, key in zip(rows, keys, strict=True):
        stratum_id, rank = next_rank[key]
        next_rank[key] = (stratum_id, rank + 1)
        row["stratum_id"] = stratum_id
        row["slot"] = make_slot(stratum_id, rank)


async def import_records(
    session: AsyncSession,
    raws: Iterable[RawRecord],
    *,
    augment: bool = True,
    add_disciplines: bool = False,
) -> ImportReport:
    """Validate and write ``raws`` in ``session``'s transaction; flush, never commit.

    ``add_disciplines`` adds disciplines the taxonomy does not know instead of refusing
    their records.

    Raises
    ------
    ImportRefused
        If any record is invalid, reuses an id or names an unknown discipline (without
        ``add_disciplines``); nothing has been written then.
    """
    records, errors = validate_all(raws)
    report = ImportReport(records=len(records) + len(errors))
    await lock(session, IMPORT_LOCK)  # imports serialise: each sees the other's items
    disciplines = _Disciplines(await known_disciplines(session), add_disciplines)
    records, discipline_errors = _canonicalise(records, disciplines)
    errors.extend(discipline_errors)
    candidates, id_errors = _identify(records)
    errors.extend(id_errors)
    fresh, bank_errors = await _screen(session, candidates, report)
    errors.extend(bank_errors)
    if errors:
        errors.sort(key=lambda e: (e.location.path, e.location.line))
        raise ImportRefused(errors)
    if disciplines.added:
        await add_to_taxonomy(session, disciplines.added)
    report.disciplines_added = sorted(disciplines.added)
    rows = [_item_row(c) for c in fresh]
    taken = {r["content_hash"] for r in rows}
    variant_rows = await _variant_rows(session, fresh, taken, report) if augment else []
    all_rows = rows + variant_rows
    await _place(session, all_rows)
    await bulk.insert_rows(session, Item, all_rows)
    report.originals_added = len(rows)
    report.variants_added = len(variant_rows)
    report.near_duplicates = await find_and_index_near_duplicates(
        session,
        ids=[c.id for c in fresh],
        texts=[comparable_text(c.record.question, c.record.options) for c in fresh],
        locations=[c.record.location for c in fresh],
    )
    return report
