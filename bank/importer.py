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

import asyncio
import gc
import multiprocessing
import os
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk, sealing
from bank.augment import augment as augment_record
from bank.database import utcnow
from bank.disciplines import add_disciplines as add_to_taxonomy
from bank.disciplines import known_disciplines
from bank.duplicates.exact import content_hash
from bank.duplicates.near import (
    BatchSketch,
    NearDuplicateFinding,
    Verifier,
    against_bank,
    comparable_text,
    find_and_index_near_duplicates,
    pairs_within,
    store_keys_binary,
)
from bank.formats.input_problems import problem_lines
from bank.import_prepare import ID_NAMESPACE, ROW_COLUMNS, Prepared, PreparedChunk, prepare_chunk
from bank.import_prepare import Disciplines as _Disciplines
from bank.locks import lock
from bank.models import Item, make_slot
from bank.records import ItemRecord, RawRecord, RecordError, SourceLocation, validate_record
from bank.strata import reserve_slots
from bank.stratum_key import StratumKey

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


async def _import_in_process(
    session: AsyncSession, raws: Iterable[RawRecord], augment: bool, add_disciplines: bool
) -> ImportReport:
    """:func:`import_records` in this process: validate everything, then write."""
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


PIPELINE_CHUNK = 20_000
"""Records a worker prepares at a time in a pipelined import."""
PIPELINE_DEPTH = 2
"""Chunks handed to the workers ahead of the one being written."""


def default_workers() -> int:
    """Worker processes of a pipelined import: one per core but this process's."""
    return max(1, (os.cpu_count() or 2) - 1)


async def import_records(
    session: AsyncSession,
    raws: Iterable[RawRecord],
    *,
    augment: bool = True,
    add_disciplines: bool = False,
    workers: int | None = None,
    chunk_size: int = PIPELINE_CHUNK,
) -> ImportReport:
    """Validate and write ``raws`` in ``session``'s transaction; flush, never commit.

    ``add_disciplines`` adds disciplines the taxonomy does not know instead of refusing
    their records.

    On PostgreSQL a batch of more than ``chunk_size`` records is pipelined: ``workers``
    processes (default :func:`default_workers`) validate, hash, seal and sketch chunk after
    chunk (:func:`bank.import_prepare.prepare_chunk`) while this process screens and
    ``COPY`` s the chunk before, inside a savepoint that is rolled back if any record turns
    out bad. ``workers=0``, a smaller batch or another database: everything in this
    process, every record checked before anything is written. The report, the refusal and
    the rows are the same either way (only the strata's internal ids may be numbered in
    another order).

    Raises
    ------
    ImportRefused
        If any record is invalid, reuses an id or names an unknown discipline (without
        ``add_disciplines``); nothing has been written then.
    """
    iterator = iter(raws)
    first, reader_error = _take(iterator, chunk_size)
    in_process = (
        workers == 0
        or reader_error is not None
        or len(first) < chunk_size
        or session.get_bind().dialect.name != "postgresql"
    )
    if in_process:
        replay = _replay(first, reader_error, iterator)
        return await _import_in_process(session, replay, augment, add_disciplines)
    pipeline = _Pipeline(session, augment)
    await lock(session, IMPORT_LOCK)
    pipeline.disciplines = _Disciplines(await known_disciplines(session), add_disciplines)
    sealing.current()  # load the keyring before the workers fork: they inherit it
    savepoint = await session.begin_nested()
    collecting = gc.isenabled()
    gc.disable()  # the batch's millions of live objects would make every collection long
    try:
        await pipeline.run(_chunks(first, iterator, chunk_size, pipeline), workers)
        if not pipeline.errors:
            await pipeline.finish()
    except BaseException:
        await savepoint.rollback()
        raise
    finally:
        if collecting:
            gc.enable()
    if pipeline.errors:
        await savepoint.rollback()
        raise ImportRefused(
            sorted(pipeline.errors, key=lambda e: (e.location.path, e.location.line))
        )
    await savepoint.commit()
    return pipeline.report


def _take(iterator: Iterator[RawRecord], size: int) -> tuple[list[RawRecord], RecordError | None]:
    """Up to ``size`` records, and the reader's error if it stopped on a malformed file."""
    chunk: list[RawRecord] = []
    try:
        for raw in iterator:
            chunk.append(raw)
            if len(chunk) == size:
                break
    except RecordError as error:
        return chunk, error
    return chunk, None


