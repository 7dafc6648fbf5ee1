"""``/v1/sessions``: create, read, take the next item, answer; admin list and abort."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Response

from server.api.dependencies import (
    AllSessionsLister,
    DbSession,
    OwnSessionsAborter,
    RuntimeDep,
    SessionId,
    SessionsAborter,
    SessionsCreator,
    SessionsDriver,
    SessionsReader,
)
from server.api.openapi import answers
from server.auth.permissions import Principal
from server.errors import (
    AlreadyAnswered,
    Conflict,
    NotFound,
    NotPending,
    QuotaExhausted,
    SessionClosed,
    SessionInUse,
)
from server.scoring.assignment import JudgeAssignment
from server.scoring.visibility import shows_verdict_figures, visible_state
from server.sessions import adaptive, commitment, delivery, service
from server.sessions import answers as session_answers
from server.sessions.models import EvalSession
from server.sessions.modes import mode_spec
from server.sessions.options import AdaptiveRequest
from server.sessions.schemas import (
    AnswerAccepted,
    AnswerIn,
    CommitmentOut,
    ItemOut,
    SessionCreate,
    SessionOut,
)
from server.sessions.states import SessionState

router = APIRouter(tags=["sessions"])
Limit = Annotated[int, Query(ge=1, le=1000)]


def _now() -> datetime:
    return datetime.now(UTC)


@router.post(
    "/v1/sessions", response_model=SessionOut, status_code=201, operation_id="sessions.create"
)
@answers(Conflict, NotFound, QuotaExhausted)
async def create_session(
    body: SessionCreate, db: DbSession, runtime: RuntimeDep, principal: SessionsCreator
) -> SessionOut:
    """Open a session for a registered model: a fresh sample of unseen items is allocated
    (with ``item_set``: from that named item set; admins and evaluators only)."""
    record = await service.create_session(
        db,
        principal=principal,
        model_id=body.model_id,
        n_items=body.n_items,
        limits=runtime.limits,
        now=_now(),
        judges=runtime.judging,
        mode=body.mode,
        adaptive_request=_adaptive_request(body),
        item_set=body.item_set,
    )
    return await _session_out(db, record, principal, runtime.judging)


def _adaptive_request(body: SessionCreate) -> AdaptiveRequest | None:
    if body.adaptive is None:
        return None
    return AdaptiveRequest(**body.adaptive.model_dump())


async def _session_out(
    db: DbSession, record: EvalSession, principal: Principal, judges: JudgeAssignment
) -> SessionOut:
    """The session with its sample commitment and, if adaptive, its policy and estimate:
    the figures that move with single verdicts only where they may be shown
    (``shows_verdict_figures``)."""
    committed = await commitment.of_session(db, record)
    summary = await mode_spec(record.mode).summary(db, record=record, judges=judges)
    if summary is None:
        return _shown(SessionOut.of(record, commitment=committed), principal)
    if not shows_verdict_figures(principal, record.state):
        summary = adaptive.without_verdict_figures(summary)
    return _shown(SessionOut.of(record, summary, commitment=committed), principal)


def _shown(out: SessionOut, principal: Principal) -> SessionOut:
    """``out`` with the state ``principal`` may see (``visible_state``)."""
    return out.model_copy(update={"state": visible_state(principal, out.state)})


async def _sessions_out(
    db: DbSession, records: list[EvalSession], principal: Principal
) -> list[SessionOut]:
    committed = await commitment.of_sessions(db, records)
    return [_shown(SessionOut.of(r, commitment=committed[r.id]), principal) for r in records]


@router.get("/v1/sessions", response_model=list[SessionOut], operation_id="sessions.list")
async def list_own_sessions(
    db: DbSession, principal: SessionsReader, limit: Limit = 100
) -> list[SessionOut]:
    """Your organisation's sessions, newest first (every organisation's for auditors)."""
    return await _sessions_out(
        db, await service.list_sessions(db, principal=principal, limit=limit), principal
    )


@router.get("/v1/sessions/{session_id}", response_model=SessionOut, operation_id="sessions.get")
async def read_session(
    session_id: SessionId, db: DbSession, runtime: RuntimeDep, principal: SessionsReader
) -> SessionOut:
    """State and counts (allocated, pending, completed) of one session; for an adaptive
    session also its policy, estimate and interval."""
    record = await service.get_session(db, principal=principal, session_id=session_id)
    return await _session_out(db, record, principal, runtime.judging)


@router.get(
    "/v1/sessions/{session_id}/next",
    response_model=ItemOut,
    responses={204: {"description": "Every item has been delivered and answered."}},
    operation_id="sessions.next",
)
@answers(Conflict, SessionClosed, SessionInUse)
async def next_item(
    session_id: SessionId, db: DbSession, runtime: RuntimeDep, principal: SessionsDriver
) -> ItemOut | Response:
    """The item to answer now; the same pending item again on retry; 204 when done."""
    item = await delivery.next_item(
        db,
        principal=principal,
        session_id=session_id,
        limits=runtime.limits,
        now=_now(),
        judges=runtime.judging,
    )
    if item is None:
        return Response(status_code=204)
    return ItemOut.model_validate(item, from_attributes=True)


@router.post(
    "/v1/sessions/{session_id}/answers",
    response_model=AnswerAccepted,
    status_code=201,
    operation_id="sessions.answer",
)
@answers(AlreadyAnswered, NotPending, SessionClosed, SessionInUse)
async def submit_answer(
    session_id: SessionId,
    body: AnswerIn,
    db: DbSession,
    runtime: RuntimeDep,
    principal: SessionsDriver,
    background: BackgroundTasks,
) -> AnswerAccepted:
    """Answer the pending item; 409 for a second answer or another item (the first stays).

    The answer is queued for scoring in the same transaction; the scoring workers are woken
    after the response (the commit happens before it)."""
    accepted = await session_answers.submit_answer(
        db,
        principal=principal,
        session_id=session_id,
        submission=body.submission(),
        limits=runtime.limits,
        now=_now(),
        judges=runtime.judging,
    )
    background.add_task(runtime.waker.wake)
    return AnswerAccepted.model_validate(accepted, from_attributes=True)


@router.get("/v1/admin/sessions", response_model=list[SessionOut], operation_id="sessions.list_all")
async def admin_list_sessions(
    db: DbSession,
    principal: AllSessionsLister,
    org_id: uuid.UUID | None = None,
    state: SessionState | None = None,
    limit: Limit = 100,
) -> list[SessionOut]:
    """Every organisation's sessions, filtered by organisation and state."""
    return await _sessions_out(
        db,
        await service.list_sessions(
            db, principal=principal, org_id=org_id, state=state, limit=limit
        ),
        principal,
    )


