"""Near duplicates at import: new items against each other and against the whole bank.

Shingles, signatures and band keys come from :mod:`bank.duplicates.minhash`; this module
stores every original item's band keys in ``item_lsh_keys`` and looks candidates up
through the key index, so a new batch is compared with the whole bank without reading the
whole bank. Every candidate is verified with the exact shingle Jaccard; only pairs at or
above ``NEAR_DUPLICATE_JACCARD`` are reported. Near duplicates are imported and reported,
not refused (exact duplicates are: :mod:`bank.duplicates.exact`).
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.duplicates.minhash import (
    NEAR_DUPLICATE_JACCARD,
    MinHashLSH,
    candidate_pairs_within,
    jaccard,
    shingles,
)
from bank.models import Item, ItemLshKey
from bank.records import SourceLocation

LSH = MinHashLSH(num_perm=32, bands=8)
"""32 permutations in 8 bands of 4: P(candidate) is 0.9998 at Jaccard 0.9, 0.40 at 0.5,
0.06 at 0.3. Eight stored keys per original keeps the key table small."""


@dataclass(frozen=True, slots=True)
class NearDuplicateFinding:
    """An imported record whose question is a near duplicate of another one."""

    location: SourceLocation
    item_id: uuid.UUID
    other: str
    """``file:line`` of another record of the batch, or ``bank item <uuid>``."""
    jaccard: float

    def describe(self) -> str:
        return (
            f"{self.location}: question: near duplicate of {self.other} "
            f"(Jaccard {self.jaccard:.2f}), imported"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": str(self.location),
            "item_id": str(self.item_id),
            "near_duplicate_of": self.other,
            "jaccard": round(self.jaccard, 4),
        }


async def find_and_index_near_duplicates(
    session: AsyncSession,
    *,
    ids: Sequence[uuid.UUID],
    texts: Sequence[str],
    locations: Sequence[SourceLocation],
) -> list[NearDuplicateFinding]:
    """Report near duplicates of the new items (within the batch and in the bank), then
    store their band keys. The new items must already be flushed.

    Work stays linear on templated banks: within the batch each item meets at most
    ``NEIGHBOURS`` earlier items per shared key, and against the bank at most
    ``MAX_BANK_CANDIDATES`` items (those sharing the most keys); a candidate is verified
    exactly only if its signature estimate of the Jaccard reaches ``ESTIMATE_FLOOR``.
    """
    if not ids:
        return []
    batch = BatchSketch.of(texts)
    findings = [
        NearDuplicateFinding(locations[i], ids[i], str(locations[j]), similarity)
        for i, j, similarity in pairs_within(batch)
    ]
    findings += await _against_bank(
        session, batch.keys, batch.signatures, ids, locations, batch.verify
    )
    await _store_keys(session, ids, batch.keys)
    return findings


NEIGHBOURS = 8
MAX_BANK_CANDIDATES = 16
ESTIMATE_FLOOR = 0.7
"""With 32 permutations the estimate's standard error at Jaccard 0.9 is 0.053, so a true
near duplicate falls below 0.7 with probability < 1e-4."""


class Verifier:
    """Exact shingle Jaccard, with each text's shingles computed once."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts
        self._cache: dict[int, set[int]] = {}

    def shingles_of(self, row: int) -> set[int]:
        if row not in self._cache:
            self._cache[row] = shingles(self._texts[row], LSH.shingle_size)
        return self._cache[row]

    def pair(self, i: int, j: int) -> float:
        return jaccard(self.shingles_of(i), self.shingles_of(j))

    def against(self, i: int, text: str) -> float:
        return jaccard(self.shingles_of(i), shingles(text, LSH.shingle_size))


@dataclass(frozen=True, slots=True)
class BatchSketch:
    """The MinHash signatures and band keys of a batch of texts, and their exact verifier."""

    signatures: Any
    keys: Any
    verify: Verifier

    @classmethod
    def of(cls, texts: Sequence[str]) -> BatchSketch:
        signatures = LSH.signatures(texts)
        return cls(signatures, LSH.band_keys(signatures), Verifier(texts))


def pairs_within(batch: BatchSketch) -> list[tuple[int, int, float]]:
    """Near-duplicate pairs inside a batch: ``(i, j, jaccard)`` with ``i > j``, sorted,
    each with an exact shingle Jaccard of at least ``NEAR_DUPLICATE_JACCARD``."""
    within = sorted(candidate_pairs_within(batch.keys, neighbours=NEIGHBOURS))
    return [
        (i, j, similarity)
        for i, j in _likely(batch.signatures, batch.signatures, within)
        if (similarity := batch.verify.pair(i, j)) >= NEAR_DUPLICATE_JACCARD
    ]


