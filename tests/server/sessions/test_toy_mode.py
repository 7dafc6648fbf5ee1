"""What a new kind of session costs: one module implementing ``ModeSpec`` and one
registry entry (plus a ``SessionMode`` member for the API). ``ToyMode`` below is the
whole module of a test-only mode; the test drives it through the real session services
on a real database and checks that every feature reading traits treats it as declared."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, cast

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Exposure
from clients.sdk.types import Role, SessionMode
from server.auth.permissions import Principal
from server.errors import Forbidden
from server.scoring.assignment import JudgeAssignment
from server.sessions import delivery, service
from server.sessions.answers import submit_answer
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.modes import MODES, DeliveredItem, Traits, mode_spec, modes_where
from server.sessions.modes.base import BaseMode
from server.sessions.states import SessionState
from server.sessions.submission import AnswerSubmission
from tests.support.api import seed_world
from tests.support.database import database_session

TOY = "toy"
TOY_ITEMS = 2


# --- the whole of a new mode: this class and its registry entry ---------------------- #
class ToyMode(BaseMode):
    """A stratified sample delivered in order, each question upper-cased and its options
    held back; delivery stops after two items (so it is steered); not ranked, read by
    nothing; opening or driving one takes nothing beyond the ordinary permissions."""

    mode: ClassVar[str] = TOY
    traits: ClassVar[Traits] = Traits(
        ranked=False, feeds_history=False, read_by_health=False, steered=True
    )

    def view(self, row: Any, *, position: int) -> DeliveredItem:
        item = super().view(row, position=position)
        return replace(item, question=item.question.upper(), options=None)

    async def goes_on(
        self, db: AsyncSession, *, record: EvalSession, judges: JudgeAssignment
    ) -> bool:
        return record.n_delivered < TOY_ITEMS


# -------------------------------------------------------------------------------------- #


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODES, TOY, ToyMode())


def _principal(org_id: uuid.UUID, role: Role) -> Principal:
    now = datetime.now(UTC)
    return Principal(f"key-{role}", org_id, role, f"jti-{uuid.uuid4()}", now + timedelta(hours=1))


def test_traits_of_a_registered_mode_are_read_by_the_features(toy_registered: None) -> None:
    assert mode_spec(TOY).traits.ordered
    assert TOY in modes_where(lambda traits: traits.ordered)
    assert TOY not in modes_where(lambda traits: not traits.steered)
    for trait in ("ranked", "feeds_history", "read_by_health", "contamination"):

        def has(traits: Traits, name: str = trait) -> bool:
            return bool(getattr(traits, name))

        assert TOY not in modes_where(has)
    with pytest.raises(LookupError, match="no session mode 'unknown'"):
        mode_spec("unknown")


@pytest.mark.parametrize("n_items", [5])
async def test_a_toy_session_runs_through_the_real_services(
    fresh_db_url: str, toy_registered: None, n_items: int
) -> None:
    world = await seed_world(fresh_db_url)
    assert world.a.model_id is not None
    principal = _principal(world.a.id, Role.EVALUATOR)
    limits = SessionLimits()
    now = datetime.now(UTC)
    async with database_session(fresh_db_url) as db:
        record = await service.create_session(
            db,
            principal=principal,
            model_id=world.a.model_id,
            n_items=n_items,
            limits=limits,
            now=now,
            judges=JudgeAssignment(),
            mode=cast(SessionMode, TOY),
        )
        assert record.mode == TOY and record.n_items == n_items
        seen: list[DeliveredItem] = []
        while (
            item := await delivery.next_item(
                db,
                principal=principal,
                session_id=record.id,
                limits=limits,
                now=now,
                judges=JudgeAssignment(),
            )
        ) is not None:
            assert item.question == item.question.upper() and item.options is None
            seen.append(item)
            await submit_answer(
                db,
                principal=principal,
                session_id=record.id,
                submission=AnswerSubmission(item.position, item.item_id, "an answer"),
                limits=limits,
                now=now,
            )
        await db.refresh(record)
        released = await db.scalar(
            select(func.count()).select_from(Exposure).where(Exposure.session_id == record.id)
        )
    # The mode stopped delivery after two items: the session shrank to them, they are
    # answered (and, with no judge configured, finished at once), and the three
    # undelivered families went back to the organisation.
    assert [i.position for i in seen] == list(range(TOY_ITEMS))
    assert record.n_items == TOY_ITEMS
    assert record.state in {SessionState.ANSWERED.value, SessionState.SCORED.value}
    assert released == TOY_ITEMS


async def test_a_mode_permission_is_enforced_from_its_traits(
    fresh_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same toy, now declaring that opening it takes ``sessions:contamination``: a
    vendor is refused with the mode's own message, before anything is drawn."""

    class GuardedToy(ToyMode):
        traits: ClassVar[Traits] = replace(
            ToyMode.traits, open_permission=mode_spec(SessionMode.REPLAY).traits.open_permission
        )
        refusal: ClassVar[str] = "only admins and evaluators may open toy sessions"

    monkeypatch.setitem(MODES, TOY, GuardedToy())
    world = await seed_world(fresh_db_url)
    assert world.a.model_id is not None
    async with database_session(fresh_db_url) as db:
        with pytest.raises(Forbidden, match="open toy sessions"):
            await service.create_session(
                db,
                principal=_principal(world.a.id, Role.VENDOR),
                model_id=world.a.model_id,
                n_items=None,
                limits=SessionLimits(),
                now=datetime.now(UTC),
                judges=JudgeAssignment(),
                mode=cast(SessionMode, TOY),
            )
        assert not await db.scalar(select(func.count()).select_from(EvalSession))


def test_every_registered_mode_that_decides_delivery_says_so() -> None:
    """A mode overriding ``goes_on`` is ``steered`` (else the one-statement delivery on
    PostgreSQL would deliver past its stop without asking), and only such a mode is."""
    for name, spec in MODES.items():
        overrides = type(spec).goes_on is not BaseMode.goes_on
        assert spec.traits.steered == overrides, name


def test_the_one_statement_delivery_leaves_steered_and_guarded_modes_to_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It neither asks ``goes_on`` nor checks a drive permission: a mode needing either is
    delivered the general way (else PostgreSQL would deliver what SQLite refuses)."""
    guarded = replace(
        ToyMode.traits,
        steered=False,
        drive_permission=mode_spec(SessionMode.ADAPTIVE).traits.drive_permission,
    )
    assert not guarded.delivered_in_one_statement
    assert not ToyMode.traits.delivered_in_one_statement  # steered
    assert replace(guarded, drive_permission=None).delivered_in_one_statement
    one_statement = modes_where(lambda traits: traits.delivered_in_one_statement)
    assert set(one_statement) == {
        SessionMode.FIXED,
        SessionMode.REPLAY,
        SessionMode.ANCHOR,
        SessionMode.ITEM_SET,
    }
