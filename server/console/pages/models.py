"""Models: the models a user may see with their sessions and leaderboard standing; one
model's sessions, scores over time, disciplines, latency, cost and contamination results.

Leaderboard figures come from one leaderboard computation per request, shown under the
reader's ``Visibility`` as ``GET /v1/leaderboard`` shows them (``pages.leaderboard``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from judge.prompts import PROMPT_VERSION
from server.api.dependencies import DbSession, RuntimeDep
from server.api.runtime import Runtime
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission, Principal
from server.console import plots
from server.console.dependencies import page
from server.console.nav import NavEntry
from server.console.pages.leaderboard import board_for
from server.console.pagination import Pager
from server.console.templating import render
from server.errors import NotFound
from server.leaderboard.cache import cached_session_scores
from server.leaderboard.fields import ContaminationOut, RowOut, Visibility, replay_json
from server.leaderboard.schemas import LeaderboardOut
from server.leaderboard.service import SessionScore
from server.model_endpoints.schemas import CHOICES
from server.model_endpoints.service import EndpointRecord, get_endpoint
from server.orgs.service import list_orgs
from server.registry.models import RegisteredModel
from server.registry.service import (
    SessionCounts,
    get_model,
    list_models,
    model_session_counts,
    model_sessions,
)
from server.runs.progress import run_out
from server.runs.schemas import RunOut
from server.runs.service import list_runs
from server.scoring.visibility import visible_state
from server.sessions.models import EvalSession
from server.sessions.modes import mode_spec
from server.sessions.service import session_counts as item_counts

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/models", "Models", Permission.MODELS_READ)
"""This page's entry in the console's menu (and its main route and permission)."""


async def standings(
    db: AsyncSession, runtime: Runtime, principal: Principal
) -> tuple[dict[str, RowOut], LeaderboardOut | None, dict[str, ContaminationOut]]:
    """Every visible leaderboard row by model id, the board, and the replay results of
    models that are not on it (none without ``LEADERBOARD_READ``); one computation."""
    if not principal.can(Permission.LEADERBOARD_READ):
        return {}, None, {}
    visibility = Visibility.of(principal, runtime.settings.leaderboard_public_fields)
    data, board = await board_for(db, runtime, visibility)
    rows = {str(row.model_id): row for row in board.models}
    replay: dict[str, ContaminationOut] = {}
    if visibility.shows("contamination"):
        for key, rate in data.contamination.replay.items():
            if key not in rows:
                replay[key] = ContaminationOut.model_validate(
                    {"replay": replay_json(rate), "generalisation_gap": None}
                )
    return rows, board, replay


async def org_names(db: AsyncSession, principal: Principal) -> dict[uuid.UUID, str] | None:
    """Organisation names for users who see every organisation (None: only their own)."""
    if not principal.can(Permission.ANY_ORG):
        return None
    return {org.id: org.name for org in await list_orgs(db)}


@dataclass(frozen=True, slots=True)
class ModelLine:
    model: RegisteredModel
    counts: SessionCounts | None
    row: RowOut | None


@router.get(NAV.path, response_class=HTMLResponse)
async def models_page(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The models the user may see (every organisation's for admins and auditors, their
    own for evaluators), oldest first: sessions (all, scored, open), the leaderboard's S
    with its interval and the latest ranked session's S, as far as the role sees them."""
    principal = user.principal
    pager = Pager.of(request.query_params)
    found = await list_models(db, principal=principal, limit=pager.per_page, offset=pager.offset)
    counts = await model_session_counts(db, principal=principal, model_ids=[m.id for m in found])
    rows, board, _ = await standings(db, runtime, principal)
    return render(
        request,
        "models.html",
        user=user,
        title="Models",
        lines=[ModelLine(m, counts.get(m.id), rows.get(str(m.id))) for m in found],
        board=board,
        orgs=await org_names(db, principal),
        pager=pager,
    )


ENDPOINT_NOTICES = {
    "endpoint-saved": "Endpoint saved.",
    "endpoint-removed": "Endpoint removed, with its secret headers.",
}


async def endpoint_of(
    db: AsyncSession, principal: Principal, model_id: uuid.UUID
) -> EndpointRecord | None:
    """The model's endpoint, or None if it has none."""
    try:
        return await get_endpoint(db, principal=principal, model_id=model_id)
    except NotFound:
        return None


LATEST_RUNS = 5
"""Runs of the model its page lists (the Runs page has them all)."""