def _replay(
    first: list[RawRecord], error: RecordError | None, rest: Iterator[RawRecord]
) -> Iterator[RawRecord]:
    yield from first
    if error is not None:
        raise error
    yield from rest


def _chunks(
    first: list[RawRecord], iterator: Iterator[RawRecord], size: int, pipeline: _Pipeline
) -> Iterator[list[RawRecord]]:
    """``first``, then chunks of ``size`` read on demand; a reader's error goes to
    ``pipeline`` and ends the reading, as :func:`validate_all` does."""
    yield first
    while True:
        chunk, error = _take(iterator, size)
        if chunk:
            yield chunk
        if error is not None:
            pipeline.report.records += 1
            pipeline.errors.append(error)
        if error is not None or len(chunk) < size:
            return


ITEM_COLUMNS = (*ROW_COLUMNS, "stratum_id", "slot", "created_at")


class _Pipeline:
    """The state of a pipelined import: what the batch has seen, written and found."""

    def __init__(self, session: AsyncSession, augment: bool) -> None:
        self.session = session
        self.augment = augment
        self.disciplines = _Disciplines({}, False)
        self.report = ImportReport()
        self.errors: list[RecordError] = []
        self.first_of_id: dict[str, tuple[str, int, str]] = {}
        self.first_of_hash: dict[str, tuple[str, int]] = {}
        self.written: set[uuid.UUID] = set()
        self.ids: list[uuid.UUID] = []
        self.texts: list[str] = []
        self.places: list[tuple[str, int]] = []
        self.signatures: list[Any] = []
        self.keys: list[Any] = []
        self.variants: list[tuple[Any, ...]] = []
        self.bank_findings: list[NearDuplicateFinding] = []

    async def run(self, chunks: Iterator[list[RawRecord]], workers: int | None) -> None:
        """Prepare ``chunks`` in worker processes and write each as it comes back, in order."""
        loop = asyncio.get_running_loop()
        context = multiprocessing.get_context("fork")
        known, add = self.disciplines.known, self.disciplines.add
        with ProcessPoolExecutor(
            workers or default_workers(), mp_context=context, initializer=gc.disable
        ) as pool:
            pending: deque[asyncio.Future[PreparedChunk]] = deque()
            for chunk in chunks:
                plain = [(r.location.path, r.location.line, r.data) for r in chunk]
                pending.append(
                    loop.run_in_executor(pool, prepare_chunk, plain, known, add, self.augment)
                )
                if len(pending) > PIPELINE_DEPTH:
                    await self.write(await pending.popleft())
            while pending:
                await self.write(await pending.popleft())

    async def write(self, chunk: PreparedChunk) -> None:
        """Screen one prepared chunk and, while the batch has no error, write its fresh
        items and their band keys."""
        records = [Prepared._make(r) for r in chunk.records]
        self.report.records += len(records) + len(chunk.errors)
        self.errors.extend(chunk.errors)
        new_disciplines = self._new_disciplines(records)
        candidates = self._identify(records)
        fresh = await self._screen(candidates)
        if self.errors:
            return
        if new_disciplines:
            await add_to_taxonomy(self.session, new_disciplines)
        await self._copy([records[k].row for k in fresh])
        self.report.originals_added += len(fresh)
        await self._sketch(records, chunk, fresh)

    def _new_disciplines(self, records: Sequence[Prepared]) -> dict[str, str]:
        added = self.disciplines.added
        new: dict[str, str] = {}
        for record in records:
            key = record.row[3]
            if key not in self.disciplines.known and key not in added:
                added[key] = new[key] = record.discipline_name
        return new

    def _identify(self, records: Sequence[Prepared]) -> list[int]:
        """As :func:`_identify`: the positions of the records whose id is not taken."""
        kept: list[int] = []
        for k, record in enumerate(records):
            first = self.first_of_id.get(record.id)
            if first is None:
                self.first_of_id[record.id] = (record.path, record.line, record.content_hash)
            elif record.explicit_id or first[2] != record.content_hash:
                self.errors.append(
                    RecordError(
                        SourceLocation(record.path, record.line),
                        "id",
                        f"duplicate id {record.id}, first used at {first[0]}:{first[1]}",
                    )
                )
                continue
            kept.append(k)
        self._records = records
        return kept

    async def _screen(self, positions: list[int]) -> list[int]:
        """As :func:`_screen`; the bank is the bank before this import (what it wrote is
        the batch's)."""
        records = self._records
        session = self.session
        ids = [uuid.UUID(records[k].id) for k in positions]
        by_id = {
            str(key): found
            for key, found in (await _existing(session, Item.id, ids)).items()
            if key not in self.written
        }
        hashes = [records[k].content_hash for k in positions]
        by_hash = await _existing(session, Item.content_hash, hashes)
        fresh: list[int] = []
        for k in positions:
            record = records[k]
            known = by_id.get(record.id)
            if known is not None:
                if known[1] == record.content_hash:
                    self.report.unchanged += 1
                else:
                    self.errors.append(
                        RecordError(
                            SourceLocation(record.path, record.line),
                            "id",
                            f"{record.id} is already in the bank with different content",
                        )
                    )
                continue
            earlier = self.first_of_hash.get(record.content_hash)
            other = by_hash.get(record.content_hash)
            if earlier is None and other is None:
                self.first_of_hash[record.content_hash] = (record.path, record.line)
                fresh.append(k)
                continue
            where = f"{earlier[0]}:{earlier[1]}" if earlier else f"bank item {other[0]}"  # type: ignore[index]
            self.report.duplicates.append(
                Duplicate(SourceLocation(record.path, record.line), where)
            )
        return fresh

    async def _copy(self, rows: list[tuple[Any, ...]]) -> None:
        """``COPY`` prepared rows, each placed in its stratum (as :func:`_place`)."""
        if not rows:
            return
        keys = [StratumKey(r[3], r[5], r[4]) for r in rows]
        next_rank = dict(await reserve_slots(self.session, keys))
        now = utcnow()
        placed = []
        for row, key in zip(rows, keys, strict=True):
            stratum_id, rank = next_rank[key]
            next_rank[key] = (stratum_id, rank + 1)
            placed.append((*row, stratum_id, make_slot(stratum_id, rank), now))
        await bulk.insert_tuples(self.session, Item, ITEM_COLUMNS, placed, presealed=True)

    async def _sketch(
        self, records: Sequence[Prepared], chunk: PreparedChunk, fresh: list[int]
    ) -> None:
        """Look the fresh items' band keys up in the bank; :meth:`finish` stores them."""
        ids = [uuid.UUID(records[k].id) for k in fresh]
        texts = [records[k].text for k in fresh]
        places = [(records[k].path, records[k].line) for k in fresh]
        signatures, keys = chunk.signatures[fresh], chunk.keys[fresh]
        if ids:
            sketch = BatchSketch(signatures, keys, Verifier(texts))
            locations = [SourceLocation(*p) for p in places]
            self.bank_findings += await against_bank(self.session, sketch, ids, locations, ())
        self.written.update(ids)
        self.ids += ids
        self.texts += texts
        self.places += places
        self.signatures.append(signatures)
        self.keys.append(keys)
        if self.augment:
            self.variants.extend(v for k in fresh for v in records[k].variants)

    async def finish(self) -> None:
        """Write the variants (after every original, as :func:`_variant_rows`) and the
        band keys, then find the near duplicates within the batch."""
        taken = set(self.first_of_hash)
        rows: list[tuple[Any, ...]] = []
        for row in self.variants:
            if row[13] in taken:
                self.report.variants_skipped += 1
                continue
            taken.add(row[13])
            rows.append(row)
        in_bank = await _existing(self.session, Item.content_hash, [r[13] for r in rows])
        kept = [r for r in rows if r[13] not in in_bank]
        self.report.variants_skipped += len(rows) - len(kept)
        await self._copy(kept)
        self.report.variants_added = len(kept)
        self.report.disciplines_added = sorted(self.disciplines.added)
        if not self.ids:
            return
        keys = np.concatenate(self.keys)
        # all at once, sorted: the key index fills page after page instead of at random
        await store_keys_binary(self.session, self.ids, keys)
        sketch = BatchSketch(np.concatenate(self.signatures), keys, Verifier(self.texts))
        self.report.near_duplicates = [
            NearDuplicateFinding(
                SourceLocation(*self.places[i]), self.ids[i], "{}:{}".format(*self.places[j]), s
            )
            for i, j, s in pairs_within(sketch)
        ] + self.bank_findings
