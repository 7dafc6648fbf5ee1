"""Exposure: families served to an organisation are never sampled for it again."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import column_in, in_chunks
from bank.models import Exposure, Item, OrgStratumExclusion
from bank.upsert import insert_ignore, insert_or_add


async def record_exposure(
    session: AsyncSession, *, org_id: uuid.UUID, item_ids: Sequence[uuid.UUID]
) -> int:
    """Mark the families of ``item_ids`` as served to ``org_id``; return how many were new.

    Keeps ``org_stratum_exclusions`` in step: every active item of a newly exposed family,
    in whatever stratum, stops being available to the organisation.
    """
    if not item_ids:
        return 0
    first_item: dict[uuid.UUID, uuid.UUID] = {}
    family_of = await _families_of(session, item_ids)
    for item_id in item_ids:
        if item_id in family_of:
            first_item.setdefault(family_of[item_id], item_id)
    # Only the families this statement really inserted count: a concurrent transaction
    # recording the same family cannot make the counters count it twice.
    new = await insert_ignore(
        session,
        Exposure,
        [{"org_id": org_id, "family_id": f, "item_id": i} for f, i in first_item.items()],
        returning="family_id",
    )
    if not new:
        return 0
    per_stratum: Counter[int] = Counter()
    for chunk in in_chunks(session, new):
        counts = await session.execute(
            select(Item.stratum_id, func.count())
            .where(column_in(session, Item.family_id, chunk), Item.status == "active")
            .group_by(Item.stratum_id)
        )
        per_stratum.update(dict(counts.tuples().all()))
    await insert_or_add(
        session,
        OrgStratumExclusion,
        [{"org_id": org_id, "stratum_id": s, "n_items": n} for s, n in per_stratum.items()],
        keys=["org_id", "stratum_id"],
        counter="n_items",
    )
    return len(new)


async def _families_of(
    session: AsyncSession, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, uuid.UUID]:
    family_of: dict[uuid.UUID, uuid.UUID] = {}
    for chunk in in_chunks(session, item_ids):
        rows = await session.execute(
            select(Item.id, Item.family_id).where(column_in(session, Item.id, chunk))
        )
        family_of.update(rows.tuples().all())
    return family_of
