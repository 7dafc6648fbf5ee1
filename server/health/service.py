"""Bank health on the server's own verdicts: collect them into a response matrix, compute
the report off the event loop, store it as a snapshot, and flag items through the one
status-change function.

Which verdicts: those of sessions whose mode health reads (``Traits.read_by_health``:
fixed and adaptive), under the current judge prompt version. A response's score is the
score it counts with on the leaderboard (``server.scoring.effective``: reviewers first,
then the panel rule over the board's judges; a response still waiting for review is not
read), and a model's score on an item is the mean over its responses. A response scored
by several of the board's judges whose correctness (s >= 2) differs counts as a
disagreement. Items of any status are read: a flagged or retired item's figures are what
its reviewer needs.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, bindparam, delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.health.labels import ItemLabels
from bank.health.population import Population, parse_population
from bank.health.report import HealthOptions, HealthReport, health_report
from bank.health.responses import CORRECT_AT, FloatArray, IntArray, ModelInfo, Responses
from bank.item_status import ItemStatus, change_status
from bank.locks import lock
from bank.models import HealthSnapshot, Item, ItemStatusChange
from judge.prompts import PROMPT_VERSION
from judge.ranking.scores import MAX_SCORE
from server.database import unit_of_work
from server.registry.models import RegisteredModel
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers, counting_verdicts
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import modes_where

HEALTH_ACTOR = "health-job"


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


def _covered_by_another(
    newest: HealthSnapshot | None, last: HealthSnapshot | None, watermark: int
) -> bool:
    """Whether a snapshot stored since ``last`` (by another worker) already read these
    verdicts."""
    if newest is None or (last is not None and newest.id == last.id):
        return False
    return newest.verdict_watermark >= watermark


def _read_modes() -> ColumnElement[bool]:
    """Replay and anchor sessions measure contamination on items chosen for it, not the
    bank's ordinary use (their mode's ``read_by_health``)."""
    return EvalSession.mode.in_(modes_where(lambda traits: traits.read_by_health))


async def readable_verdicts_since(db: AsyncSession, *, since: int, judges: JudgeAssignment) -> int:
    """How many verdicts health would read (a score of the board's ``judges`` or of a
    person) have an id above ``since``."""
    count = await db.scalar(
        select(func.count())
        .select_from(Verdict)
        .join(EvalSession, EvalSession.id == Verdict.session_id)
        .where(
            Verdict.id > since,
            Verdict.score.is_not(None),
            counting_verdicts(judges, PROMPT_VERSION),
            _read_modes(),
        )
    )
    return int(count or 0)


@dataclass(frozen=True, slots=True)
class _Response:
    """One answer as health reads it: its model, its item, the score it counts with and
    the board's judges' scores of it."""

    model_id: uuid.UUID
    item_id: uuid.UUID
    score: int
    judge_scores: tuple[int, ...]


async def collect_verdicts(db: AsyncSession, *, judges: JudgeAssignment) -> CollectedVerdicts:
    """The readable responses as a response matrix, each with the score it counts with
    under ``judges``; the watermark is the highest verdict id at reading time (so
    verdicts health skips never count as new)."""
    watermark = int(await db.scalar(select(func.coalesce(func.max(Verdict.id), 0))) or 0)
    counted = await counted_answers(
        db,
        judges=judges,
        prompt_version=PROMPT_VERSION,
        where=[Verdict.id <= watermark, _read_modes()],
        columns=(EvalSession.model_id, Answer.item_id),
        ordered=False,
        in_thread=True,
    )
    rows = [
        _Response(
            a.row.model_id,
            a.row.item_id,
            a.score,
            tuple(s for s in a.ratings.panel_scores(judges) if s is not None),
        )
        for a in counted
        if a.score is not None
    ]
    model_ids = sorted({r.model_id for r in rows}, key=str)
    item_ids = sorted({r.item_id for r in rows}, key=str)
    models = await _model_infos(db, model_ids)
    labels, families = await _item_labels(db, item_ids)
    return await asyncio.to_thread(
        _collected, rows, model_ids, item_ids, models, labels, families, watermark
    )


def _collected(
    rows: Sequence[_Response],
    model_ids: list[uuid.UUID],
    item_ids: list[uuid.UUID],
    models: list[ModelInfo],
    labels: ItemLabels,
    families: IntArray,
    watermark: int,
) -> CollectedVerdicts:
    """The cells (the mean over a model's responses to an item) and the judges'
    disagreement per item, from the responses (CPU work: run in a thread)."""
    model_of = {m: i for i, m in enumerate(model_ids)}
    item_of = {m: i for i, m in enumerate(item_ids)}
    n = len(rows)
    y = np.fromiter((r.score for r in rows), dtype=np.float64, count=n) / MAX_SCORE
    cell_item = np.fromiter((item_of[r.item_id] for r in rows), dtype=np.int64, count=n)
    cell_model = np.fromiter((model_of[r.model_id] for r in rows), dtype=np.int64, count=n)
    judges = np.fromiter((len(r.judge_scores) for r in rows), dtype=np.int64, count=n)
    correct = np.fromiter(
        (sum(s / MAX_SCORE >= CORRECT_AT - 1e-9 for s in r.judge_scores) for r in rows),
        dtype=np.int64,
        count=n,
    )
    disagree = (judges >= 2) & (correct > 0) & (correct < judges)
    width = max(1, len(model_ids))
    cells, cell_index = np.unique(cell_item * width + cell_model, return_inverse=True)
    totals = np.bincount(cell_index, y)
    counts = np.bincount(cell_index)
    responses = Responses.from_cells(
        [str(i) for i in item_ids], models, cells // width, cells % width, totals / counts, families
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
        watermark=watermark,
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
    collected: CollectedVerdicts,
    *,
    population: Population,
    options: HealthOptions,
    peers: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
) -> HealthReport:
    """The report, computed in a thread (it is CPU work; the event loop keeps serving).
    ``ValueError`` when the population names models or a family the verdicts lack."""
    return await asyncio.to_thread(
        health_report,
        collected.responses,
        collected.labels,
        population=population,
        options=options,
        peers=peers,
        judge_disagreement=collected.judge_disagreement,
        judged=collected.judged,
    )


async def store_snapshot(
    db: AsyncSession,
    *,
    report: HealthReport,
    watermark: int,
    now: datetime | None = None,
    keep: int | None = None,
) -> HealthSnapshot:
    """Store ``report``; with ``keep``, only the newest ``keep`` snapshots of its
    population are kept."""
    body = await asyncio.to_thread(report.to_dict)  # the item section is CPU work
    text = str(report.population.get("text", ""))
    snapshot = HealthSnapshot(
        computed_at=now or datetime.now(UTC),
        population_text=text,
        population=report.population,
        verdict_watermark=watermark,
        bank=report.bank,
        report=body,
    )
    db.add(snapshot)
    await db.flush()
    if keep is not None:
        newest = (
            select(HealthSnapshot.id)
            .where(HealthSnapshot.population_text == text)
            .order_by(HealthSnapshot.computed_at.desc(), HealthSnapshot.id)
            .limit(keep)
        )
        await db.execute(
            delete(HealthSnapshot).where(
                HealthSnapshot.population_text == text, HealthSnapshot.id.not_in(newest)
            )
        )
    return snapshot


async def flag_candidates(
    db: AsyncSession,
    *,
    report: HealthReport,
    item_uuids: Sequence[uuid.UUID],
    item_ids: Sequence[str],
) -> dict[uuid.UUID, tuple[str, ...]]:
    """The report's flagged items that are active (locked until the transaction ends) and
    were not kept by a reviewer against the same reasons: a keep stands until a rule that
    was not behind the kept flag fires."""
    uuid_of = dict(zip(item_ids, item_uuids, strict=True))
    wanted = {uuid_of[i]: reasons for i, reasons in report.flags.items()}
    active: set[uuid.UUID] = set()
    ids = sorted(wanted, key=str)
    for start in range(0, len(ids), 1000):
        rows = await db.execute(
            select(Item.id)
            .where(Item.id.in_(ids[start : start + 1000]), Item.status == ItemStatus.ACTIVE.value)
            .with_for_update()
        )
        active.update(rows.scalars())
    kept = await _kept_reasons(db, sorted(active, key=str))
    return {
        item: reasons
        for item, reasons in wanted.items()
        if item in active and not set(reasons) <= kept.get(item, frozenset())
    }


async def _kept_reasons(
    db: AsyncSession, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, frozenset[str]]:
    """Item -> the reasons of the flag a reviewer's latest keep overruled (items whose
    latest change is a keep only)."""
    history: dict[uuid.UUID, list[ItemStatusChange]] = {}
    for start in range(0, len(item_ids), 1000):
        rows = await db.execute(
            select(ItemStatusChange)
            .where(ItemStatusChange.item_id.in_(item_ids[start : start + 1000]))
            .order_by(ItemStatusChange.id)
        )
        for change in rows.scalars():
            history.setdefault(change.item_id, []).append(change)
    kept: dict[uuid.UUID, frozenset[str]] = {}
    for item, changes in history.items():
        last = changes[-1]
        if (last.from_status, last.to_status) != (ItemStatus.FLAGGED, ItemStatus.ACTIVE):
            continue
        flags = [c for c in changes if c.to_status == ItemStatus.FLAGGED]
        kept[item] = frozenset(flags[-1].reasons) if flags else frozenset()
    return kept


async def flag_items(
    db: AsyncSession,
    *,
    candidates: Mapping[uuid.UUID, tuple[str, ...]],
    actor: str,
    snapshot_id: uuid.UUID | None,
) -> int:
    """Move ``candidates`` (from :func:`flag_candidates`) to ``flagged`` with their
    reasons, through the one status-change function; returns how many moved."""
    by_reasons: dict[tuple[str, ...], list[uuid.UUID]] = {}
    for item, reasons in candidates.items():
        by_reasons.setdefault(reasons, []).append(item)
    moved = 0
    for reasons, ids in sorted(by_reasons.items()):
        changes = await change_status(
            db,
            item_ids=ids,
            to=ItemStatus.FLAGGED,
            actor=actor,
            reasons=reasons,
            snapshot_id=snapshot_id,
        )
        moved += len(changes)
    return moved


async def flag_report(
    db: AsyncSession,
    *,
    report: HealthReport,
    collected: CollectedVerdicts,
    actor: str,
    snapshot_id: uuid.UUID | None,
    max_share: float = 1.0,
) -> tuple[int, int]:
    """Flag the report's candidates (:func:`flag_candidates`); ``(moved, held_back)``:
    nothing moves, and all are held back, when they exceed ``max_share`` of the active
    items."""
    candidates = await flag_candidates(
        db,
        report=report,
        item_uuids=collected.item_uuids,
        item_ids=collected.responses.item_ids,
    )
    if max_share < 1.0:
        active = await db.scalar(
            select(func.count()).select_from(Item).where(Item.status == ItemStatus.ACTIVE.value)
        )
        if len(candidates) > max_share * int(active or 0):
            return 0, len(candidates)
    moved = await flag_items(db, candidates=candidates, actor=actor, snapshot_id=snapshot_id)
    return moved, 0


async def latest_snapshot(
    db: AsyncSession, *, population: str | None = None
) -> HealthSnapshot | None:
    """The newest snapshot (of ``population``, as given, when named)."""
    statement = select(HealthSnapshot).order_by(
        HealthSnapshot.computed_at.desc(), HealthSnapshot.id
    )
    if population is not None:
        statement = statement.where(HealthSnapshot.population_text == population)
    return (await db.execute(statement.limit(1))).scalar_one_or_none()


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
    judges: JudgeAssignment,
    population: str,
    min_new_verdicts: int,
    flag: bool,
    max_flag_share: float = 1.0,
    options: HealthOptions | None = None,
    keep_snapshots: int | None = None,
    actor: str = HEALTH_ACTOR,
) -> RefreshOutcome:
    """The scheduled job's one step: a new snapshot of ``population`` once at least
    ``min_new_verdicts`` readable verdicts arrived since its last one (0 forces one),
    each response with the score it counts with under the board's ``judges``.

    With ``flag``, the flagged active items move to ``flagged`` unless they are more than
    ``max_flag_share`` of the active items (then none move: ``held_back``). Several
    workers may run the job: the write takes a lock and stores nothing when another
    worker's snapshot already covers these verdicts. ``ValueError`` when the population
    names models or a family the verdicts lack."""
    async with unit_of_work(engine) as db:
        last = await latest_snapshot(db, population=population)
        since = 0 if last is None else last.verdict_watermark
        new = await readable_verdicts_since(db, since=since, judges=judges)
    if new < min_new_verdicts:
        return RefreshOutcome(None, new, 0)
    async with unit_of_work(engine) as db:
        collected = await collect_verdicts(db, judges=judges)
    report = await compute_report(
        collected, population=parse_population(population), options=options or HealthOptions()
    )
    async with unit_of_work(engine) as db:
        await lock(db, "bank:health")
        newest = await latest_snapshot(db, population=population)
        if _covered_by_another(newest, last, collected.watermark):
            return RefreshOutcome(None, new, 0)
        snapshot = await store_snapshot(
            db, report=report, watermark=collected.watermark, keep=keep_snapshots
        )
        flagged = held_back = 0
        if flag:
            flagged, held_back = await flag_report(
                db,
                report=report,
                collected=collected,
                actor=actor,
                snapshot_id=snapshot.id,
                max_share=max_flag_share,
            )
        snapshot_id = snapshot.id
    return RefreshOutcome(snapshot_id, new, flagged, held_back)


@dataclass(frozen=True, slots=True)
class BankFigures:
    """The bank-level figures of the newest snapshot, without its per-item report."""

    computed_at: datetime
    population: str
    figures: dict[str, Any]


async def latest_bank_figures(db: AsyncSession) -> BankFigures | None:
    """The newest snapshot's bank figures (``latest_snapshot`` without the item report,
    which on a large bank is megabytes of JSON)."""
    row = (
        await db.execute(
            select(HealthSnapshot.computed_at, HealthSnapshot.population_text, HealthSnapshot.bank)
            .order_by(HealthSnapshot.computed_at.desc(), HealthSnapshot.id)
            .limit(1)
        )
    ).one_or_none()
    if row is None:
        return None
    return BankFigures(computed_at=row[0], population=row[1], figures=dict(row[2] or {}))


CAS_BINS = 10
"""Equal-width bins of item CAS over [0, 1] in :func:`latest_health_summary`."""
SUMMARIES_KEPT = 4
"""Snapshots whose item summaries a process keeps (snapshots never change)."""


@dataclass(frozen=True, slots=True)
class FlaggedFigures:
    """One flagged item of a snapshot: the rules that fired and the figures behind them."""

    item_id: str
    flags: tuple[str, ...]
    p: float | None
    cas: float | None
    n: int | None


@dataclass(frozen=True, slots=True)
class ItemsSummary:
    """A snapshot's item section summed up: the CAS histogram, how often each flag rule
    fired, every flagged item (by item id), and the strata's figures."""

    cas_bins: tuple[int, ...]
    """Items per CAS bin: ``CAS_BINS`` equal bins of [0, 1], the last one closed."""
    cas_items: int
    """Items with a CAS (the others have too few responding models)."""
    flag_counts: dict[str, int]
    """Flag rule -> items it flags, most frequent first."""
    flagged: tuple[FlaggedFigures, ...]
    strata: dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class HealthSummary:
    """What the console's health page shows of the newest snapshot: its bank figures, the
    summary of its items, and one page of its flagged items."""

    snapshot_id: uuid.UUID
    computed_at: datetime
    population: str
    n_models: int | None
    bank: dict[str, Any]
    items: ItemsSummary
    flagged: tuple[FlaggedFigures, ...]
    """Flagged items ``offset`` to ``offset + limit``."""


