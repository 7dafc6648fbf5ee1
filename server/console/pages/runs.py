"""Runs: the runs the server drives, with filters (state, model), their progress, and
pause, resume and cancel; a model's page starts one ("Evaluate").

The figures are those of ``GET /v1/runs`` for the same role (``server.runs.progress``):
items done, pace, ETA, tokens, cost and failures by kind, never correctness. The page
refreshes itself while a run it lists is live (``data-refresh``: ``static/console.js``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.console.dependencies import CheckedForm, page
from server.console.nav import NavEntry
from server.console.pages.model_endpoints import problems
from server.console.pages.models import render_model
from server.console.pagination import Pager
from server.console.templating import render
from server.errors import InvalidInput, NotFound
from server.runs import service
from server.runs.progress import run_out
from server.runs.schemas import RunIn
from server.runs.states import ENDED_RUN_STATES, RunState

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/runs", "Runs", Permission.SESSIONS_READ)
"""This page's entry in the console's menu (and its main route and permission)."""
Starter = Annotated[ConsoleUser, page(Permission.SESSIONS_CREATE)]
NOTICES = {"run-started": "Run started: the server drives its sessions now."}
ACTIONS = {"pause": service.pause_run, "resume": service.resume_run, "cancel": service.cancel_run}


def _state_filter(raw: str | None) -> RunState | None:
    try:
        return RunState(raw) if raw else None
    except ValueError:
        return None


def _model_filter(raw: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw) if raw else None
    except ValueError:
        return None


@router.get(NAV.path, response_class=HTMLResponse)
async def runs_page(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The runs the user may see, newest first, filtered by ``state`` and ``model``."""
    query = request.query_params
    state, model_id = _state_filter(query.get("state")), _model_filter(query.get("model"))
    pager = Pager.of(query)
    records = await service.list_runs(
        db,
        principal=user.principal,
        state=state,
        model_id=model_id,
        limit=pager.per_page,
        offset=pager.offset,
    )
    now = datetime.now(UTC)
    runs = [
        run_out(
            record,
            principal=user.principal,
            default_items=runtime.limits.default_items,
            now=now,
        )
        for record in records
    ]
    return render(
        request,
        "runs.html",
        user=user,
        title="Runs",
        runs=runs,
        live=any(run.state not in ENDED_RUN_STATES for run in runs),
        states=list(RunState),
        state=state,
        model_id=model_id,
        notice=NOTICES.get(query.get("notice", "")),
        pager=pager,
    )


@router.post("/console/models/{model_id}/runs", response_model=None)
async def start_run(
    request: Request,
    model_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Starter,
    form: CheckedForm,
    background: BackgroundTasks,
) -> Response:
    """Start a run of the model ("Evaluate"); 303 to the runs page, or the model's page
    with the reason (403, 404, 422)."""
    entered = {k: str(form.get(k) or "").strip() for k in ("sessions", "n_items", "cost_cap")}
    body = {"model_id": str(model_id), "mode": str(form.get("mode") or "fixed")}
    names = {"sessions": "sessions", "n_items": "n_items", "cost_cap": "cost_cap_usd"}
    for field, name in names.items():
        if entered[field]:
            body[name] = entered[field]
    try:
        run = await service.start_run(
            db, principal=user.principal, body=RunIn.model_validate(body), limits=runtime.limits
        )
    except (ValidationError, InvalidInput, NotFound) as error:
        detail = problems(error) if isinstance(error, ValidationError) else error.detail
        status = 422 if isinstance(error, ValidationError) else error.status
        return await render_model(
            request, db, runtime, user, model_id, status_code=status, run_error=detail
        )
    background.add_task(runtime.run_waker.wake)  # once committed
    return RedirectResponse(f"/console/runs?model={run.model_id}&notice=run-started", 303)


@router.post("/console/runs/{run_id}/{action}", response_model=None)
async def move_run(
    run_id: uuid.UUID,
    action: str,
    db: DbSession,
    runtime: RuntimeDep,
    user: Starter,
    form: CheckedForm,
    background: BackgroundTasks,
) -> Response:
    """Pause, resume or cancel a run; 303 back to the runs page (409 if its state does not
    allow it, 404 for an unknown action)."""
    move = ACTIONS.get(action)
    if move is None:
        raise NotFound(f"no run action {action[:20]!r}")
    record = await move(db, principal=user.principal, run_id=run_id, now=datetime.now(UTC))
    if action == "resume":
        background.add_task(runtime.run_waker.wake)
    return RedirectResponse(f"/console/runs?model={record.run.model_id}", 303)
