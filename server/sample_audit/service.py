"""Re-deriving a session's sample from its seed, for auditors.

``bank.sampling.as_of`` draws the session's sample again on the bank and the organisation's
exposure as they were at the sample's ``drawn_at``, with the live draw's code, and compares
it with the stored sample in drawn order. On top of that this module checks the session:

* every delivered item (positions below ``n_delivered``) is in the re-derived sample;
* an adaptive session moves undelivered items forward (``server.sessions.adaptive``), so
  its positions differ from the drawn order: what must match is the same *set* of items.
  Each position is shown with its drawn position; for ``model-assisted`` sessions the
  ``adaptive_draws`` rows are the recorded policy steps (the item at each delivered
  position was drawn with the operating system's randomness with the recorded
  probability, so the delivery order is a record, not something the seed re-derives).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Sample
from bank.sampling.as_of import SampleCheck, check_sample
from bank.sampling.rederive import Difference, Outcome, StoredItem, missing_delivered
from server.auth.permissions import Principal
from server.errors import NotFound
from server.sessions.models import AdaptiveDraw, AdaptiveRun, EvalSession
from server.sessions.modes import SessionMode
from server.sessions.service import get_session

ADAPTIVE_ORDER = (
    "An adaptive session delivers the item its policy asks for next, moving it to the next "
    "position; drawn_position keeps the order the draw gave. The session must hold the same "
    "set of items as the re-derived sample."
)
ASSISTED_ORDER = (
    " For model-assisted sessions each delivered position was filled by a draw with the "
    "operating system's randomness at the recorded probability (policy_steps): the delivery "
    "order is recorded, not re-derivable from the seed."
)


@dataclass(frozen=True, slots=True)
class PositionOrder:
    """Where one item of an adaptive session sits and where the draw put it."""

    position: int
    drawn_position: int | None
    item_id: uuid.UUID | None
    """Shown for delivered positions only."""


@dataclass(frozen=True, slots=True)
class PolicyStep:
    """How the item at ``position`` of a model-assisted session was drawn."""

    position: int
    probability: float
    predicted: float
    unseen_predicted: float
    weight: float


@dataclass(frozen=True, slots=True)
class AdaptiveCheck:
    policy: str
    same_set: bool
    explanation: str
    positions: list[PositionOrder]
    policy_steps: list[PolicyStep] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DeliveredCheck:
    n_delivered: int
    all_in_rederived: bool | None
    """None when the sample could not be re-derived."""
    first_missing_position: int | None = None
    first_missing_item: uuid.UUID | None = None
    missing_positions: list[int] = field(default_factory=list)
    """Every delivered position whose item is not in the re-derived sample."""


@dataclass(frozen=True, slots=True)
class SampleAudit:
    """The report of ``GET /v1/audit/sessions/{id}/sample`` and ``proctor audit sample``."""

    session_id: uuid.UUID
    sample_id: uuid.UUID
    mode: str
    state: str
    kind: str | None
    drawn_at: datetime | None
    outcome: Outcome
    reason: str | None
    n_stored: int
    n_rederived: int
    first_difference: Difference | None
    same_set: bool | None
    shortfall_equal: bool | None
    delivered: DeliveredCheck
    history_breaks: list[uuid.UUID]
    adaptive: AdaptiveCheck | None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.MATCH


async def audit_session_sample(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> SampleAudit:
    """The re-derivation report of session ``session_id``'s sample; ``NotFound`` if the
    principal may not read the session."""
    record = await get_session(db, principal=principal, session_id=session_id)
    return await audit_record(db, record)


async def audit_session_id(db: AsyncSession, session_id: uuid.UUID) -> SampleAudit:
    """The report for session ``session_id`` (no access check: the command line)."""
    record = await db.get(EvalSession, session_id)
    if record is None:
        raise NotFound(f"no session {session_id}")
    return await audit_record(db, record)


async def audit_record(db: AsyncSession, record: EvalSession) -> SampleAudit:
    """Re-derive ``record``'s sample and check the session against it."""
    sample = await db.get(Sample, record.sample_id)
    if sample is None:  # pragma: no cover - a foreign key; only a damaged database
        raise NotFound(f"session {record.id} has no sample")
    check = await check_sample(db, sample)
    delivered = [s for s in check.stored if s.position < record.n_delivered]
    adaptive = None
    if record.mode == SessionMode.ADAPTIVE.value:
        adaptive = await _adaptive_check(db, record, check)
    outcome = _outcome(check, delivered, adaptive)
    comparison = check.comparison
    return SampleAudit(
        session_id=record.id,
        sample_id=sample.id,
        mode=record.mode,
        state=record.state,
        kind=check.rederived.kind,
        drawn_at=sample.drawn_at,
        outcome=outcome,
        reason=check.rederived.reason,
        n_stored=len(check.stored),
        n_rederived=len(check.expected),
        first_difference=None if comparison is None else comparison.first_difference,
        same_set=None if comparison is None else comparison.same_set,
        shortfall_equal=None if comparison is None else comparison.shortfall_equal,
        delivered=_delivered_check(record, check, delivered),
        history_breaks=list(check.rederived.history_breaks),
        adaptive=adaptive,
    )


def _outcome(
    check: SampleCheck, delivered: list[StoredItem], adaptive: AdaptiveCheck | None
) -> Outcome:
    """Match: the same sample in drawn order (an adaptive session: the same set) with the
    same shortfall, and every delivered item in it."""
    comparison = check.comparison
    if comparison is None:
        return Outcome.NOT_REDERIVABLE
    if missing_delivered(delivered, check.expected) is not None:
        return Outcome.MISMATCH
    if adaptive is not None:
        ok = comparison.same_set and comparison.shortfall_equal
        return Outcome.MATCH if ok else Outcome.MISMATCH
    return comparison.outcome


def _delivered_check(
    record: EvalSession, check: SampleCheck, delivered: list[StoredItem]
) -> DeliveredCheck:
    if check.comparison is None:
        return DeliveredCheck(record.n_delivered, None)
    missing = missing_delivered(delivered, check.expected)
    if missing is None:
        return DeliveredCheck(record.n_delivered, True)
    expected = set(check.expected)
    positions = sorted(s.position for s in delivered if s.item_id not in expected)
    return DeliveredCheck(record.n_delivered, False, missing.position, missing.item_id, positions)


async def _adaptive_check(
    db: AsyncSession, record: EvalSession, check: SampleCheck
) -> AdaptiveCheck:
    run = await db.get(AdaptiveRun, record.id)
    policy = run.policy if run is not None else "unknown"
    steps = (
        await db.execute(
            select(AdaptiveDraw)
            .where(AdaptiveDraw.session_id == record.id)
            .order_by(AdaptiveDraw.position)
        )
    ).scalars()
    policy_steps = [
        PolicyStep(s.position, s.probability, s.predicted, s.unseen_predicted, s.weight)
        for s in steps
    ]
    positions = [
        PositionOrder(
            s.position,
            s.drawn_position,
            s.item_id if s.position < record.n_delivered else None,
        )
        for s in check.stored
    ]
    comparison = check.comparison
    explanation = ADAPTIVE_ORDER + (ASSISTED_ORDER if policy_steps else "")
    return AdaptiveCheck(
        policy=policy,
        same_set=bool(comparison and comparison.same_set),
        explanation=explanation,
        positions=positions,
        policy_steps=policy_steps,
    )