_SUMMARIES: OrderedDict[uuid.UUID, ItemsSummary] = OrderedDict()


async def latest_health_summary(
    db: AsyncSession, *, flagged_limit: int, flagged_offset: int = 0
) -> HealthSummary | None:
    """The newest snapshot's :class:`HealthSummary` (``None`` before the first one).

    The per-item report (tens of megabytes of JSON on a 100,000-item bank) is never loaded
    into Python: the database walks it once, returning the CAS histogram and the flagged
    items only, and the process keeps that summary for the snapshot (snapshots never
    change), so only the first request after a new snapshot pays for the walk."""
    head = (
        await db.execute(
            select(
                HealthSnapshot.id,
                HealthSnapshot.computed_at,
                HealthSnapshot.population_text,
                HealthSnapshot.population["n_models"],
                HealthSnapshot.bank,
            )
            .order_by(HealthSnapshot.computed_at.desc(), HealthSnapshot.id)
            .limit(1)
        )
    ).one_or_none()
    if head is None:
        return None
    snapshot_id, computed_at, population, n_models, bank = head
    items = _SUMMARIES.get(snapshot_id)
    if items is None:
        items = await _items_summary(db, snapshot_id)
        _SUMMARIES[snapshot_id] = items
        while len(_SUMMARIES) > SUMMARIES_KEPT:
            _SUMMARIES.popitem(last=False)
    return HealthSummary(
        snapshot_id=snapshot_id,
        computed_at=computed_at,
        population=population,
        n_models=n_models if isinstance(n_models, int) else None,
        bank=dict(bank or {}),
        items=items,
        flagged=items.flagged[flagged_offset : flagged_offset + flagged_limit],
    )


