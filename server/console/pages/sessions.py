"""Sessions: the list with filters, and one session's page whose counts follow it live.

``/console/sessions`` lists the sessions the user may see (evaluators: their own
organisation's; admins and auditors: every organisation's). A session's page shows its
state, counts, scoring progress and, if adaptive, its estimate: the figures the JSON API
shows the same role (``GET /v1/sessions/{id}`` and ``.../scoring``), with the figures
that move with single verdicts only where ``server.scoring.visibility`` allows. Those
figures follow the session over Server-Sent Events (``/events``: one short unit of work
per tick, the login checked again each time; ``static/console.js`` applies them). Admins
abort a session and revoke the tokens that drove it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import QueryParams

from clients.sdk.types import FINAL_STATES, AdaptiveSummary
from judge.prompts import PROMPT_VERSION
from server.api.dependencies import DbSession, RuntimeDep, SessionId
from server.api.runtime import Runtime
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission, Principal
from server.auth.service import revoke_token
from server.console.dependencies import COOKIE, CheckedForm, page
from server.console.live import LiveReading, event_stream, live_figures
from server.console.nav import NavEntry
from server.console.pagination import Pager
from server.console.templating import render
from server.errors import SessionClosed
from server.orgs.service import list_orgs
from server.registry.service import get_model, list_models
from server.scoring.assignment import JudgeAssignment
from server.scoring.service import progress
from server.scoring.visibility import shows_verdict_figures, visible_state
from server.sessions import adaptive
from server.sessions.models import EvalSession
from server.sessions.modes import SessionMode, mode_spec
from server.sessions.service import (
    abort_session,
    get_session,
    list_sessions,
    session_counts,
    session_token_ids,
)
from server.sessions.states import OPEN_STATES, SessionState

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/sessions", "Sessions", Permission.SESSIONS_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

HIDDEN = "—"
"""What a figure the role may not see yet reads (``server.scoring.visibility``)."""
PER_PAGE = 50
"""Sessions on one page of the list."""
MODELS_LISTED = 1000
"""The model filter offers at most this many models (any other is still accepted by id)."""

NOTICES = {
    "aborted": "Session aborted: its undelivered items went back to the pool.",
    "tokens-revoked": "The tokens that drove this session are revoked.",
    "no-tokens": "No token is recorded as having driven this session; nothing was revoked.",
}
STATE_BADGES = {
    SessionState.CREATED: "warn",
    SessionState.ACTIVE: "warn",
    SessionState.ANSWERED: "",
    SessionState.SCORED: "ok",
    SessionState.REVIEWED: "ok",
    SessionState.EXPIRED: "bad",
    SessionState.ABORTED: "bad",
}
FILTER_LABELS = {
    "state": "state",
    "org": "organisation",
    "model": "model",
    "mode": "mode",
    "created_from": "created from",
    "created_until": "created until",
}


# --- the list -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filters:
    """The list's filters as the service takes them."""

    states: frozenset[SessionState] | None = None
    org_id: uuid.UUID | None = None
    model_id: uuid.UUID | None = None
    mode: SessionMode | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def shown_states(principal: Principal) -> list[SessionState]:
    """The states a role may filter by: ``reviewed`` reads ``scored`` without live scores."""
    return [s for s in SessionState if visible_state(principal, s.value) is s]


def _uuid(raw: str) -> uuid.UUID:
    return uuid.UUID(raw)


def _day(raw: str) -> datetime:
    """Midnight UTC of ``YYYY-MM-DD``."""
    return datetime.combine(date.fromisoformat(raw), datetime.min.time(), tzinfo=UTC)


def _day_after(raw: str) -> datetime | None:
    """Midnight UTC after the day ``YYYY-MM-DD`` (None after the last day there is)."""
    day = _day(raw)
    return None if day.date() == date.max else day + timedelta(days=1)


