"""``/v1/runs``: start an evaluation run the server drives, follow it, pause, resume or
cancel it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Path, Query

from server.api.dependencies import DbSession, RuntimeDep, SessionsCreator, SessionsReader
from server.api.openapi import answers
from server.api.runtime import Runtime
from server.auth.permissions import Principal
from server.errors import Conflict, NotFound
from server.runs import service
from server.runs.progress import run_out
from server.runs.schemas import RunIn, RunOut
from server.runs.service import RunRecord
from server.runs.states import RunState

router = APIRouter(tags=["runs"])
RunId = Annotated[uuid.UUID, Path(description="The run's id.")]


def _out(record: RunRecord, runtime: Runtime, principal: Principal) -> RunOut:
    return run_out(
        record,
        principal=principal,
        default_items=runtime.limits.default_items,
        now=datetime.now(UTC),
    )


@router.post("/v1/runs", response_model=RunOut, status_code=201, operation_id="runs.start")
@answers(NotFound)
async def start_run(
    body: RunIn,
    db: DbSession,
    runtime: RuntimeDep,
    principal: SessionsCreator,
    background: BackgroundTasks,
) -> RunOut:
    """Queue a run: the server drives the model's endpoint through ``sessions`` new
    sessions, opened under the usual rules (quotas, exposure, fresh samples) as the caller.
    404 if the model has no endpoint."""
    run = await service.start_run(db, principal=principal, body=body, limits=runtime.limits)
    background.add_task(runtime.run_waker.wake)  # once committed and answered
    record = await service.get_run(db, principal=principal, run_id=run.id)
    return _out(record, runtime, principal)


@router.get("/v1/runs", response_model=list[RunOut], operation_id="runs.list")
async def list_runs(
    db: DbSession,
    runtime: RuntimeDep,
    principal: SessionsReader,
    state: Annotated[RunState | None, Query(description="Only runs in this state.")] = None,
    model_id: Annotated[uuid.UUID | None, Query(description="Only this model's runs.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[RunOut]:
    """The runs the caller may see, newest first."""
    records = await service.list_runs(
        db, principal=principal, state=state, model_id=model_id, limit=limit, offset=offset
    )
    return [_out(record, runtime, principal) for record in records]


@router.get("/v1/runs/{run_id}", response_model=RunOut, operation_id="runs.get")
@answers(NotFound)
async def get_run(
    run_id: RunId, db: DbSession, runtime: RuntimeDep, principal: SessionsReader
) -> RunOut:
    """The run and its progress: items done of the total, pace, ETA, tokens, cost and
    failures by kind; per session, items answered (never a correctness figure)."""
    return _out(await service.get_run(db, principal=principal, run_id=run_id), runtime, principal)


@router.post("/v1/runs/{run_id}/pause", response_model=RunOut, operation_id="runs.pause")
@answers(NotFound, Conflict)
async def pause_run(
    run_id: RunId, db: DbSession, runtime: RuntimeDep, principal: SessionsCreator
) -> RunOut:
    """Send no more items to the model (calls in flight finish); 409 unless queued or
    running."""
    now = datetime.now(UTC)
    record = await service.pause_run(db, principal=principal, run_id=run_id, now=now)
    return _out(record, runtime, principal)


@router.post("/v1/runs/{run_id}/resume", response_model=RunOut, operation_id="runs.resume")
@answers(NotFound, Conflict)
async def resume_run(
    run_id: RunId,
    db: DbSession,
    runtime: RuntimeDep,
    principal: SessionsCreator,
    background: BackgroundTasks,
) -> RunOut:
    """Queue a paused run again; 409 unless paused."""
    now = datetime.now(UTC)
    record = await service.resume_run(db, principal=principal, run_id=run_id, now=now)
    background.add_task(runtime.run_waker.wake)
    return _out(record, runtime, principal)


@router.post("/v1/runs/{run_id}/cancel", response_model=RunOut, operation_id="runs.cancel")
@answers(NotFound, Conflict)
async def cancel_run(
    run_id: RunId, db: DbSession, runtime: RuntimeDep, principal: SessionsCreator
) -> RunOut:
    """End the run and abort its open sessions; 409 if it has ended."""
    now = datetime.now(UTC)
    record = await service.cancel_run(db, principal=principal, run_id=run_id, now=now)
    return _out(record, runtime, principal)