_ITEM_SQL = {
    "postgresql": {
        "each": "health_snapshots h CROSS JOIN LATERAL jsonb_each(h.report -> 'items') e",
        "flagged": "jsonb_array_length(e.value -> 'flags') > 0",
        "bin": "CAST(FLOOR((e.value ->> 'cas')::float8 * {bins}) AS INTEGER)",
        "figures": "jsonb_build_array(e.value -> 'flags', e.value -> 'p', e.value -> 'cas', "
        "e.value -> 'n')::text",
        "strata": "SELECT (report -> 'strata')::text FROM health_snapshots WHERE id = :snapshot",
    },
    "sqlite": {
        "each": "health_snapshots h, json_each(h.report, '$.items') e",
        "flagged": "json_array_length(e.value, '$.flags') > 0",
        "bin": "CAST(json_extract(e.value, '$.cas') * {bins} AS INTEGER)",
        "figures": "json_extract(e.value, '$.flags', '$.p', '$.cas', '$.n')",
        "strata": "SELECT json_extract(report, '$.strata') FROM health_snapshots "
        "WHERE id = :snapshot",
    },
}
"""The item-section queries per dialect (SQLite's for any other). They rely on the
report's own item structure (``HealthOut.items``: ``flags`` a list, ``cas`` a number or
null), which ``store_snapshot`` writes."""


