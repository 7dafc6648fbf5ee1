"""``fixed``: a stratified sample of unseen items from the whole bank (``bank.sampling``),
delivered in drawn order, scored and ranked.

It is what the leaderboard pools, what adaptive item histories and bank health read: a
sample of any chosen subset is another mode, so none of them reads a biased sample."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from bank.disciplines import sampled_disciplines
from clients.sdk.types import SessionMode
from server.sessions.modes.base import BaseMode, Traits
from server.sessions.options import SessionOptions


class FixedMode(BaseMode):
    mode: ClassVar[str] = SessionMode.FIXED
    traits: ClassVar[Traits] = Traits(ranked=True, feeds_history=True, read_by_health=True)

    async def why_empty(self, db: AsyncSession, *, options: SessionOptions) -> str:
        if not await sampled_disciplines(db):
            return (
                "no evaluated discipline of the bank has items "
                "(the operator sets them with `proctor bank disciplines --set`)"
            )
        return await super().why_empty(db, options=options)
