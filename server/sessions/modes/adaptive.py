"""``adaptive``: the server picks each next item from what has been scored so far and
ends the session when the stopping rule fires (``server.sessions.adaptive`` drives the
policies of ``bank.adaptive``). Its pool is drawn as a fixed session's sample of its
budget; its score is the stratified estimate with its interval, ranked with the fixed
sessions (each adaptive session counts with its estimate). Admins and evaluators only:
its item choice and stopping follow the verdicts so far."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from clients.sdk.types import AdaptiveSummary, SessionMode
from server.auth.permissions import Permission
from server.scoring.assignment import JudgeAssignment
from server.sessions import adaptive
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.modes.base import BaseMode, Traits
from server.sessions.options import AdaptiveRequest, SessionOption, SessionOptions


class AdaptiveMode(BaseMode):
    """``history_modes``: the modes whose verdicts fit the item parameters, asked when a
    session opens (the registry's ``feeds_history`` modes)."""

    mode: ClassVar[str] = SessionMode.ADAPTIVE
    traits: ClassVar[Traits] = Traits(
        ranked=True,
        feeds_history=True,
        read_by_health=True,
        ordered=False,
        steered=True,
        open_permission=Permission.SESSIONS_ADAPTIVE,
        drive_permission=Permission.SESSIONS_ADAPTIVE,
    )
    refusal: ClassVar[str] = (
        "only admins and evaluators may open adaptive sessions: their item choice and "
        "stopping follow the verdicts so far"
    )
    drive_refusal: ClassVar[str] = "only admins and evaluators may drive adaptive sessions"
    reads: ClassVar[SessionOption | None] = SessionOption.ADAPTIVE

    def __init__(self, *, history_modes: Callable[[], Sequence[str]]) -> None:
        self.history_modes = history_modes

    async def opened(
        self,
        db: AsyncSession,
        *,
        record: EvalSession,
        options: SessionOptions,
        limits: SessionLimits,
        judges: JudgeAssignment,
    ) -> None:
        await adaptive.start(
            db,
            record=record,
            request=options.adaptive or AdaptiveRequest(),
            defaults=limits.adaptive,
            history_modes=self.history_modes(),
            judges=judges,
        )

    async def goes_on(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> bool:
        run = await adaptive.get_run(db, session_id=record.id)
        return await adaptive.advance(db, record=record, run=run, judges=judges)

    async def summary(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> AdaptiveSummary:
        return await adaptive.summary(db, record=record, judges=judges)