def _items_statement(dialect: str) -> str:
    """One walk of a snapshot's items, grouped by (flagged item id or NULL, CAS bin): the
    unflagged items come back as counts per bin, each flagged item as a row of its own
    with ``[flags, p, cas, n]`` as JSON text."""
    sql = _ITEM_SQL.get(dialect, _ITEM_SQL["sqlite"])
    flagged = sql["flagged"]
    return (
        f"SELECT CASE WHEN {flagged} THEN e.key END, {sql['bin'].format(bins=CAS_BINS)}, "
        f"count(*), max(CASE WHEN {flagged} THEN {sql['figures']} END) "
        f"FROM {sql['each']} WHERE h.id = :snapshot GROUP BY 1, 2"
    )


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


async def _items_summary(db: AsyncSession, snapshot_id: uuid.UUID) -> ItemsSummary:
    dialect = (await db.connection()).dialect.name
    snapshot = bindparam("snapshot", snapshot_id, type_=HealthSnapshot.__table__.c.id.type)
    rows = await db.execute(text(_items_statement(dialect)).bindparams(snapshot))
    bins = [0] * CAS_BINS
    flagged: list[FlaggedFigures] = []
    for item, bin_, count, figures in rows.tuples():
        if bin_ is not None:
            bins[min(max(int(bin_), 0), CAS_BINS - 1)] += int(count)  # CAS = 1: the last bin
        if item is None:
            continue
        rules, p, cas, n = json.loads(figures)
        flagged.append(
            FlaggedFigures(
                item_id=str(item),
                flags=tuple(str(rule) for rule in rules),
                p=_float(p),
                cas=_float(cas),
                n=int(n) if isinstance(n, int) and not isinstance(n, bool) else None,
            )
        )
    flagged.sort(key=lambda row: row.item_id)
    counts = Counter(rule for row in flagged for rule in row.flags)
    sql = _ITEM_SQL.get(dialect, _ITEM_SQL["sqlite"])
    strata = await db.scalar(text(sql["strata"]).bindparams(snapshot))
    strata = json.loads(strata) if isinstance(strata, str) else strata
    return ItemsSummary(
        cas_bins=tuple(bins),
        cas_items=sum(bins),
        flag_counts=dict(counts.most_common()),
        flagged=tuple(flagged),
        strata=strata if isinstance(strata, dict) else {},
    )
