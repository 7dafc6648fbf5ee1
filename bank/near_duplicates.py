"""Near-duplicate detection across imports: MinHash LSH keys stored in ``item_lsh_keys``.

The pure detection lives in ``bank.dedupe``; this module stores every original item's
band keys and looks candidates up through the key index, so a new batch is compared
with the whole bank without reading the whole bank. Every candidate is verified with the
exact shingle Jaccard; only pairs at or above ``NEAR_DUPLICATE_JACCARD`` are reported.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.dedupe import (
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
LOOKUP_CHUNK = 10_000


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
    store their band keys. The new items must already be flushed."""
    if not ids:
        return []
    keys = LSH.keys_for(texts)
    findings: list[NearDuplicateFinding] = []
    cache: dict[int, set[int]] = {}

    def shingle_set(row: int) -> set[int]:
        if row not in cache:
            cache[row] = shingles(texts[row], LSH.shingle_size)
        return cache[row]

    for i, j in sorted(candidate_pairs_within(keys)):
        similarity = jaccard(shingle_set(i), shingle_set(j))
        if similarity >= NEAR_DUPLICATE_JACCARD:
            findings.append(
                NearDuplicateFinding(locations[i], ids[i], str(locations[j]), similarity)
            )
    findings += await _against_bank(session, keys, texts, ids, locations, shingle_set)
    await _store_keys(session, ids, keys.tolist())
    return findings


async def _against_bank(
    session: AsyncSession,
    keys: Any,
    texts: Sequence[str],
    ids: Sequence[uuid.UUID],
    locations: Sequence[SourceLocation],
    shingle_set: Any,
) -> list[NearDuplicateFinding]:
    rows_of_key: dict[int, list[int]] = defaultdict(list)
    for row, row_keys in enumerate(keys.tolist()):
        for key in row_keys:
            rows_of_key[key].append(row)
    pairs: set[tuple[int, uuid.UUID]] = set()
    distinct = list(rows_of_key)
    for start in range(0, len(distinct), LOOKUP_CHUNK):
        found = await session.execute(
            select(ItemLshKey.key, ItemLshKey.item_id).where(
                ItemLshKey.key.in_(distinct[start : start + LOOKUP_CHUNK])
            )
        )
        pairs.update((row, item_id) for key, item_id in found for row in rows_of_key[key])
    if not pairs:
        return []
    others = await _texts_of(session, sorted({item_id for _, item_id in pairs}))
    findings = []
    for row, item_id in sorted(pairs):
        similarity = jaccard(shingle_set(row), shingles(others[item_id], LSH.shingle_size))
        if similarity >= NEAR_DUPLICATE_JACCARD:
            findings.append(
                NearDuplicateFinding(locations[row], ids[row], f"bank item {item_id}", similarity)
            )
    return findings


async def _texts_of(session: AsyncSession, item_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    result = await session.execute(
        select(Item.id, Item.question, Item.options).where(Item.id.in_(item_ids))
    )
    return {item_id: comparable_text(q, o) for item_id, q, o in result}


def comparable_text(question: str, options: Sequence[str] | None) -> str:
    """The text compared for near duplicates: the question and its options."""
    return question if not options else question + "\n" + "\n".join(options)


async def _store_keys(
    session: AsyncSession, ids: Sequence[uuid.UUID], keys: list[list[int]]
) -> None:
    rows = [
        {"key": key, "item_id": item_id}
        for item_id, row_keys in zip(ids, keys, strict=True)
        for key in dict.fromkeys(row_keys)
    ]
    await bulk.insert_rows(session, ItemLshKey, rows)
