"""Sessions: creation under quotas, strictly ordered delivery, answers, abort and expiry.

Every function that changes a session first takes its row lock with one conditional
UPDATE that also takes the lease (``_drive``): two requests on one session therefore run
one after the other, and a second client is refused while the lease is held by another
token. Services flush; the request's unit of work commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.anchor_set import draw_anchor_sample
from bank.database import utcnow
from bank.disciplines import sampled_disciplines
from bank.exposure import mark_delivered, record_exposure, release_undelivered
from bank.item_sets import draw_item_set_sample, get_item_set
from bank.locks import lock_org_sampling
from bank.models import Exposure, Item, SampleItem
from bank.sampling.service import DrawnSample, allocate_sample, persist_sample
from judge.contamination.replay import replay_prompt
from judge.prompts import PROMPT_VERSION
from judge.reasoning import split_reasoning
from server.auth.models import RevokedToken
from server.auth.permissions import Permission, Principal
from server.errors import (
    AlreadyAnswered,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    NotPending,
    QuotaExhausted,
    SessionClosed,
    SessionInUse,
    TooManyRequests,
)
from server.observability import metrics
from server.orgs.models import Organisation
from server.orgs.service import get_visible
from server.registry.service import get_model
from server.review.sampling import ReviewPolicy
from server.scoring.assignment import JudgeAssignment
from server.scoring.service import enqueue_answer
from server.sessions import adaptive, single_statement
from server.sessions.answer_reports import AnswerReports
from server.sessions.limits import SessionLimits
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import (
    CONTAMINATION_MODES,
    ITEM_SET_PERMISSION,
    REPLAY_QTYPE,
    SessionMode,
    replay_mask,
)
from server.sessions.states import (
    ALL_ANSWERED_STATES,
    OPEN_STATE_VALUES,
    ItemState,
    SessionState,
    item_state,
    require_item_transition,
    require_session_transition,
)


@dataclass(frozen=True, slots=True)
class DeliveredItem:
    """What a client may see of an item: question content only."""

    position: int
    item_id: uuid.UUID
    question: str
    options: list[str] | None
    qtype: str
    discipline: str


async def create_session(
    db: AsyncSession,
    *,
    principal: Principal,
    model_id: uuid.UUID,
    n_items: int | None,
    limits: SessionLimits,
    now: datetime,
    mode: SessionMode = SessionMode.FIXED,
    adaptive_request: adaptive.AdaptiveRequest | None = None,
    item_set: str | None = None,
) -> EvalSession:
    """Allocate a fresh sample for ``model_id``'s organisation and open a session on it.

    ``mode`` (``server.sessions.modes``): a fixed session draws the stratified sample, a
    replay session too (its items are then delivered masked), an anchor-set session draws
    from the private anchor set, an adaptive session draws its pool (``n_items`` is its
    budget) and records its policy (``adaptive_request``; ``server.sessions.adaptive``),
    an item-set session draws from the set named ``item_set`` (``bank.item_sets``).
    Refuses (403) a non-default ``n_items`` from roles that may not size sessions and
    contamination, adaptive and item-set modes from roles that may not run them, (404) an
    item set that does not exist (only to roles that may use sets), (409) more open
    sessions than ``limits.max_concurrent``, and (429) more sessions per period."""
    if adaptive_request is not None and mode is not SessionMode.ADAPTIVE:
        raise InvalidInput("adaptive options are only for mode 'adaptive'")
    if (item_set is not None) != (mode is SessionMode.ITEM_SET):
        raise InvalidInput("mode 'item_set' and an item_set name go together")
    if mode is SessionMode.ITEM_SET and not principal.can(ITEM_SET_PERMISSION):
        raise Forbidden("only admins and evaluators may open sessions on a named item set")
    if mode in CONTAMINATION_MODES and not principal.can(Permission.SESSIONS_CONTAMINATION):
        raise Forbidden(f"only admins and evaluators may open {mode.value} sessions")
    if mode is SessionMode.ADAPTIVE and not principal.can(Permission.SESSIONS_ADAPTIVE):
        raise Forbidden(
            "only admins and evaluators may open adaptive sessions: their item choice and "
            "stopping follow the verdicts so far"
        )
    if n_items is not None and n_items != limits.default_items:
        if not principal.can(Permission.SESSIONS_SIZE):
            raise Forbidden("only admins and evaluators may choose n_items")
        if not 1 <= n_items <= limits.max_items:
            raise InvalidInput(f"n_items must be between 1 and {limits.max_items}, got {n_items}")
    n = n_items or limits.default_items
    model = await get_model(db, principal=principal, model_id=model_id)
    org_id = model.org_id
    # One organisation's sessions are created one at a time, so the quota checks and the
    # sample (which must avoid families other open sessions hold) see a settled state.
    await lock_org_sampling(db, org_id)
    await expire_overdue(db, now=now, org_id=org_id)
    await _check_org_quotas(db, org_id=org_id, limits=limits, now=now)
    # The sample's drawn_at: under the lock, after this transaction's own expiries gave
    # their families back, before the draw reads the bank and exposure state.
    drawn_at = utcnow()
    if mode is SessionMode.ANCHOR:
        drawn = await draw_anchor_sample(db, org_id=org_id, n=n)
        sample = await persist_sample(db, org_id=org_id, sample=drawn, drawn_at=drawn_at)
    elif item_set is not None:
        drawn = await _draw_from_item_set(db, org_id=org_id, name=item_set, n=n)
        sample = await persist_sample(db, org_id=org_id, sample=drawn, drawn_at=drawn_at)
    else:
        sample, drawn = await allocate_sample(db, org_id=org_id, n=n)
    if not drawn.items:
        raise Conflict(await _why_nothing_was_drawn(db, mode=mode, item_set=item_set))
    record = EvalSession(
        org_id=org_id,
        model_id=model.id,
        sample_id=sample.id,
        mode=mode.value,
        state=SessionState.CREATED.value,
        n_items=len(drawn.items),
        n_delivered=0,
        n_completed=0,
        pending_window=limits.pending_window,
        deadline_at=now + timedelta(seconds=limits.deadline_s),
        created_by=principal.subject,
        created_at=now,
    )
    db.add(record)
    await db.flush()
    await record_exposure(
        db,
        org_id=org_id,
        item_ids=[i.id for i in drawn.items],
        session_id=record.id,
        delivered=False,
    )
    if mode is SessionMode.ADAPTIVE:
        await adaptive.start(
            db,
            record=record,
            request=adaptive_request or adaptive.AdaptiveRequest(),
            defaults=limits.adaptive,
        )
    return record


async def _draw_from_item_set(
    db: AsyncSession, *, org_id: uuid.UUID, name: str, n: int
) -> DrawnSample:
    """Up to ``n`` items of the set ``name`` for the organisation; ``NotFound`` if no set
    has that name."""
    record = await get_item_set(db, name)
    if record is None:
        raise NotFound(f"no item set is named {name!r}")
    return await draw_item_set_sample(db, org_id=org_id, set_id=record.id, n=n)


async def org_limits(
    db: AsyncSession, *, org_id: uuid.UUID, limits: SessionLimits
) -> SessionLimits:
    """``limits`` with organisation ``org_id``'s own session quotas where it has them."""
    org = await db.get(Organisation, org_id)
    if org is None:
        return limits
    return replace(
        limits,
        max_concurrent=org.max_concurrent_sessions or limits.max_concurrent,
        max_per_period=org.max_sessions_per_period or limits.max_per_period,
    )