def read_filters(query: QueryParams, principal: Principal) -> tuple[Filters, list[str]]:
    """The filters of ``query`` and the labels of those that could not be read (empty
    values mean "any"; the organisation filter only for roles that see every one)."""
    parsers: dict[str, Callable[[str], Any]] = {
        "state": SessionState,
        "model": _uuid,
        "mode": SessionMode,
        "created_from": _day,
        "created_until": _day_after,
    }
    if principal.can(Permission.ANY_ORG):
        parsers["org"] = _uuid
    values: dict[str, Any] = {}
    invalid = []
    for name, parse in parsers.items():
        raw = query.get(name, "").strip()
        if not raw:
            continue
        try:
            values[name] = parse(raw)
        except ValueError:
            invalid.append(FILTER_LABELS[name])
    state: SessionState | None = values.get("state")
    return Filters(
        states=_states_matching(state, principal) if state is not None else None,
        org_id=values.get("org"),
        model_id=values.get("model"),
        mode=values.get("mode"),
        created_after=values.get("created_from"),
        created_before=values.get("created_until"),
    ), invalid


def _states_matching(state: SessionState, principal: Principal) -> frozenset[SessionState]:
    """The stored states shown to ``principal`` as ``state`` reads to it (``reviewed`` is
    ``scored`` to roles without live scores, asked for by name or not)."""
    shown = visible_state(principal, state.value)
    return frozenset(s for s in SessionState if visible_state(principal, s.value) is shown)


@dataclass(frozen=True, slots=True)
class SessionRow:
    record: EvalSession
    state: SessionState
    badge: str
    model: str
    org: str


def model_label(name: str, snapshot: str) -> str:
    return f"{name} ({snapshot})"


