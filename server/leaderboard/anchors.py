"""The ranking anchor: the model relative scores are measured against.

``R = S / S_anchor * 100`` (LLMEval-Fair eq. 2): an admin designates the anchor model, or
the top model anchors (a designation of None, or none at all). Every designation is kept;
the newest is the current one (``judge.ranking.leaderboard.build_leaderboard`` falls back
to the top model, with a note, when the designated one has no scored session).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from server.errors import NotFound
from server.leaderboard.models import RankingAnchor
from server.registry.models import RegisteredModel


async def current_anchor(db: AsyncSession) -> RankingAnchor | None:
    """The newest anchor designation (None: none was ever made, the top model anchors)."""
    anchor: RankingAnchor | None = await db.scalar(
        select(RankingAnchor).order_by(RankingAnchor.id.desc()).limit(1)
    )
    return anchor


async def set_anchor(
    db: AsyncSession, *, model_id: uuid.UUID | None, set_by: str, now: datetime
) -> RankingAnchor:
    """Designate the anchor model (None: the top model); every change is kept."""
    if model_id is not None and await db.get(RegisteredModel, model_id) is None:
        raise NotFound(f"no model {model_id}")
    anchor = RankingAnchor(model_id=model_id, set_by=set_by, set_at=now)
    db.add(anchor)
    await db.flush()
    return anchor


async def anchor_history(db: AsyncSession) -> list[RankingAnchor]:
    """Every anchor designation, newest first (the first is the current one)."""
    rows = await db.execute(select(RankingAnchor).order_by(RankingAnchor.id.desc()))
    return list(rows.scalars())