async def _check_org_quotas(
    db: AsyncSession, *, org_id: uuid.UUID, limits: SessionLimits, now: datetime
) -> None:
    """409 past the organisation's open-session quota, 429 past its sessions per period:
    its own quotas (``Organisation.max_*``, set in the console) where set, else ``limits``."""
    limits = await org_limits(db, org_id=org_id, limits=limits)
    n_open = await db.scalar(
        select(func.count()).where(
            EvalSession.org_id == org_id, EvalSession.state.in_(OPEN_STATE_VALUES)
        )
    )
    if (n_open or 0) >= limits.max_concurrent:
        raise QuotaExhausted(
            f"quota exhausted: the organisation has {n_open} open sessions "
            f"(at most {limits.max_concurrent}); finish or abort one first"
        )
    since = now - timedelta(seconds=limits.period_s)
    recent = (
        await db.execute(
            select(func.count(), func.min(EvalSession.created_at)).where(
                EvalSession.org_id == org_id, EvalSession.created_at > since
            )
        )
    ).one()
    if recent[0] >= limits.max_per_period:
        retry = (recent[1] + timedelta(seconds=limits.period_s) - now).total_seconds()
        raise TooManyRequests(
            f"quota exhausted: {recent[0]} sessions in the last {limits.period_s} s "
            f"(at most {limits.max_per_period})",
            retry_after=int(retry) + 1,
        )


