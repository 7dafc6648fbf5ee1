"""``/v1/admin/judges`` (the gate of every configured judge) and
``/v1/admin/calibration-sets`` (frozen sets and the runs of one). Reading needs
``judge:read`` (admins, auditors), freezing a set ``judge:manage`` (admins). Nothing here
calls a judge: runs come from ``proctor judge calibrate`` and the drift check."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path
from sqlalchemy import select

from server.api.dependencies import DbSession, JudgeManager, JudgeReader, RuntimeDep
from server.calibration import service
from server.calibration.gate import GateStatus, gate_report
from server.calibration.models import CalibrationSet
from server.calibration.schemas import (
    CalibrationRunOut,
    CalibrationSetIn,
    CalibrationSetOut,
    CalibrationSetRef,
    JudgeGateOut,
    JudgesOut,
)
from server.errors import InvalidInput, NotFound
from server.scoring.judges import NO_JUDGE
from server.scoring.models import JudgeCalibration

router = APIRouter(tags=["judges"])


@router.get("/v1/admin/judges", response_model=JudgesOut, operation_id="judges.list")
async def read_judges(db: DbSession, runtime: RuntimeDep, _: JudgeReader) -> JudgesOut:
    """Every configured judge: its gate status with the figures and intervals it was judged
    on, whether it is drifting, and which judge is the default."""
    report = await gate_report(db, runtime.settings)
    default = report.default
    calibration_set = (
        CalibrationSetRef(id=report.set_id, name=report.set_name, version=report.set_version)
        if report.set_id is not None and report.set_name and report.set_version
        else None
    )
    runs = await service.runs_by_id(db, run_ids=[g.run.id for g in report.judges if g.run])
    return JudgesOut(
        calibration_set=calibration_set,
        min_kappa=report.min_kappa,
        prompt_version=report.prompt_version,
        default=default or NO_JUDGE,
        judges=[
            JudgeGateOut(
                name=gate.judge,
                model=gate.model,
                status=gate.status,
                reason=gate.reason,
                eligible=gate.eligible,
                drifting=gate.status is GateStatus.DRIFTING,
                default=gate.judge == default,
                run=CalibrationRunOut.model_validate(runs[gate.run.id]) if gate.run else None,
            )
            for gate in report.judges
        ],
    )


@router.get(
    "/v1/admin/calibration-sets",
    response_model=list[CalibrationSetOut],
    operation_id="judges.list_calibration_sets",
)
async def list_calibration_sets(db: DbSession, _: JudgeReader) -> list[CalibrationSetOut]:
    """Every version of every calibration set, newest first (never their answers)."""
    return [CalibrationSetOut.model_validate(s) for s in await service.list_sets(db)]


@router.post(
    "/v1/admin/calibration-sets",
    response_model=CalibrationSetOut,
    status_code=201,
    operation_id="judges.create_calibration_set",
)
async def create_calibration_set(
    body: CalibrationSetIn, db: DbSession, principal: JudgeManager
) -> CalibrationSetOut:
    """Freeze the answers people scored in the review queue (several reviewers: their mean,
    rounded half up) as the next version of ``name``. 422 when nobody has scored anything
    yet."""
    try:
        record = await service.set_from_review(db, name=body.name, created_by=principal.subject)
    except (service.EmptySetError, service.SetNameError) as error:
        raise InvalidInput(str(error)) from None
    return CalibrationSetOut.model_validate(record)


@router.get(
    "/v1/admin/calibration-sets/{set_id}/runs",
    response_model=list[CalibrationRunOut],
    operation_id="judges.calibration_runs",
)
async def list_calibration_runs(
    db: DbSession,
    _: JudgeReader,
    set_id: Annotated[uuid.UUID, Path(description="Calibration set version id (a UUID).")],
) -> list[CalibrationRunOut]:
    """The judges' runs on one set version, newest first (full and drift runs)."""
    if await db.get(CalibrationSet, set_id) is None:
        raise NotFound(f"no calibration set {set_id}")
    rows = (
        await db.execute(
            select(JudgeCalibration)
            .where(JudgeCalibration.set_id == set_id)
            .order_by(JudgeCalibration.created_at.desc())
        )
    ).scalars()
    return [CalibrationRunOut.model_validate(row) for row in rows]
