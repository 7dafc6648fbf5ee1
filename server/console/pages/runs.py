"""Runs: the runs the server drives, with filters (state, model), their progress, and
pause, resume and cancel; a model's page starts one ("Evaluate").

The figures are those of ``GET /v1/runs`` for the same role (``server.runs.progress``):
items done, pace, ETA, tokens, cost and failures by kind, never correctness. A run's own
page follows it live over Server-Sent Events (``server.console.live``), per session too;
the list reads itself again while a run it lists is live (``data-refresh``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from server.api.dependencies import DbSession, RuntimeDep
from server.api.runtime import Runtime
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission, Principal
from server.console.dependencies import COOKIE, CheckedForm, page
from server.console.live import Figures, LiveReading, event_stream, live_figures
from server.console.nav import NavEntry
from server.console.pages.model_endpoints import problems
from server.console.pages.models import render_model
from server.console.pagination import Pager
from server.console.templating import number, render
from server.errors import InvalidInput, NotFound
from server.runs import service
from server.runs.progress import run_out
from server.runs.schemas import RunIn, RunOut
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


def run_figures(run: RunOut) -> Figures:
    """A run's moving figures by ``data-field`` name, as its page first shows them and as
    its stream sends them; ``s<i>.done`` and ``s<i>.state`` for its i-th session."""
    failures = ", ".join(f"{kind} {n}" for kind, n in sorted(run.failures.items()))
    figures: dict[str, str | int] = {
        "state": run.state.value,
        "items": f"{number(run.items_done)} / {number(run.items_total)}",
        "pace": number(run.answers_per_minute),
        "eta": number(run.eta_s, 0),
        "tokens": f"{number(run.prompt_tokens)} / {number(run.completion_tokens)}",
        "cost": number(run.cost_usd, 4),
        "failures": failures or "—",
        "stop_reason": run.stop_reason or "",
    }
    for index, session in enumerate(run.progress):
        figures[f"s{index}.done"] = f"{number(session.done)} / {number(session.total)}"
        figures[f"s{index}.state"] = session.state.value if session.state else "not open"
    return figures


async def read_run(
    db: AsyncSession, runtime: Runtime, principal: Principal, run_id: uuid.UUID
) -> RunOut:
    """Run ``run_id`` as ``principal`` reads it (``NotFound`` if it may not)."""
    record = await service.get_run(db, principal=principal, run_id=run_id)
    default_items = runtime.limits.default_items
    return run_out(record, principal=principal, default_items=default_items, now=datetime.now(UTC))


@router.get("/console/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request,
    run_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """One run: its figures and each session's progress, followed live until it ends;
    404 if the user may not see it (as the API)."""
    run = await read_run(db, runtime, user.principal, run_id)
    return render(
        request,
        "run.html",
        user=user,
        title=f"Run {str(run.id)[:8]}",
        run=run,
        figures=run_figures(run),
        live=run.state not in ENDED_RUN_STATES,
    )


@router.get("/console/runs/{run_id}/events")
async def run_events_route(
    request: Request,
    run_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> StreamingResponse:
    """``text/event-stream`` of the run's moving figures (``run_figures``) for its page's
    ``data-live``, until the run has ended; 404 if the user may not see it."""
    await service.get_run(db, principal=user.principal, run_id=run_id)

    async def read(tick_db: AsyncSession, principal: Principal) -> LiveReading:
        run = await read_run(tick_db, runtime, principal, run_id)
        return LiveReading(run_figures(run), run.state in ENDED_RUN_STATES)

    return event_stream(
        live_figures(
            runtime,
            secret=request.cookies.get(COOKIE, ""),
            permission=NAV.permission,
            read=read,
            disconnected=request.is_disconnected,
            name=f"run {run_id}",
        )
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