async def get_session(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> EvalSession:
    """The session if ``principal`` may see it; otherwise ``NotFound`` (revealing nothing)."""
    return await get_visible(db, EvalSession, session_id, principal=principal, noun="session")


def session_counts(record: EvalSession) -> dict[str, int]:
    """How many items are allocated (not yet delivered), pending and completed."""
    undelivered = record.n_items - record.n_delivered
    released = SessionState(record.state) in {SessionState.EXPIRED, SessionState.ABORTED}
    return {
        "allocated": 0 if released else undelivered,
        "pending": record.n_delivered - record.n_completed,
        "completed": record.n_completed,
        "released": undelivered if released else 0,
    }


async def _drive(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> EvalSession:
    """Lock session ``session_id`` and take (or renew) its lease for ``principal``'s token.

    One atomic conditional UPDATE: it succeeds only if nobody holds the lease, this token
    holds it, the holder has been idle longer than ``limits.lease_idle_s``, or the holder's
    token has been revoked."""
    conditions: list[Any] = [EvalSession.id == session_id]
    if not principal.can(Permission.ANY_ORG):
        conditions.append(EvalSession.org_id == principal.org_id)
    free = or_(
        EvalSession.lease_jti.is_(None),
        EvalSession.lease_jti == principal.jti,
        EvalSession.lease_expires_at < now,
        # a revoked token can no longer drive the session, so its lease holds nothing
        # (e.g. a client whose refresh response was lost, back with a token from its key)
        exists().where(RevokedToken.jti == EvalSession.lease_jti),
    )
    statement = (
        update(EvalSession)
        .where(and_(*conditions), free)
        .values(
            lease_jti=principal.jti, lease_expires_at=now + timedelta(seconds=limits.lease_idle_s)
        )
        .returning(EvalSession)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    record = (await db.execute(statement)).scalar_one_or_none()
    if record is not None:
        return record
    held = await get_session(db, principal=principal, session_id=session_id)
    wait = (held.lease_expires_at - now).total_seconds() if held.lease_expires_at else 0
    raise SessionInUse(
        f"session in use: another client is driving session {session_id}; "
        f"it becomes free after {max(1, int(wait) + 1)} s without activity"
    )


def _is_open(state: str, deadline_at: datetime, now: datetime) -> bool:
    """Whether items may still be delivered and answered."""
    return state in OPEN_STATE_VALUES and deadline_at > now


async def _why_nothing_was_drawn(
    db: AsyncSession, *, mode: SessionMode, item_set: str | None = None
) -> str:
    if mode is SessionMode.ANCHOR:
        return "the anchor set has no items left that this organisation has not seen"
    if item_set is not None:
        return (
            f"the item set {item_set!r} has no active items left "
            "that this organisation has not seen"
        )
    if not await sampled_disciplines(db):
        return (
            "no evaluated discipline of the bank has items "
            "(the operator sets them with `proctor bank disciplines --set`)"
        )
    return "the bank has no items left that this organisation has not seen"


def _require_open(record: EvalSession, now: datetime) -> None:
    if record.state not in OPEN_STATE_VALUES:
        raise SessionClosed(f"session {record.id} is {record.state}")
    if record.deadline_at <= now:
        raise SessionClosed(f"session {record.id} passed its deadline and is expiring")


async def next_item(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> DeliveredItem | None:
    """The item to work on: the oldest pending one if the pending window is full (a retry
    gets the same item), else the next allocated one, which becomes pending and is recorded
    as exposed. None when every item has been delivered and answered.

    On PostgreSQL the common delivery is one statement (``single_statement.deliver``);
    whatever it does not cover goes the general way below."""
    if single_statement.applies(db):
        delivered = await _deliver_in_one_statement(
            db, principal=principal, session_id=session_id, limits=limits, now=now
        )
        if delivered is not None:
            return delivered
    retry = await _retry_without_writing(
        db, principal=principal, session_id=session_id, limits=limits, now=now
    )
    if retry is not None:
        return retry
    record = await _drive(db, principal=principal, session_id=session_id, limits=limits, now=now)
    if SessionState(record.state) in ALL_ANSWERED_STATES:
        return None
    _require_open(record, now)
    pending = record.n_delivered - record.n_completed
    if pending >= record.pending_window or record.n_delivered >= record.n_items:
        if not pending:
            return None
        item, _ = await _load_item(db, record=record, position=record.n_completed)
        return item
    if record.mode == SessionMode.ADAPTIVE.value and not principal.can(
        Permission.SESSIONS_ADAPTIVE
    ):  # what it delivers next, and whether, follows the verdicts so far
        raise Forbidden("only admins and evaluators may drive adaptive sessions")
    if record.mode == SessionMode.ADAPTIVE.value and not await _adaptive_goes_on(
        db, record=record, now=now, review=limits.review
    ):
        if pending:
            item, _ = await _load_item(db, record=record, position=record.n_completed)
            return item
        return None
    position = record.n_delivered
    require_item_transition(_state_of(record, position), ItemState.PENDING)
    if record.state == SessionState.CREATED.value:
        require_session_transition(record.state, SessionState.ACTIVE)
        record.state = SessionState.ACTIVE.value
    record.n_delivered = position + 1
    item, family_id = await _load_item(db, record=record, position=position)
    if not await mark_delivered(db, org_id=record.org_id, family_id=family_id):
        raise Conflict(f"item at position {position} is not reserved for this session")
    await db.flush()
    metrics.on_commit(db, metrics.ITEMS_DELIVERED.inc)
    return item


async def _deliver_in_one_statement(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> DeliveredItem | None:
    """The next item, delivered by ``single_statement.deliver``; None if that statement did
    not apply (nothing was written)."""
    row = await single_statement.deliver(
        db, principal=principal, session_id=session_id, now=now, lease_idle_s=limits.lease_idle_s
    )
    if row is None:
        return None
    if not row.n_marked:  # rolled back with the request, like the general path's refusal
        raise Conflict(f"item at position {row.position} is not reserved for this session")
    metrics.on_commit(db, metrics.ITEMS_DELIVERED.inc)
    return _item_of(row, position=row.position, mode=row.mode)


async def _adaptive_goes_on(
    db: AsyncSession, *, record: EvalSession, now: datetime, review: ReviewPolicy
) -> bool:
    """Whether an adaptive session delivers another item (its policy's choice is then at
    position ``n_delivered``); if not, the session is shrunk to what it delivered."""
    run = await adaptive.get_run(db, session_id=record.id)
    if await adaptive.advance(db, record=record, run=run):
        return True
    await adaptive.stop_early(db, record=record, now=now, review=review)
    return False


async def _retry_without_writing(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> DeliveredItem | None:
    """The pending item again, read without locking or writing, when this token holds a
    fresh lease (more than half its idle time left) and the pending window is full: the
    common retry costs no commit, and one statement (the session and its oldest pending
    item read together). None when the full path must decide."""
    row = (
        await db.execute(
            select(
                EvalSession.lease_expires_at,
                EvalSession.n_delivered,
                EvalSession.n_completed,
                EvalSession.n_items,
                EvalSession.pending_window,
                EvalSession.state,
                EvalSession.deadline_at,
                EvalSession.mode,
                *_ITEM_COLUMNS,
            )
            .outerjoin(
                SampleItem,
                and_(
                    SampleItem.sample_id == EvalSession.sample_id,
                    SampleItem.position == EvalSession.n_completed,
                ),
            )
            .outerjoin(Item, Item.id == SampleItem.item_id)
            .where(EvalSession.id == session_id, EvalSession.lease_jti == principal.jti)
        )
    ).one_or_none()
    if row is None or row.lease_expires_at is None or row.id is None:
        return None
    fresh = (row.lease_expires_at - now).total_seconds() > limits.lease_idle_s / 2
    pending = row.n_delivered - row.n_completed
    full = pending >= row.pending_window or row.n_delivered >= row.n_items
    if not (fresh and pending and full and _is_open(row.state, row.deadline_at, now)):
        return None
    return _item_of(row, position=row.n_completed, mode=row.mode)


_ITEM_COLUMNS = (
    Item.id,
    Item.question,
    Item.options,
    Item.qtype,
    Item.discipline,
    Item.language,
    SampleItem.family_id,
)
"""What ``_item_of`` needs of an item."""


def _item_of(row: Any, *, position: int, mode: str) -> DeliveredItem:
    """The client's view of the item in ``row`` (``_ITEM_COLUMNS``) at ``position``."""
    if mode == SessionMode.REPLAY.value:
        return _replay_item(position, row)
    return DeliveredItem(
        position=position,
        item_id=row.id,
        question=row.question,
        options=row.options,
        qtype=row.qtype,
        discipline=row.discipline,
    )


async def _load_item(
    db: AsyncSession, *, record: EvalSession, position: int
) -> tuple[DeliveredItem, uuid.UUID]:
    """The client's view of the item at ``position``, and its family."""
    row = (
        await db.execute(
            select(*_ITEM_COLUMNS)
            .join(SampleItem, SampleItem.item_id == Item.id)
            .where(SampleItem.sample_id == record.sample_id, SampleItem.position == position)
        )
    ).one()
    return _item_of(row, position=position, mode=record.mode), row.family_id


def _replay_item(position: int, row: Any) -> DeliveredItem:
    """A replay session's view of an item: the instruction to continue the beginning of
    the question (options and the rest stay on the server; LLMEval-Fair, Zhang et al., §3.3)."""
    masked = replay_mask(row.question)
    prefix = masked.prefix if masked is not None else row.question
    return DeliveredItem(
        position=position,
        item_id=row.id,
        question=replay_prompt(prefix, language=row.language),
        options=None,
        qtype=REPLAY_QTYPE,
        discipline=row.discipline,
    )


def _state_of(record: EvalSession, position: int) -> ItemState:
    return item_state(
        position,
        n_delivered=record.n_delivered,
        n_completed=record.n_completed,
        session_state=record.state,
    )


async def submit_answer(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    position: int,
    item_id: uuid.UUID,
    answer: str,
    reasoning: str | None,
    limits: SessionLimits,
    now: datetime,
    judges: JudgeAssignment | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    reports: AnswerReports | None = None,
) -> Answer:
    """Accept the answer to the pending item at ``position``; the first answer stands.

    A reasoning trace inside the answer (``<think>...</think>``) is stored apart, in
    ``reasoning`` after any trace sent separately; ``answer`` keeps the final answer, which
    is what gets judged. ``prompt_tokens``/``completion_tokens`` are the client's report of
    what the model spent (cost per model on the leaderboard), ``reports`` why its reply
    ended and how long it took by the client's clock. With ``judges``, the answer
    is put in the scoring outbox for each judge of its panel in the same transaction
    (``server.scoring``), so an accepted answer is always scored.

    ``AlreadyAnswered`` (409) for a position answered before, ``NotPending`` (409) for any
    other item than the oldest pending one.

    On PostgreSQL the common answer is one statement (``single_statement.answer``);
    whatever it does not cover goes the general way, which decides as before."""
    final, trace = split_reasoning(answer)
    reports = reports or AnswerReports()
    accepted = Answer(
        session_id=session_id,
        position=position,
        item_id=item_id,
        answer=final,
        reasoning="\n\n".join(part for part in (reasoning, trace) if part) or None,
        submitted_by=principal.jti,
        submitted_at=now,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=reports.finish_reason,
        reported_latency_s=reports.model_latency_s,
    )
    if single_statement.applies(db) and await single_statement.answer(
        db,
        principal=principal,
        session_id=session_id,
        now=now,
        lease_idle_s=limits.lease_idle_s,
        position=position,
        item_id=item_id,
        answer=accepted.answer,
        reasoning=accepted.reasoning,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        reports=reports,
    ):
        metrics.on_commit(db, metrics.ANSWERS.inc)
        await _enqueue(db, judges=judges, session_id=session_id, position=position, item_id=item_id)
        return accepted
    record = await _drive(db, principal=principal, session_id=session_id, limits=limits, now=now)
    state = _state_of(record, position) if position >= 0 else None
    if state is ItemState.COMPLETED:
        raise AlreadyAnswered(f"position {position} was answered already; the first answer stands")
    _require_open(record, now)
    if state is not ItemState.PENDING or position != record.n_completed:
        raise NotPending(
            f"position {position} is not the pending item (expected position {record.n_completed}"
            + (")" if record.n_delivered > record.n_completed else "; call next first)")
        )
    row = (
        await db.execute(
            select(SampleItem.item_id, Exposure.delivered_at)
            .join(
                Exposure,
                and_(Exposure.org_id == record.org_id, Exposure.family_id == SampleItem.family_id),
            )
            .where(SampleItem.sample_id == record.sample_id, SampleItem.position == position)
        )
    ).one()
    if row.item_id != item_id:
        raise NotPending(f"item {item_id} is not the item at position {position}")
    require_item_transition(state, ItemState.COMPLETED)
    accepted.delivered_at = row.delivered_at or now
    db.add(accepted)
    metrics.on_commit(db, metrics.ANSWERS.inc)
    record.n_completed = position + 1
    if record.n_completed == record.n_items:
        require_session_transition(record.state, SessionState.ANSWERED)
        record.state = SessionState.ANSWERED.value
        record.ended_at = now
    await db.flush()
    await _enqueue(db, judges=judges, session_id=record.id, position=position, item_id=item_id)
    return accepted


async def _enqueue(
    db: AsyncSession,
    *,
    judges: JudgeAssignment | None,
    session_id: uuid.UUID,
    position: int,
    item_id: uuid.UUID,
) -> None:
    """Put the answer at ``position`` in the scoring outbox for each judge of its panel."""
    if judges is None:
        return
    discipline = (
        await db.scalar(select(Item.discipline).where(Item.id == item_id))
        if judges.by_discipline
        else None
    )
    for judge in judges.judges_for(discipline):
        await enqueue_answer(
            db, session_id=session_id, position=position, judge=judge, prompt_version=PROMPT_VERSION
        )


async def end_session(
    db: AsyncSession, *, record: EvalSession, target: SessionState, now: datetime
) -> int:
    """Move ``record`` to ``target`` (expired or aborted), returning its never-delivered
    items to the pool; returns how many families were released."""
    require_session_transition(record.state, target)
    record.state = target.value
    record.ended_at = now
    record.lease_jti = None
    record.lease_expires_at = None
    await db.flush()
    return await release_undelivered(db, org_id=record.org_id, session_id=record.id)


async def abort_session(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID, now: datetime
) -> EvalSession:
    """Abort an open session (row locked first); ``SessionClosed`` if it already ended."""
    record = await get_session(db, principal=principal, session_id=session_id)
    locked = (
        await db.execute(
            select(EvalSession)
            .where(EvalSession.id == record.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    if locked.state not in OPEN_STATE_VALUES:
        raise SessionClosed(f"session {session_id} is {locked.state}")
    await end_session(db, record=locked, target=SessionState.ABORTED, now=now)
    return locked


async def expire_overdue(
    db: AsyncSession, *, now: datetime, org_id: uuid.UUID | None = None
) -> int:
    """Expire every open session past its deadline (of ``org_id``, or of everyone); returns
    how many. Rows another transaction holds are skipped and left for the next sweep."""
    statement = (
        select(EvalSession)
        .where(EvalSession.state.in_(OPEN_STATE_VALUES), EvalSession.deadline_at <= now)
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    )
    if org_id is not None:
        statement = statement.where(EvalSession.org_id == org_id)
    overdue = (await db.execute(statement)).scalars().all()
    # By organisation: each release takes its organisation's sampling lock, and two
    # sweeps taking them in one order cannot deadlock.
    for record in sorted(overdue, key=lambda r: str(r.org_id)):
        await end_session(db, record=record, target=SessionState.EXPIRED, now=now)
    return len(overdue)


async def list_sessions(
    db: AsyncSession,
    *,
    principal: Principal,
    org_id: uuid.UUID | None = None,
    state: SessionState | None = None,
    limit: int = 100,
    offset: int = 0,
    model_id: uuid.UUID | None = None,
    mode: SessionMode | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    states: Collection[SessionState] | None = None,
) -> list[EvalSession]:
    """Sessions visible to ``principal``, newest first: ``limit`` of them from ``offset``,
    of organisation ``org_id`` (ignored for roles without ``Permission.ANY_ORG``, who see
    their own organisation's only), in ``state`` (and in one of ``states``), of model
    ``model_id``, in ``mode``, and created at or after ``created_after`` and before
    ``created_before``."""
    statement = (
        select(EvalSession)
        .order_by(EvalSession.created_at.desc(), EvalSession.id.desc())
        .limit(limit)
        .offset(offset)
    )
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    elif org_id is not None:
        statement = statement.where(EvalSession.org_id == org_id)
    if state is not None:
        statement = statement.where(EvalSession.state == state.value)
    if states is not None:
        statement = statement.where(EvalSession.state.in_([s.value for s in states]))
    if model_id is not None:
        statement = statement.where(EvalSession.model_id == model_id)
    if mode is not None:
        statement = statement.where(EvalSession.mode == mode.value)
    if created_after is not None:
        statement = statement.where(EvalSession.created_at >= created_after)
    if created_before is not None:
        statement = statement.where(EvalSession.created_at < created_before)
    return list((await db.execute(statement)).scalars().all())


async def count_by_state(db: AsyncSession, *, principal: Principal) -> dict[SessionState, int]:
    """How many sessions ``principal`` may see are in each state (every state listed)."""
    statement = select(EvalSession.state, func.count()).group_by(EvalSession.state)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    counts = {SessionState(state): n for state, n in (await db.execute(statement)).tuples()}
    return {state: counts.get(state, 0) for state in SessionState}


async def session_token_ids(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> list[str]:
    """The ids (``jti``) of the tokens this server knows to have driven session
    ``session_id``: the holder of its lease and every token that submitted one of its
    answers (``Answer.submitted_by``), sorted; ``NotFound`` if ``principal`` may not see the
    session.

    Tokens are stateless (JWT) and no token issued is recorded, session-scoped or not: a
    token scoped to this session that never drove it is not found here. Such a token can
    only read this session and drive it while it is open; aborting the session refuses
    every token's work on it. A token found here may be one of the organisation's unscoped
    tokens, which then drove other sessions too."""
    record = await get_session(db, principal=principal, session_id=session_id)
    submitters = select(Answer.submitted_by).where(Answer.session_id == record.id).distinct()
    found = set((await db.execute(submitters)).scalars())
    if record.lease_jti is not None:
        found.add(record.lease_jti)
    return sorted(found)