@router.post(
    "/v1/sessions/{session_id}/abort", response_model=SessionOut, operation_id="sessions.abort"
)
@answers(SessionClosed)
async def abort_own_session(
    session_id: SessionId, db: DbSession, runtime: RuntimeDep, principal: OwnSessionsAborter
) -> SessionOut:
    """Abort an open session of your organisation (a run that broke): it stops delivering,
    its undelivered items go back to the pool, the delivered ones stay exposed, and the
    organisation's session slot is free again. The reply shows what a read of the session
    shows you, nothing more."""
    record = await service.abort_session(db, principal=principal, session_id=session_id, now=_now())
    return await _session_out(db, record, principal, runtime.judging)


@router.post(
    "/v1/admin/sessions/{session_id}/abort",
    response_model=SessionOut,
    operation_id="sessions.admin_abort",
)
@answers(SessionClosed)
async def admin_abort_session(
    session_id: SessionId, db: DbSession, principal: SessionsAborter
) -> SessionOut:
    """Abort an open session of any organisation; its undelivered items go back to the
    pool."""
    record = await service.abort_session(db, principal=principal, session_id=session_id, now=_now())
    return SessionOut.of(record, commitment=await commitment.of_session(db, record))


@router.get(
    "/v1/sessions/{session_id}/commitment",
    response_model=CommitmentOut,
    response_model_exclude_unset=True,  # the source exactly as recorded: no added nulls,
    operation_id="sessions.commitment",
)
async def read_commitment(
    session_id: SessionId, db: DbSession, principal: SessionsReader
) -> CommitmentOut:
    """The commitment to the session's sample; once the session is scored, also its seed,
    salt, source and item ids in drawn order, so anyone can recompute it (the SDK's
    ``verify_commitment``). 404 where ``GET /v1/sessions/{id}`` is."""
    opened = await commitment.reveal(db, principal=principal, session_id=session_id)
    return CommitmentOut.model_validate(opened)
