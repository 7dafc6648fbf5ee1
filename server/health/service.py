"""Bank health on the server's own verdicts: collect them into a response matrix, compute
the report off the event loop, store it as a snapshot, and flag items through the one
status-change function.

Which verdicts: readable scores (not awaiting review) of fixed and adaptive sessions; a
response's score is the mean over its judges, and a model's score on an item is the mean
over its responses. A response judged by several judges whose correctness (s >= 2)
differs counts as a disagreement.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.health.labels import ItemLabels
from bank.health.population import Population, parse_population
from bank.health.report import HealthOptions, HealthReport, health_report
from bank.health.responses import FloatArray, IntArray, ModelInfo, Responses
from bank.item_status import ItemStatus, change_status
from bank.models import HealthSnapshot, Item
from clients.sdk.types import SessionMode
from judge.ranking.scores import MAX_SCORE
from server.database import unit_of_work
from server.registry.models import RegisteredModel
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession

HEALTH_ACTOR = "health-job"
READ_MODES = (SessionMode.FIXED.value, SessionMode.ADAPTIVE.value)
"""Sessions whose verdicts health reads: replay and anchor sessions measure
contamination on items chosen for it, not the bank's ordinary use."""


@dataclass(frozen=True, slots=True)
class CollectedVerdicts:
    """The server's verdicts as a health input."""

    responses: Responses
    labels: ItemLabels
    item_uuids: tuple[uuid.UUID, ...]
    judge_disagreement: FloatArray
    judged: IntArray
    """Per item, responses scored by several judges."""
    watermark: int
    """The highest verdict id read."""


