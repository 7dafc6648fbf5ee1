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

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Sample
from bank.sampling.as_of import SampleCheck, check_sample
from bank.sampling.rederive import Outcome, StoredItem, missing_delivered
from server.auth.permissions import Principal
from server.errors import NotFound
from server.sample_audit.schemas import (
    SampleAuditAdaptiveOut,
    SampleAuditOut,
    SampleDeliveredOut,
    SampleDifferenceOut,
    SamplePolicyStepOut,
    SamplePositionOut,
)
from server.sessions.models import AdaptiveDraw, AdaptiveRun, EvalSession
from server.sessions.modes import SessionMode, mode_spec
from server.sessions.service import get_session
from server.sessions.states import SessionState

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


async def audit_session_sample(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> SampleAuditOut:
    """The re-derivation report of session ``session_id``'s sample; ``NotFound`` if the
    principal may not read the session. Only reads: run it in a ``read_only_snapshot``."""
    record = await get_session(db, principal=principal, session_id=session_id)
    return await audit_record(db, record)


async def audit_session_id(db: AsyncSession, session_id: uuid.UUID) -> SampleAuditOut:
    """The report for session ``session_id`` (no access check: the command line)."""
    record = await db.get(EvalSession, session_id)
    if record is None:
        raise NotFound(f"no session {session_id}")
    return await audit_record(db, record)


async def audit_record(db: AsyncSession, record: EvalSession) -> SampleAuditOut:
    """Re-derive ``record``'s sample and check the session against it."""
    sample = await db.get(Sample, record.sample_id)
    if sample is None:  # pragma: no cover - a foreign key; only a damaged database
        raise NotFound(f"session {record.id} has no sample")
    check = await check_sample(db, sample)
    delivered = [s for s in check.stored if s.position < record.n_delivered]
    adaptive = None
    if not mode_spec(record.mode).traits.ordered:
        adaptive = await _adaptive_check(db, record, check)
    comparison = check.comparison
    difference = None if comparison is None else comparison.first_difference
    return SampleAuditOut(
        session_id=record.id,
        sample_id=sample.id,
        mode=SessionMode(record.mode),
        state=SessionState(record.state),
        kind=check.rederived.kind,
        drawn_at=sample.drawn_at,
        outcome=_outcome(check, delivered, adaptive),
        reason=check.rederived.reason,
        n_stored=len(check.stored),
        n_rederived=len(check.expected),
        first_difference=None
        if difference is None
        else SampleDifferenceOut.model_validate(difference),
        same_set=None if comparison is None else comparison.same_set,
        shortfall_equal=None if comparison is None else comparison.shortfall_equal,
        delivered=_delivered_check(record, check, delivered),
        history_breaks=list(check.rederived.history_breaks),
        adaptive=adaptive,
    )


def _outcome(
    check: SampleCheck, delivered: list[StoredItem], adaptive: SampleAuditAdaptiveOut | None
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
) -> SampleDeliveredOut:
    n_delivered = record.n_delivered
    missing = None if check.comparison is None else missing_delivered(delivered, check.expected)
    if missing is None:
        all_in = None if check.comparison is None else True
        return SampleDeliveredOut(
            n_delivered=n_delivered,
            all_in_rederived=all_in,
            first_missing_position=None,
            first_missing_item=None,
            missing_positions=[],
        )
    expected = set(check.expected)
    return SampleDeliveredOut(
        n_delivered=n_delivered,
        all_in_rederived=False,
        first_missing_position=missing.position,
        first_missing_item=missing.item_id,
        missing_positions=sorted(s.position for s in delivered if s.item_id not in expected),
    )


async def _adaptive_check(
    db: AsyncSession, record: EvalSession, check: SampleCheck
) -> SampleAuditAdaptiveOut:
    run = await db.get(AdaptiveRun, record.id)
    policy = run.policy if run is not None else "unknown"
    steps = (
        await db.execute(
            select(AdaptiveDraw)
            .where(AdaptiveDraw.session_id == record.id)
            .order_by(AdaptiveDraw.position)
        )
    ).scalars()
    policy_steps = [SamplePolicyStepOut.model_validate(step) for step in steps]
    positions = [
        SamplePositionOut(
            position=s.position,
            drawn_position=s.drawn_position,
            item_id=s.item_id if s.position < record.n_delivered else None,
        )
        for s in check.stored
    ]
    comparison = check.comparison
    explanation = ADAPTIVE_ORDER + (ASSISTED_ORDER if policy_steps else "")
    return SampleAuditAdaptiveOut(
        policy=policy,
        same_set=bool(comparison and comparison.same_set),
        explanation=explanation,
        positions=positions,
        policy_steps=policy_steps,
    )
