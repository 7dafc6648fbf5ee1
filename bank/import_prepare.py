"""The per-record work of an import, on plain data, so it can run in another process.

:func:`prepare_chunk` takes a chunk of ``RawRecord`` s and returns what the importer needs
to screen and write them: each valid record's id, content hash, canonical discipline and
``COPY`` row (answer and explanation already sealed), its augmented variants' rows, and the
MinHash signatures and band keys of the chunk; every invalid record as a ``RecordError``.
It touches no database, so :mod:`bank.importer` runs it in a worker process while it
streams the previous chunk into PostgreSQL. The worker is forked: it inherits the process's
keyring (:mod:`bank.sealing`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from bank.augment import augment as augment_record
from bank.duplicates.exact import content_hash
from bank.duplicates.near import LSH, comparable_text
from bank.models import Item
from bank.records import ItemRecord, RawRecord, RecordError, SourceLocation, validate_record
from bank.sealing import SealedText
from bank.taxonomy import MAX_KEY, DisciplineMap, canonical_key

ID_NAMESPACE = uuid.UUID("6f1c2a4e-8b7d-4f0a-9c3e-2d5b7a1e9f40")
"""Namespace of content-derived item ids (records that bring no id of their own)."""

ROW_COLUMNS: tuple[str, ...] = (
    "id",
    "family_id",
    "variant",
    "discipline",
    "subdiscipline",
    "qtype",
    "question",
    "options",
    "answer",
    "explanation",
    "source",
    "language",
    "status",
    "content_hash",
)
"""The columns of :attr:`Prepared.row`, in order; the importer appends the stratum, the slot
and the creation time."""


@dataclass(slots=True)
class Disciplines:
    """The bank's taxonomy while a batch is checked, and what the batch would add."""

    known: dict[str, str]
    add: bool
    added: dict[str, str] = field(default_factory=dict)
    aliases: DisciplineMap = field(default_factory=DisciplineMap.aliases)
    _memo: dict[str, tuple[str, str] | str] = field(default_factory=dict)

    def canonical(self, record: ItemRecord) -> ItemRecord:
        """``record`` with its discipline's key.

        Raises
        ------
        RecordError
            For a discipline that is not in the taxonomy (and is not to be added).
        """
        key, name = self.key_of(record)
        if key not in self.known and key not in self.added:
            self.added[key] = name
        return dataclasses.replace(record, discipline=key)

    def key_of(self, record: ItemRecord) -> tuple[str, str]:
        """``(key, display name)`` of ``record``'s discipline, without recording it as
        added; ``RecordError`` as :meth:`canonical`."""
        found = self._memo.get(record.discipline)
        if found is None:
            found = self._memo[record.discipline] = self._look_up(record.discipline)
        if isinstance(found, str):
            raise RecordError(record.location, "discipline", found)
        return found

    def _look_up(self, discipline: str) -> tuple[str, str] | str:
        """The key and name of ``discipline``, or the message that refuses it."""
        name = self.aliases.apply(discipline).discipline.strip()
        key = canonical_key(name)
        if not key or len(key) > MAX_KEY:
            return f"{name!r} is not a discipline name"
        if key not in self.known and not self.add:
            return (
                f"unknown discipline {discipline!r} (known: "
                f"{', '.join(sorted(self.known))}); map it with --discipline-map or "
                "add it with --add-disciplines"
            )
        return key, name


class Prepared(NamedTuple):
    """One valid record, ready to be screened and written."""

    path: str
    line: int
    id: str
    explicit_id: bool
    content_hash: str
    discipline_name: str
    """The display name, used if the discipline is to be added."""
    row: tuple[Any, ...]
    """Values of :data:`ROW_COLUMNS`."""
    text: str
    """What near duplicates are compared on (:func:`bank.duplicates.near.comparable_text`)."""
    variants: tuple[tuple[Any, ...], ...]
    """Rows (as ``row``) of the augmented variants; empty without augmentation."""


class PreparedChunk(NamedTuple):
    """A chunk's valid records, its invalid ones, and the valid ones' MinHash sketches."""

    records: list[tuple[Any, ...]]
    """The fields of :class:`Prepared` as plain tuples, which pickle several times faster."""
    errors: list[RecordError]
    signatures: npt.NDArray[np.uint32]
    keys: npt.NDArray[np.int64]


_NAMESPACE_BYTES = ID_NAMESPACE.bytes


def content_id(digest: str) -> str:
    """``str(uuid.uuid5(ID_NAMESPACE, digest))``, computed on the hex digest directly (four
    times faster; the id of every record that brings none)."""
    h = hashlib.sha1(_NAMESPACE_BYTES + digest.encode()).hexdigest()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def _sealer(column: str) -> SealedText:
    kind = Item.__table__.c[column].type
    assert isinstance(kind, SealedText)
    return kind


def prepare_chunk(
    raws: Sequence[tuple[str, int, dict[str, Any]]],
    known: dict[str, str],
    add: bool,
    augment: bool,
) -> PreparedChunk:
    """Validate, canonicalise, hash, seal and sketch ``raws``, each ``(path, line, data)``
    of a ``RawRecord`` (plain tuples cross processes several times faster).

    ``known`` is the taxonomy (key -> name) and ``add`` whether unknown disciplines are to
    be added: as for :class:`Disciplines`."""
    disciplines = Disciplines(known, add)
    answer, explanation = _sealer("answer"), _sealer("explanation")
    records: list[tuple[Any, ...]] = []
    errors: list[RecordError] = []
    for path, line, data in raws:
        try:
            record = validate_record(RawRecord(SourceLocation(path, line), data))
            key, name = disciplines.key_of(record)
        except RecordError as error:
            errors.append(error)
            continue
        digest = content_hash(record.qtype, record.question, record.options)
        id_text = str(record.id) if record.id else content_id(digest)
        sealed_explanation = explanation.seal(record.explanation)
        row = (
            id_text, id_text, "original", key, record.subdiscipline, record.qtype,
            record.question, json.dumps(list(record.options)) if record.options else None,
            answer.seal(record.answer), sealed_explanation, record.source, record.language,
            "active", digest,
        )  # fmt: skip
        variants = (
            _variant_rows(record, uuid.UUID(id_text), row, answer)
            if augment and record.qtype == "multiple_choice"
            else ()
        )
        records.append(
            (
                record.location.path,
                record.location.line,
                id_text,
                record.id is not None,
                digest,
                name,
                row,
                comparable_text(record.question, record.options),
                variants,
            )
        )
    signatures = LSH.signatures([r[7] for r in records])  # Prepared.text
    return PreparedChunk(records, errors, signatures, LSH.band_keys(signatures))


def _variant_rows(
    record: ItemRecord, parent: uuid.UUID, row: tuple[Any, ...], answer: SealedText
) -> tuple[tuple[Any, ...], ...]:
    rows = []
    for variant in augment_record(record, parent):
        digest = content_hash(variant.qtype, variant.question, None)
        values = list(row)
        values[0] = str(variant.id)
        values[2] = variant.variant
        values[5] = variant.qtype
        values[6] = variant.question
        values[7] = None
        values[8] = answer.seal(variant.answer)
        values[13] = digest
        rows.append(tuple(values))
    return tuple(rows)