async def collect_verdicts(db: AsyncSession) -> CollectedVerdicts:
    rows = (
        await db.execute(
            select(
                Verdict.id,
                Verdict.session_id,
                Verdict.position,
                Verdict.score,
                EvalSession.model_id,
                Answer.item_id,
            )
            .join(
                Answer,
                (Answer.session_id == Verdict.session_id) & (Answer.position == Verdict.position),
            )
            .join(EvalSession, EvalSession.id == Verdict.session_id)
            .where(Verdict.score.is_not(None), EvalSession.mode.in_(READ_MODES))
        )
    ).all()
    model_ids = sorted({r.model_id for r in rows}, key=str)
    item_ids = sorted({r.item_id for r in rows}, key=str)
    models = await _model_infos(db, model_ids)
    labels, families = await _item_labels(db, item_ids)
    model_of = {m: i for i, m in enumerate(model_ids)}
    item_of = {m: i for i, m in enumerate(item_ids)}
    response_of: dict[tuple[uuid.UUID, int], int] = {}
    response = np.empty(len(rows), dtype=np.int64)
    for k, r in enumerate(rows):
        response[k] = response_of.setdefault((r.session_id, r.position), len(response_of))
    n_responses = len(response_of)
    score = np.array([r.score for r in rows], dtype=np.float64) / MAX_SCORE
    cell_item = np.zeros(n_responses, dtype=np.int64)
    cell_model = np.zeros(n_responses, dtype=np.int64)
    for k, r in enumerate(rows):
        cell_item[response[k]] = item_of[r.item_id]
        cell_model[response[k]] = model_of[r.model_id]
    judges = np.bincount(response, minlength=n_responses)
    y = np.bincount(response, score, minlength=n_responses) / np.maximum(judges, 1)
    correct = np.bincount(response, score >= 2 / MAX_SCORE - 1e-9, minlength=n_responses)
    disagree = (judges >= 2) & (correct > 0) & (correct < judges)
    cells, cell_index = np.unique(
        cell_item * max(1, len(model_ids)) + cell_model, return_inverse=True
    )
    totals = np.bincount(cell_index, y)
    counts = np.bincount(cell_index)
    responses = Responses.from_cells(
        [str(i) for i in item_ids],
        models,
        cells // max(1, len(model_ids)),
        cells % max(1, len(model_ids)),
        totals / counts,
        families,
    )
    multi = np.bincount(cell_item[judges >= 2], minlength=len(item_ids))
    disagreements = np.bincount(cell_item[disagree], minlength=len(item_ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(multi > 0, disagreements / np.maximum(multi, 1), np.nan)
    return CollectedVerdicts(
        responses=responses,
        labels=labels,
        item_uuids=tuple(item_ids),
        judge_disagreement=share,
        judged=multi.astype(np.int64),
        watermark=max((r.id for r in rows), default=0),
    )


async def _model_infos(db: AsyncSession, model_ids: Sequence[uuid.UUID]) -> list[ModelInfo]:
    """Name, family, size and the date of the model's first session."""
    if not model_ids:
        return []
    first = (
        select(EvalSession.model_id, func.min(EvalSession.created_at).label("first"))
        .where(EvalSession.model_id.in_(model_ids))
        .group_by(EvalSession.model_id)
        .subquery()
    )
    rows = await db.execute(
        select(RegisteredModel, first.c.first).join(first, first.c.model_id == RegisteredModel.id)
    )
    by_id = {
        model.id: ModelInfo(
            f"{model.name}@{model.api_snapshot}",
            model.family,
            model.params_b,
            None if started is None else started.date(),
        )
        for model, started in rows.tuples()
    }
    return [by_id[m] for m in model_ids]


async def _item_labels(
    db: AsyncSession, item_ids: Sequence[uuid.UUID]
) -> tuple[ItemLabels, IntArray]:
    info: dict[uuid.UUID, tuple[str, str, str, uuid.UUID]] = {}
    for start in range(0, len(item_ids), 1000):
        chunk = list(item_ids[start : start + 1000])
        rows = await db.execute(
            select(Item.id, Item.discipline, Item.qtype, Item.subdiscipline, Item.family_id).where(
                Item.id.in_(chunk)
            )
        )
        for item_id, discipline, qtype, sub, family in rows.tuples():
            info[item_id] = (discipline, qtype, sub, family)
    ordered = [info[i] for i in item_ids]
    family_of: dict[uuid.UUID, int] = {}
    families = np.array(
        [family_of.setdefault(f, len(family_of)) for *_, f in ordered], dtype=np.int64
    )
    labels = ItemLabels(
        tuple(o[0] for o in ordered), tuple(o[1] for o in ordered), tuple(o[2] for o in ordered)
    )
    return labels, families


async def compute_report(
    collected: CollectedVerdicts, *, population: Population, options: HealthOptions
) -> HealthReport:
    """The report, computed in a thread (it is CPU work; the event loop keeps serving)."""
    return await asyncio.to_thread(
        health_report,
        collected.responses,
        collected.labels,
        population=population,
        options=options,
        judge_disagreement=collected.judge_disagreement,
        judged=collected.judged,
    )


async def store_snapshot(
    db: AsyncSession,
    *,
    report: HealthReport,
    watermark: int,
    now: datetime | None = None,
) -> HealthSnapshot:
    snapshot = HealthSnapshot(
        computed_at=now or datetime.now(UTC),
        population=report.population,
        verdict_watermark=watermark,
        report=report.to_dict(),
    )
    db.add(snapshot)
    await db.flush()
    return snapshot


async def flag_reported_items(
    db: AsyncSession,
    *,
    report: HealthReport,
    item_uuids: Sequence[uuid.UUID],
    item_ids: Sequence[str],
    actor: str,
    snapshot_id: uuid.UUID | None,
) -> int:
    """Move the report's flagged items that are still active to ``flagged``, each with
    its reasons; returns how many moved."""
    uuid_of = dict(zip(item_ids, item_uuids, strict=True))
    by_reasons: dict[tuple[str, ...], list[uuid.UUID]] = {}
    for item_id, reasons in report.flags.items():
        by_reasons.setdefault(reasons, []).append(uuid_of[item_id])
    active = (
        set(
            (
                await db.execute(
                    select(Item.id).where(
                        Item.id.in_([u for ids in by_reasons.values() for u in ids]),
                        Item.status == ItemStatus.ACTIVE.value,
                    )
                )
            ).scalars()
        )
        if by_reasons
        else set()
    )
    moved = 0
    for reasons, ids in sorted(by_reasons.items()):
        targets = [i for i in ids if i in active]
        if targets:
            changes = await change_status(
                db,
                item_ids=targets,
                to=ItemStatus.FLAGGED,
                actor=actor,
                reasons=reasons,
                snapshot_id=snapshot_id,
            )
            moved += len(changes)
    return moved


async def latest_snapshot(db: AsyncSession) -> HealthSnapshot | None:
    return (
        await db.execute(
            select(HealthSnapshot).order_by(HealthSnapshot.computed_at.desc()).limit(1)
        )
    ).scalar_one_or_none()


async def verdict_watermark(db: AsyncSession) -> int:
    return int(await db.scalar(select(func.coalesce(func.max(Verdict.id), 0))) or 0)


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    snapshot_id: uuid.UUID | None
    new_verdicts: int
    flagged: int
    held_back: int = 0
    """Flags not applied because they exceeded ``max_flag_share`` of the active items."""


async def refresh_health(
    engine: AsyncEngine,
    *,
    population: str,
    min_new_verdicts: int,
    flag: bool,
    max_flag_share: float = 1.0,
    options: HealthOptions | None = None,
    actor: str = HEALTH_ACTOR,
) -> RefreshOutcome:
    """A new snapshot when at least ``min_new_verdicts`` verdicts arrived since the last
    (1 forces one whenever there is any new verdict); the scheduled job's one step. With
    ``flag``, the flagged items move to ``flagged`` unless they are more than
    ``max_flag_share`` of the active items (then none move: ``held_back``)."""
    async with unit_of_work(engine) as db:
        last = await latest_snapshot(db)
        since = 0 if last is None else last.verdict_watermark
        new = (
            await db.scalar(select(func.count()).select_from(Verdict).where(Verdict.id > since))
            or 0
        )
    if new < min_new_verdicts:
        return RefreshOutcome(None, int(new), 0)
    async with unit_of_work(engine) as db:
        collected = await collect_verdicts(db)
    report = await compute_report(
        collected, population=parse_population(population), options=options or HealthOptions()
    )
    async with unit_of_work(engine) as db:
        snapshot = await store_snapshot(db, report=report, watermark=collected.watermark)
        flagged = held_back = 0
        active = await db.scalar(
            select(func.count()).select_from(Item).where(Item.status == ItemStatus.ACTIVE.value)
        )
        if flag and len(report.flags) > max_flag_share * int(active or 0):
            held_back = len(report.flags)
        elif flag:
            flagged = await flag_reported_items(
                db,
                report=report,
                item_uuids=collected.item_uuids,
                item_ids=collected.responses.item_ids,
                actor=actor,
                snapshot_id=snapshot.id,
            )
        snapshot_id = snapshot.id
    return RefreshOutcome(snapshot_id, int(new), flagged, held_back)


def snapshot_summary(snapshot: HealthSnapshot) -> dict[str, Any]:
    return {
        "id": snapshot.id,
        "computed_at": snapshot.computed_at,
        "population": snapshot.population,
        "bank": snapshot.report.get("bank", {}),
    }
