"""``GET /v1/admin/bank/health``: the latest health snapshot; ``.../history``: the bank
figures of earlier ones, for trends. Admins and auditors; nothing is computed on a request
(snapshots come from the scheduled job and ``proctor bank health``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from bank.models import HealthSnapshot
from server.api.dependencies import BankHealthReader, DbSession
from server.api.openapi import answers
from server.errors import NotFound
from server.health.schemas import HealthOut, SnapshotSummaryOut
from server.health.service import latest_snapshot

router = APIRouter(tags=["bank health"])


class ItemsShown(StrEnum):
    ALL = "all"
    FLAGGED = "flagged"
    NONE = "none"


@router.get("/v1/admin/bank/health", response_model=HealthOut, operation_id="bank.health")
@answers(NotFound)
async def read_health(
    db: DbSession,
    _: BankHealthReader,
    items: ItemsShown = ItemsShown.ALL,
    population: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> HealthOut:
    """The latest snapshot (of ``population``, as given to the job or the command, when
    named): population, choices, bank, strata, items and subsets."""
    snapshot = await latest_snapshot(db, population=population)
    if snapshot is None:
        raise NotFound("no health snapshot yet: run `proctor bank health` or wait for the job")
    report: dict[str, Any] = dict(snapshot.report)
    shown = report.get("items", {})
    if items is ItemsShown.FLAGGED:
        shown = {k: v for k, v in shown.items() if v.get("flags")}
    elif items is ItemsShown.NONE:
        shown = {}
    return HealthOut.model_validate(
        {**report, "items": shown, "id": snapshot.id, "computed_at": snapshot.computed_at}
    )


@router.get(
    "/v1/admin/bank/health/history",
    response_model=list[SnapshotSummaryOut],
    operation_id="bank.health_history",
)
async def read_health_history(
    db: DbSession,
    _: BankHealthReader,
    population: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[SnapshotSummaryOut]:
    """Newest first: each snapshot's time, population and bank figures (of one
    population when named: figures of different populations do not compare)."""
    statement = (
        select(
            HealthSnapshot.id,
            HealthSnapshot.computed_at,
            HealthSnapshot.population,
            HealthSnapshot.bank,
        )
        .order_by(HealthSnapshot.computed_at.desc(), HealthSnapshot.id)
        .limit(limit)
    )
    if population is not None:
        statement = statement.where(HealthSnapshot.population_text == population)
    return [
        SnapshotSummaryOut(
            id=row.id, computed_at=row.computed_at, population=row.population, bank=row.bank
        )
        for row in await db.execute(statement)
    ]