@router.get(NAV.path, response_class=HTMLResponse)
async def sessions_page(
    request: Request,
    db: DbSession,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The sessions the user may see, newest first, filtered by state, organisation
    (admins and auditors), model, mode and creation day, 50 a page; 422 with the page and
    a notice naming the filters that could not be read."""
    principal = user.principal
    pager = Pager.of(request.query_params, per_page=PER_PAGE)
    filters, invalid = read_filters(request.query_params, principal)
    records = [] if invalid else await _page_of_sessions(db, principal, filters, pager)
    models = await list_models(db, principal=principal, limit=MODELS_LISTED)
    model_names = {m.id: model_label(m.name, m.api_snapshot) for m in models}
    org_names = {org.id: org.name for org in await list_orgs(db)}
    rows = [
        SessionRow(
            record=record,
            state=visible_state(principal, record.state),
            badge=STATE_BADGES[visible_state(principal, record.state)],
            model=model_names.get(record.model_id, str(record.model_id)),
            org=org_names.get(record.org_id, str(record.org_id)),
        )
        for record in records
    ]
    sees_orgs = principal.can(Permission.ANY_ORG)
    return render(
        request,
        "sessions.html",
        user=user,
        title="Sessions",
        status_code=422 if invalid else 200,
        rows=rows,
        pager=pager,
        error=("Check these filters: " + ", ".join(invalid)) if invalid else None,
        query=request.query_params,
        states=shown_states(principal),
        modes=list(SessionMode),
        models=[(m.id, model_names[m.id], org_names.get(m.org_id, "")) for m in models],
        orgs=sorted(org_names.items(), key=lambda item: item[1]) if sees_orgs else None,
    )


async def _page_of_sessions(
    db: AsyncSession, principal: Principal, filters: Filters, pager: Pager
) -> list[EvalSession]:
    return await list_sessions(
        db,
        principal=principal,
        org_id=filters.org_id,
        states=filters.states,
        model_id=filters.model_id,
        mode=filters.mode,
        created_after=filters.created_after,
        created_before=filters.created_before,
        limit=pager.per_page,
        offset=pager.offset,
    )


# --- one session ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reading:
    """A session as its page shows it to one role at one moment."""

    record: EvalSession
    figures: dict[str, str | int]
    """The figures that change while it runs, by ``data-field`` name."""
    summary: AdaptiveSummary | None
    shows_verdicts: bool
    finished: bool
    """Nothing on the page moves any more: the session is in a final state and no answer
    of it waits for a judge."""


async def read_session(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID, judges: JudgeAssignment
) -> Reading:
    """Session ``session_id`` as ``principal`` may see it (``NotFound`` otherwise): its
    counts (as ``GET /v1/sessions/{id}``), its scoring progress (as ``.../scoring``, for
    ``judges`` and the current prompt version) and, if adaptive, its estimate; points,
    review counts and the estimate only where ``shows_verdict_figures`` allows."""
    record = await get_session(db, principal=principal, session_id=session_id)
    shown = shows_verdict_figures(principal, record.state)
    scoring = await progress(db, session_id=record.id, judges=judges, prompt_version=PROMPT_VERSION)
    counts = session_counts(record)
    waiting = scoring.queued + scoring.leased
    figures: dict[str, str | int] = {
        "state": visible_state(principal, record.state).value,
        "n_items": record.n_items,
        "n_delivered": record.n_delivered,
        "n_completed": record.n_completed,
        "percent": round(100 * record.n_completed / record.n_items) if record.n_items else 0,
        **counts,
        "answers": scoring.answers,
        "judged": scoring.scored + scoring.needs_review,
        "waiting": waiting,
        "scored": scoring.scored if shown else HIDDEN,
        "needs_review": scoring.needs_review if shown else HIDDEN,
        "points": scoring.points if shown else HIDDEN,
    }
    summary = await mode_spec(record.mode).summary(db, record=record, judges=judges)
    if summary is not None:
        if not shown:
            summary = adaptive.without_verdict_figures(summary)
        figures.update(adaptive_figures(summary))
    finished = SessionState(record.state) in FINAL_STATES and waiting == 0
    return Reading(record, figures, summary, shown, finished)


def adaptive_figures(summary: AdaptiveSummary) -> dict[str, str | int]:
    """An adaptive session's moving figures as the page writes them."""

    def number(value: float | None) -> str:
        return HIDDEN if value is None else f"{value:.1f}"

    return {
        "estimate": number(summary.estimate),
        "halfwidth": HIDDEN if summary.halfwidth is None else f"± {summary.halfwidth:.1f}",
        "n_scored": HIDDEN if summary.n_scored is None else summary.n_scored,
        "checks": HIDDEN if summary.checks is None else summary.checks,
        "stop_reason": HIDDEN if summary.stop_reason is None else str(summary.stop_reason),
    }


async def render_session(
    request: Request,
    db: AsyncSession,
    runtime: Runtime,
    user: ConsoleUser,
    session_id: uuid.UUID,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    principal = user.principal
    reading = await read_session(
        db, principal=principal, session_id=session_id, judges=runtime.judging
    )
    record = reading.record
    model = await get_model(db, principal=principal, model_id=record.model_id)
    org = next((o.name for o in await list_orgs(db) if o.id == record.org_id), str(record.org_id))
    state = visible_state(principal, record.state)
    return render(
        request,
        "session.html",
        user=user,
        title=f"Session {record.id}",
        status_code=status_code,
        session=record,
        state=state,
        badge=STATE_BADGES[state],
        is_open=state in OPEN_STATES,
        figures=reading.figures,
        summary=reading.summary,
        shows_verdicts=reading.shows_verdicts,
        finished=reading.finished,
        model=model_label(model.name, model.api_snapshot),
        org=org,
        judges=list(runtime.judging.every_judge),
        prompt_version=PROMPT_VERSION,
        notice=NOTICES.get(request.query_params.get("notice", "")),
        error=error,
    )


@router.get("/console/sessions/{session_id}", response_class=HTMLResponse)
async def session_page(
    request: Request,
    session_id: SessionId,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.SESSIONS_READ)],
) -> HTMLResponse:
    """One session: state, mode, model, organisation, times, counts with a progress bar,
    scoring progress and (adaptive sessions) the estimate, following the session live;
    404 if the user may not see it (as the API). Points, review counts and the estimate
    only for admins and auditors until the session is scored. Admins get the abort and
    revoke-tokens forms."""
    return await render_session(request, db, runtime, user, session_id)


