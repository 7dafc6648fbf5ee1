"""Exposure: families served to an organisation are never sampled for it again."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Exposure, Item, OrgStratumExclusion
from bank.upsert import insert_ignore, insert_or_add


async def record_exposure(
    session: AsyncSession, *, org_id: uuid.UUID, item_ids: Sequence[uuid.UUID]
) -> int:
    """Mark the families of ``item_ids`` as served to ``org_id``; return how many were new.

    Keeps ``org_stratum_exclusions`` in step: every item of a newly exposed family, in
    whatever stratum, stops being available to the organisation.
    """
    if not item_ids:
        return 0
    rows = await session.execute(select(Item.id, Item.family_id).where(Item.id.in_(item_ids)))
    family_of: dict[uuid.UUID, uuid.UUID] = {item_id: family for item_id, family in rows}
    first_item: dict[uuid.UUID, uuid.UUID] = {}
    for item_id in item_ids:
        if item_id in family_of:
            first_item.setdefault(family_of[item_id], item_id)
    known = set(
        (
            await session.execute(
                select(Exposure.family_id).where(
                    Exposure.org_id == org_id, Exposure.family_id.in_(list(first_item))
                )
            )
        ).scalars()
    )
    new = [f for f in first_item if f not in known]
    new_set = set(new)
    if not new:
        return 0
    await insert_ignore(
        session,
        Exposure,
        [
            {"org_id": org_id, "family_id": f, "item_id": i}
            for f, i in first_item.items()
            if f in new_set
        ],
    )
    counts = await session.execute(
        select(Item.stratum_id, func.count())
        .where(Item.family_id.in_(new))
        .group_by(Item.stratum_id)
    )
    await insert_or_add(
        session,
        OrgStratumExclusion,
        [{"org_id": org_id, "stratum_id": s, "n_items": n} for s, n in counts],
        keys=["org_id", "stratum_id"],
        counter="n_items",
    )
    return len(new)
