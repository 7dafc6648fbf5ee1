"""Exposure: families served to an organisation are never sampled for it again.

A family is *reserved* for an organisation when a session allocates one of its items
(``record_exposure(..., session_id=S, delivered=False)``), *delivered* when the item is
handed out (``mark_delivered``), and *released* back to the pool if the session ends before
delivering it (``release_undelivered``). Reserved and delivered families are both excluded
from sampling, so two sessions of one organisation never share a family. A released
exposure is kept in ``exposure_releases`` (when it was exposed and released), so re-deriving
a past sample can rebuild what the organisation had been served at the time.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy import delete, func, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import column_in, in_chunks
from bank.database import utcnow
from bank.locks import lock_org_sampling
from bank.models import Exposure, ExposureRelease, Item, OrgStratumExclusion
from bank.upsert import insert_ignore, insert_or_add

RELEASE_COLUMNS = ("org_id", "family_id", "item_id", "session_id", "exposed_at", "released_at")


async def record_exposure(
    session: AsyncSession,
    *,
    org_id: uuid.UUID,
    item_ids: Sequence[uuid.UUID],
    session_id: uuid.UUID | None = None,
    delivered: bool = True,
) -> int:
    """Mark the families of ``item_ids`` as served to ``org_id``; return how many were new.

    With ``delivered=False`` the families are only reserved by evaluation session
    ``session_id`` until ``mark_delivered`` or ``release_undelivered``.

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
    delivered_at = utcnow() if delivered else None
    new = await insert_ignore(
        session,
        Exposure,
        [
            {
                "org_id": org_id,
                "family_id": f,
                "item_id": i,
                "session_id": session_id,
                "delivered_at": delivered_at,
            }
            for f, i in first_item.items()
        ],
        returning="family_id",
    )
    await _adjust_exclusions(session, org_id=org_id, family_ids=new, sign=1)
    return len(new)


async def mark_delivered(session: AsyncSession, *, org_id: uuid.UUID, family_id: uuid.UUID) -> bool:
    """Record that the reserved family ``family_id`` was delivered to ``org_id`` now.

    Returns False if it was not reserved (or was delivered already)."""
    result = await session.execute(
        update(Exposure)
        .where(
            Exposure.org_id == org_id,
            Exposure.family_id == family_id,
            Exposure.delivered_at.is_(None),
        )
        .values(delivered_at=utcnow())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def release_undelivered(
    session: AsyncSession, *, org_id: uuid.UUID, session_id: uuid.UUID
) -> int:
    """Return to the pool every family ``session_id`` reserved but never delivered.

    The released rows are first copied into ``exposure_releases`` with the instant of
    their release (same transaction, one ``INSERT ... SELECT``), so the organisation's
    exposure at any past instant can be rebuilt (``bank.sampling.as_of``). Holds the
    organisation's sampling lock (``bank.locks.lock_org_sampling``), taken before the
    release's instant, so no draw runs between the two. Returns how many families were
    released."""
    await lock_org_sampling(session, org_id)
    undelivered = (
        Exposure.org_id == org_id,
        Exposure.session_id == session_id,
        Exposure.delivered_at.is_(None),
    )
    await session.execute(
        insert(ExposureRelease).from_select(
            RELEASE_COLUMNS,
            select(
                Exposure.org_id,
                Exposure.family_id,
                Exposure.item_id,
                Exposure.session_id,
                Exposure.exposed_at,
                literal(utcnow(), ExposureRelease.released_at.type),
            ).where(*undelivered),
        )
    )
    released = await session.execute(
        delete(Exposure).where(*undelivered).returning(Exposure.family_id)
    )
    family_ids = list(released.scalars().all())
    await _adjust_exclusions(session, org_id=org_id, family_ids=family_ids, sign=-1)
    return len(family_ids)


async def _adjust_exclusions(
    session: AsyncSession, *, org_id: uuid.UUID, family_ids: Sequence[uuid.UUID], sign: int
) -> None:
    """Add (``sign=1``) or remove (``-1``) every active item of ``family_ids``, in whatever
    stratum, from what ``org_id`` may still be sampled."""
    if not family_ids:
        return
    per_stratum: Counter[int] = Counter()
    for chunk in in_chunks(session, family_ids):
        counts = await session.execute(
            select(Item.stratum_id, func.count())
            .where(column_in(session, Item.family_id, chunk), Item.status == "active")
            .group_by(Item.stratum_id)
        )
        per_stratum.update(dict(counts.tuples().all()))
    await insert_or_add(
        session,
        OrgStratumExclusion,
        [{"org_id": org_id, "stratum_id": s, "n_items": sign * n} for s, n in per_stratum.items()],
        keys=["org_id", "stratum_id"],
        counter="n_items",
    )


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
