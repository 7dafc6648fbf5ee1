"""``anchor``: items of the private anchor set (``Item.status == "anchor"``, never served
in any other session), scored as usual; the score is compared with the model's fixed
sessions for the generalisation gap, not ranked. Admins and evaluators only."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from bank.anchor_set import draw_anchor_sample
from bank.models import Sample
from bank.sampling.service import DrawnSample, persist_sample
from clients.sdk.types import SessionMode
from server.auth.permissions import Permission
from server.sessions.modes.base import BaseMode, DrawRequest, Traits
from server.sessions.options import SessionOptions


class AnchorMode(BaseMode):
    mode: ClassVar[str] = SessionMode.ANCHOR
    traits: ClassVar[Traits] = Traits(
        ranked=False,
        feeds_history=False,
        read_by_health=False,
        contamination=True,
        open_permission=Permission.SESSIONS_CONTAMINATION,
    )
    refusal: ClassVar[str] = "only admins and evaluators may open anchor sessions"

    async def draw(self, db: AsyncSession, request: DrawRequest) -> tuple[Sample, DrawnSample]:
        drawn = await draw_anchor_sample(db, org_id=request.org_id, n=request.n)
        sample = await persist_sample(
            db, org_id=request.org_id, sample=drawn, drawn_at=request.drawn_at
        )
        return sample, drawn

    async def why_empty(self, db: AsyncSession, *, options: SessionOptions) -> str:
        return "the anchor set has no items left that this organisation has not seen"