def _likely(left: Any, right: Any, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs whose MinHash estimate of the Jaccard reaches ``ESTIMATE_FLOOR``."""
    if not pairs:
        return []
    index = np.asarray(pairs, dtype=np.int64)
    estimate = (left[index[:, 0]] == right[index[:, 1]]).mean(axis=1)
    return [pairs[k] for k in np.flatnonzero(estimate >= ESTIMATE_FLOOR).tolist()]


async def _against_bank(
    session: AsyncSession,
    keys: Any,
    signatures: Any,
    ids: Sequence[uuid.UUID],
    locations: Sequence[SourceLocation],
    verify: Verifier,
    exclude: Collection[uuid.UUID] = (),
) -> list[NearDuplicateFinding]:
    """Near duplicates of the batch's rows among the bank items whose keys are stored,
    leaving out the items in ``exclude``."""
    found: list[tuple[int, uuid.UUID]] = []
    for chunk in bulk.in_chunks(session, np.unique(keys).tolist()):
        result = await session.execute(
            select(ItemLshKey.key, ItemLshKey.item_id).where(
                bulk.column_in(session, ItemLshKey.key, chunk)
            )
        )
        found.extend(row for row in result.tuples() if row[1] not in exclude)
    if not found:
        return []
    rows_of_key = _rows_of_keys(keys, {key for key, _ in found})
    shared: dict[int, Counter[uuid.UUID]] = defaultdict(Counter)
    for key, item_id in found:
        for row in rows_of_key[key]:
            shared[row][item_id] += 1
    pairs = [
        (row, item_id)
        for row in sorted(shared)
        for item_id, _ in shared[row].most_common(MAX_BANK_CANDIDATES)
    ]
    if not pairs:
        return []
    others = await _texts_of(session, sorted({item_id for _, item_id in pairs}))
    other_ids = list(others)
    other_signatures = LSH.signatures([others[i] for i in other_ids])
    position = {item_id: k for k, item_id in enumerate(other_ids)}
    likely = _likely(signatures, other_signatures, [(r, position[i]) for r, i in pairs])
    findings = []
    for row, k in likely:
        item_id = other_ids[k]
        similarity = verify.against(row, others[item_id])
        if similarity >= NEAR_DUPLICATE_JACCARD:
            findings.append(
                NearDuplicateFinding(locations[row], ids[row], f"bank item {item_id}", similarity)
            )
    return findings


def _rows_of_keys(keys: Any, wanted: set[int]) -> dict[int, list[int]]:
    """For each key in ``wanted``, the batch rows that carry it."""
    flat = keys.ravel()
    positions = np.flatnonzero(np.isin(flat, np.fromiter(wanted, dtype=np.int64)))
    rows: dict[int, list[int]] = defaultdict(list)
    for position in positions.tolist():
        rows[int(flat[position])].append(position // keys.shape[1])
    return rows


async def _texts_of(session: AsyncSession, item_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    texts: dict[uuid.UUID, str] = {}
    for chunk in bulk.in_chunks(session, item_ids):
        result = await session.execute(
            select(Item.id, Item.question, Item.options).where(
                bulk.column_in(session, Item.id, chunk)
            )
        )
        texts.update((item_id, comparable_text(q, o)) for item_id, q, o in result)
    return texts


def comparable_text(question: str, options: Sequence[str] | None) -> str:
    """The text compared for near duplicates: the question and its options."""
    return question if not options else question + "\n" + "\n".join(options)


async def against_bank(
    session: AsyncSession,
    batch: BatchSketch,
    ids: Sequence[uuid.UUID],
    locations: Sequence[SourceLocation],
    exclude: Collection[uuid.UUID],
) -> list[NearDuplicateFinding]:
    """Near duplicates of ``batch``'s rows among the bank items whose keys are stored,
    leaving out ``exclude`` (items of the same import, compared by :func:`pairs_within`)."""
    return await _against_bank(
        session, batch.keys, batch.signatures, ids, locations, batch.verify, exclude
    )


_KEY_ROW = np.dtype(
    [("fields", ">i2"), ("key_size", ">i4"), ("key", ">i8"), ("id_size", ">i4"), ("id", "V16")]
)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"


def key_rows_copy(ids: Sequence[uuid.UUID], keys: Any) -> bytes:
    """The ``item_lsh_keys`` rows of ``ids`` (row ``i`` has band keys ``keys[i]``) as one
    binary ``COPY`` payload, sorted by key, a key repeated for one item kept once (as
    :func:`_store_keys` writes them)."""
    flat = keys.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_keys = flat[order]
    rows = order // keys.shape[1]
    repeat = np.zeros(len(order), dtype=bool)
    repeat[1:] = (sorted_keys[1:] == sorted_keys[:-1]) & (rows[1:] == rows[:-1])
    keep = ~repeat
    id_bytes = np.frombuffer(b"".join(i.bytes for i in ids), dtype="V16")
    out = np.empty(int(keep.sum()), dtype=_KEY_ROW)
    out["fields"], out["key_size"], out["id_size"] = 2, 8, 16
    out["key"] = sorted_keys[keep]
    out["id"] = id_bytes[rows[keep]]
    return _COPY_HEADER + out.tobytes() + _COPY_TRAILER


async def store_keys_binary(session: AsyncSession, ids: Sequence[uuid.UUID], keys: Any) -> None:
    """Store the band keys of ``ids`` (PostgreSQL only): :func:`key_rows_copy` ``COPY``."""
    if len(ids):
        await bulk.copy_binary(session, ItemLshKey, ("key", "item_id"), key_rows_copy(ids, keys))


async def _store_keys(session: AsyncSession, ids: Sequence[uuid.UUID], keys: Any) -> None:
    """Insert one row per (band key, item), sorted by key so the index fills page by page."""
    flat = keys.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_keys = flat[order]
    rows = order // keys.shape[1]
    # the same key twice for one item (two bands colliding) would break the primary key
    repeat = np.zeros(len(order), dtype=bool)
    repeat[1:] = (sorted_keys[1:] == sorted_keys[:-1]) & (rows[1:] == rows[:-1])
    keep = ~repeat
    records = list(
        zip(sorted_keys[keep].tolist(), [ids[r] for r in rows[keep].tolist()], strict=True)
    )
    await bulk.insert_tuples(session, ItemLshKey, ("key", "item_id"), records)