async def latest_runs(
    db: AsyncSession, runtime: Runtime, principal: Principal, model_id: uuid.UUID
) -> list[RunOut]:
    """The model's newest runs as ``principal`` reads them (none without the right)."""
    if not principal.can(Permission.SESSIONS_READ):
        return []
    records = await list_runs(db, principal=principal, model_id=model_id, limit=LATEST_RUNS)
    now = datetime.now(UTC)
    default = runtime.limits.default_items
    return [run_out(r, principal=principal, default_items=default, now=now) for r in records]


@dataclass(frozen=True, slots=True)
class SessionLine:
    record: EvalSession
    state: str
    completed: int
    score: SessionScore | None


def trend_chart(scores: Sequence[SessionScore]) -> Markup | None:
    """S of every ranked session over time with its 95% interval (None: no session)."""
    points = [
        plots.Interval(s.created_at.strftime("%m-%d"), s.score, s.ci_low, s.ci_high)
        for s in scores
        if s.ranked
    ]
    if not points:
        return None
    return plots.line_chart(
        points, lo=0, hi=100, title="S of each scored ranked session, oldest first"
    )


def discipline_chart(row: RowOut | None) -> Markup | None:
    """Per-discipline scores (10-point scale) ± 1.96 standard errors."""
    if row is None or not row.disciplines:
        return None
    bars = []
    for name, score in sorted(row.disciplines.items()):
        half = 1.96 * score.standard_error if score.standard_error is not None else None
        low = None if half is None or score.score is None else max(0.0, score.score - half)
        high = None if half is None or score.score is None else min(10.0, score.score + half)
        bars.append(plots.Interval(name, score.score, low, high))
    return plots.interval_chart(
        bars, lo=0, hi=10, title="Per-discipline scores (10-point scale) with 95% intervals"
    )


@router.get("/console/models/{model_id}", response_class=HTMLResponse)
async def model_page(
    request: Request,
    model_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.MODELS_READ)],
) -> HTMLResponse:
    """One model (404 unless the user may see its organisation): its endpoint (never a
    secret), its leaderboard standing, a trend of its ranked sessions' S with intervals,
    per-discipline scores, latency and cost, contamination results (as far as the role
    sees the leaderboard's fields), and its sessions newest first, paginated."""
    notice = ENDPOINT_NOTICES.get(request.query_params.get("notice", ""))
    return await render_model(request, db, runtime, user, model_id, notice=notice)


async def render_model(
    request: Request,
    db: AsyncSession,
    runtime: Runtime,
    user: ConsoleUser,
    model_id: uuid.UUID,
    *,
    status_code: int = 200,
    **endpoint_view: Any,
) -> HTMLResponse:
    """The model page; ``endpoint_view`` (a notice, an error, the values entered, a
    check's outcome) goes to its endpoint section (``pages.model_endpoints``)."""
    principal = user.principal
    model = await get_model(db, principal=principal, model_id=model_id)
    pager = Pager.of(request.query_params)
    records = await model_sessions(
        db, principal=principal, model_id=model.id, limit=pager.per_page, offset=pager.offset
    )
    scores = await cached_session_scores(
        db,
        model_id=model.id,
        judges=runtime.judging,
        prompt_version=PROMPT_VERSION,
        refresh_on=runtime.engine,
    )
    by_session = {s.session_id: s for s in scores if mode_spec(s.mode).traits.scored}
    rows, board, replay = await standings(db, runtime, principal)
    row = rows.get(str(model.id))
    orgs = await org_names(db, principal)
    return render(
        request,
        "model.html",
        user=user,
        status_code=status_code,
        title=f"Model {model.name}",
        model=model,
        endpoint=await endpoint_of(db, principal, model.id),
        runs=await latest_runs(db, runtime, principal, model.id),
        endpoint_choices=CHOICES,
        endpoint_view=endpoint_view,
        org=orgs.get(model.org_id) if orgs is not None else None,
        row=row,
        board=board,
        contamination=row.contamination if row is not None else replay.get(str(model.id)),
        trend=trend_chart(scores),
        ranked=sum(1 for s in scores if s.ranked),
        by_discipline=discipline_chart(row),
        sessions=[
            SessionLine(
                r,
                visible_state(principal, r.state).value,
                item_counts(r)["completed"],
                by_session.get(r.id),
            )
            for r in records
        ],
        pager=pager,
    )
