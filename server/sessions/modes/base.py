"""What a kind of session is: its traits and its behaviour (one protocol, one module per
mode, one registry: ``server.sessions.modes.registry``).

A mode decides how its sample is drawn, what the client sees of an item, whether
delivery goes on, and whether it scores an answer itself; its ``Traits`` say how every
other feature treats it (the leaderboard ranks it or not, adaptive item histories and
bank health read its verdicts or not, ...). Features read traits through the registry,
never by naming modes, so a new mode is one module, one ``SessionMode`` member and one
registry entry.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Sample
from bank.sampling.service import DrawnSample, allocate_sample
from clients.sdk.types import AdaptiveSummary, SessionMode
from server.auth.permissions import Permission
from server.errors import InvalidInput
from server.scoring.assignment import JudgeAssignment
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.options import SessionOption, SessionOptions

__all__ = ["BaseMode", "DeliveredItem", "DrawRequest", "ModeSpec", "Traits"]


@dataclass(frozen=True, slots=True)
class Traits:
    """How the rest of the server treats a mode's sessions."""

    ranked: bool
    """Pooled on the leaderboard (and plotted on a model's trend)."""
    feeds_history: bool
    """Its verdicts fit the item parameters of later adaptive sessions."""
    read_by_health: bool
    """Its verdicts are read by bank health (the bank's ordinary use)."""
    scored: bool = True
    """Its verdicts are a score of the model (a replay's are near-exact completions)."""
    ordered: bool = True
    """Delivered in drawn (committed) order; False: the server picks each next item from
    the verdicts so far, so the bundle check and sample audit check membership, not
    order."""
    steered: bool = False
    """The mode decides at each delivery whether delivery goes on (``ModeSpec.goes_on``,
    which it overrides): its items go the general way, never the one-statement delivery
    (``server.sessions.single_statement``), which does not ask."""
    contamination: bool = False
    """A contamination check (replay, anchor set): never ranked."""
    open_permission: Permission | None = None
    """What opening one takes beyond ``sessions:create`` (None: nothing more)."""
    drive_permission: Permission | None = None
    """What delivering its items takes beyond ``sessions:drive``."""

    @property
    def delivered_in_one_statement(self) -> bool:
        """Whether the one-statement delivery may deliver its items: it neither asks the
        mode whether to go on nor checks a drive permission, so a steered mode or one
        with a drive permission goes the general way."""
        return not self.steered and self.drive_permission is None


@dataclass(frozen=True, slots=True)
class DrawRequest:
    """What a session's sample is drawn for: up to ``n`` items for organisation
    ``org_id``, whose sampling lock is held since ``drawn_at``, with the mode's
    ``options``."""

    org_id: uuid.UUID
    n: int
    options: SessionOptions
    drawn_at: datetime


@dataclass(frozen=True, slots=True)
class DeliveredItem:
    """What a client may see of an item: question content only."""

    position: int
    item_id: uuid.UUID
    question: str
    options: list[str] | None
    qtype: str
    discipline: str


class ModeSpec(Protocol):
    """One kind of session."""

    mode: ClassVar[str]
    traits: ClassVar[Traits]
    refusal: ClassVar[str]
    """Why a role without ``traits.open_permission`` is refused."""
    drive_refusal: ClassVar[str]
    """Why a role without ``traits.drive_permission`` is refused."""

    def check_options(self, options: SessionOptions) -> None:
        """``InvalidInput`` for an option this mode does not read or one it misses."""

    async def draw(self, db: AsyncSession, request: DrawRequest) -> tuple[Sample, DrawnSample]:
        """Draw and record the sample ``request`` asks for."""

    async def why_empty(self, db: AsyncSession, *, options: SessionOptions) -> str:
        """Why nothing was drawn, for the 409 the client gets."""

    async def opened(
        self,
        db: AsyncSession,
        *,
        record: EvalSession,
        options: SessionOptions,
        limits: SessionLimits,
        judges: JudgeAssignment,
    ) -> None:
        """Record what the mode keeps beside the session (flush), once it exists;
        ``judges`` decide the scores it may read (``server.scoring.effective``)."""

    def view(self, row: Any, *, position: int) -> DeliveredItem:
        """The client's view of the item in ``row`` (``Item`` columns ``id``,
        ``question``, ``options``, ``qtype``, ``discipline``, ``language``)."""

    async def goes_on(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> bool:
        """Whether position ``record.n_delivered`` is delivered (and is the item to
        deliver there), reading scores as ``judges`` decide them; False ends delivery
        where it is."""

    def verdict_without_judge(self, *, question: str, answer: str) -> dict[str, Any] | None:
        """The verdict the mode gives an answer itself (``score``, ``method``, ``detail``,
        optionally ``needs_review``), or None to score it as usual."""

    async def summary(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> AdaptiveSummary | None:
        """What the session reports of its own progress beside the counts (None)."""


class BaseMode:
    """The defaults a mode overrides: no options, the stratified sample of the whole bank,
    the item as it is, delivery to the end, scoring as usual."""

    mode: ClassVar[str]
    traits: ClassVar[Traits]
    refusal: ClassVar[str] = ""
    drive_refusal: ClassVar[str] = ""

    reads: ClassVar[SessionOption | None] = None
    """The one option of ``SessionOptions`` the mode reads (None: it reads none)."""

    def check_options(self, options: SessionOptions) -> None:
        pairing = f"mode {SessionMode.ITEM_SET.value!r} and an item_set name go together"
        if self.reads is SessionOption.ITEM_SET and options.item_set is None:
            raise InvalidInput(pairing)
        if options.adaptive is not None and self.reads is not SessionOption.ADAPTIVE:
            raise InvalidInput(f"adaptive options are only for mode {SessionMode.ADAPTIVE.value!r}")
        if options.item_set is not None and self.reads is not SessionOption.ITEM_SET:
            raise InvalidInput(pairing)

    async def draw(self, db: AsyncSession, request: DrawRequest) -> tuple[Sample, DrawnSample]:
        return await allocate_sample(db, org_id=request.org_id, n=request.n)

    async def why_empty(self, db: AsyncSession, *, options: SessionOptions) -> str:
        return "the bank has no items left that this organisation has not seen"

    async def opened(
        self,
        db: AsyncSession,
        *,
        record: EvalSession,
        options: SessionOptions,
        limits: SessionLimits,
        judges: JudgeAssignment,
    ) -> None:
        return None

    def view(self, row: Any, *, position: int) -> DeliveredItem:
        return DeliveredItem(
            position=position,
            item_id=row.id,
            question=row.question,
            options=row.options,
            qtype=row.qtype,
            discipline=row.discipline,
        )

    async def goes_on(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> bool:
        return True

    def verdict_without_judge(self, *, question: str, answer: str) -> dict[str, Any] | None:
        return None

    async def summary(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> AdaptiveSummary | None:
        return None