# --- the live stream ------------------------------------------------------------------


def session_events(
    runtime: Runtime,
    *,
    secret: str,
    session_id: uuid.UUID,
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[str]:
    """The SSE stream of session ``session_id`` (``server.console.live``): its moving
    figures as the session's page shows them, until it is final and no answer of it waits
    for a judge."""

    async def read(db: AsyncSession, principal: Principal) -> LiveReading:
        reading = await read_session(
            db, principal=principal, session_id=session_id, judges=runtime.judging
        )
        return LiveReading(reading.figures, reading.finished)

    return live_figures(
        runtime,
        secret=secret,
        permission=Permission.SESSIONS_READ,
        read=read,
        disconnected=disconnected,
        name=f"session {session_id}",
    )


@router.get("/console/sessions/{session_id}/events")
async def session_events_route(
    request: Request,
    session_id: SessionId,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.SESSIONS_READ)],
) -> StreamingResponse:
    """``text/event-stream`` of the session's moving figures (``session_events``) for its
    page's ``data-live``; 404 if the user may not see the session."""
    await get_session(db, principal=user.principal, session_id=session_id)
    stream = session_events(
        runtime,
        secret=request.cookies.get(COOKIE, ""),
        session_id=session_id,
        disconnected=request.is_disconnected,
    )
    return event_stream(stream)


# --- actions --------------------------------------------------------------------------


@router.post("/console/sessions/{session_id}/abort", response_class=HTMLResponse)
async def abort(
    request: Request,
    session_id: SessionId,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.SESSIONS_ABORT)],
    form: CheckedForm,
) -> Response:
    """Abort an open session (admins), as ``POST /v1/admin/sessions/{id}/abort``: its
    undelivered items go back to the pool and no token may work on it any more. A session
    that has ended already: its page again with the reason (409)."""
    try:
        await abort_session(db, principal=user.principal, session_id=session_id, now=_now())
    except SessionClosed as closed:
        return await render_session(
            request, db, runtime, user, session_id, error=closed.detail, status_code=409
        )
    return RedirectResponse(f"/console/sessions/{session_id}?notice=aborted", status_code=303)


@router.post("/console/sessions/{session_id}/revoke-tokens")
async def revoke_tokens(
    session_id: SessionId,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.TOKENS_REVOKE)],
    form: CheckedForm,
) -> Response:
    """Revoke the tokens that drove this session (admins), as
    ``POST /v1/admin/tokens/revoke`` revokes one: the holder of its lease and every token
    that submitted one of its answers (``session_token_ids``).

    The server keeps no record of the tokens it issues (they are stateless JWTs), so a
    token scoped to this session that never drove it cannot be found and stays valid; it
    can read this session and, while the session is open, drive it. To refuse every token
    at once, abort the session. A token found may be one of the organisation's unscoped
    tokens: revoking it stops its other sessions' work too, until the client exchanges
    its key again (only revoking the key ends that, on the Organisations page). Each
    revocation is kept until the token would have expired anyway."""
    settings = runtime.settings
    until = _now() + timedelta(seconds=settings.token_max_age_s + settings.token_leeway_s)
    found = await session_token_ids(db, principal=user.principal, session_id=session_id)
    for jti in found:
        await revoke_token(db, jti=jti, expires_at=until)  # False: it was revoked already
    notice = "tokens-revoked" if found else "no-tokens"
    return RedirectResponse(f"/console/sessions/{session_id}?notice={notice}", status_code=303)


def _now() -> datetime:
    return datetime.now(UTC)
