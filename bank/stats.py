"""Bank composition: what ``proctor bank stats`` prints."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Item


async def bank_stats(session: AsyncSession) -> dict[str, Any]:
    """Counts of items, families, originals vs augmented, and per discipline/qtype/sub.

    ``by_subdiscipline`` is keyed ``"<discipline>/<subdiscipline>"`` because sub-discipline
    names repeat across disciplines.
    """
    total, families, originals = (
        await session.execute(
            select(
                func.count(),
                func.count(func.distinct(Item.family_id)),
                func.count().filter(Item.variant == "original"),
            )
        )
    ).one()
    return {
        "items": total,
        "families": families,
        "originals": originals,
        "augmented": total - originals,
        "by_discipline": await _count_by(session, Item.discipline),
        "by_qtype": await _count_by(session, Item.qtype),
        "by_subdiscipline": await _count_by(session, Item.discipline, Item.subdiscipline),
        "by_status": await _count_by(session, Item.status),
    }


async def _count_by(session: AsyncSession, *columns: Any) -> dict[str, int]:
    rows = await session.execute(
        select(*columns, func.count()).group_by(*columns).order_by(*columns)
    )
    return {"/".join(row[:-1]): row[-1] for row in rows}
