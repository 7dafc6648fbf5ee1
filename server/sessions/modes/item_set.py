"""``item_set``: items of a named item set an admin saved (``bank.item_sets``; e.g. a
selective subset chosen from the bank-health figures), drawn like the anchor set: active
members only, one per family, families the organisation has not been served; scored as
usual, not ranked.

Who may open one: admins and evaluators, not vendors. A vendor driving sessions from a
set of its choosing could learn which items the set holds (session after session, each
serving families not yet seen) and tune to the subset the operator uses to tell models
apart; the set's name and existence are not revealed to roles that may not use it (their
request is refused before the name is looked up)."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from bank.item_sets import draw_item_set_sample, get_item_set
from bank.models import Sample
from bank.sampling.service import DrawnSample, persist_sample
from clients.sdk.types import SessionMode
from server.auth.permissions import Permission
from server.errors import NotFound
from server.sessions.modes.base import BaseMode, DrawRequest, Traits
from server.sessions.options import SessionOption, SessionOptions


class ItemSetMode(BaseMode):
    mode: ClassVar[str] = SessionMode.ITEM_SET
    traits: ClassVar[Traits] = Traits(
        ranked=False,
        feeds_history=False,
        read_by_health=False,
        # choosing what a session holds, as choosing its size does
        open_permission=Permission.SESSIONS_SIZE,
    )
    refusal: ClassVar[str] = "only admins and evaluators may open sessions on a named item set"
    reads: ClassVar[SessionOption | None] = SessionOption.ITEM_SET

    async def draw(self, db: AsyncSession, request: DrawRequest) -> tuple[Sample, DrawnSample]:
        name = request.options.item_set or ""
        record = await get_item_set(db, name)
        if record is None:
            raise NotFound(f"no item set is named {name!r}")
        drawn = await draw_item_set_sample(db, org_id=request.org_id, set_id=record.id, n=request.n)
        sample = await persist_sample(
            db, org_id=request.org_id, sample=drawn, drawn_at=request.drawn_at
        )
        return sample, drawn

    async def why_empty(self, db: AsyncSession, *, options: SessionOptions) -> str:
        return (
            f"the item set {options.item_set!r} has no active items left "
            "that this organisation has not seen"
        )
