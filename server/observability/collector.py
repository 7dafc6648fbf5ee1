"""Figures read from the database and Redis when Prometheus scrapes.

``read_snapshot`` runs a handful of cheap aggregate queries (each table has an index on
its state) under one short timeout; ``SnapshotCollector`` turns the result into metric
families in the scrape's registry. A database that does not answer in time gives
``proctor_db_up 0`` and no database figures, never a failed scrape; Redis likewise
``proctor_redis_up 0`` (the family is absent when no Redis is configured).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.models import Item, ItemStatus
from server.observability import metrics
from server.review.models import ReviewTask
from server.review.states import ReviewTaskState
from server.scoring.models import ScoringJob
from server.sessions.models import EvalSession
from server.sessions.states import SessionState

log = logging.getLogger(__name__)
WAITING_JOB_STATES = ("queued", "leased")
"""Scoring jobs without a verdict yet (``server.scoring.models.JOB_STATES``)."""


@dataclass
class Snapshot:
    """What one scrape read; ``None`` figures were not read (the database failed)."""

    db_up: bool = False
    redis_up: bool | None = None
    """None when no Redis is configured."""
    sessions: dict[str, int] = field(default_factory=dict)
    queue_depth: int | None = None
    oldest_job_age_s: float | None = None
    flagged_items: int | None = None
    review_depth: int | None = None
    oldest_review_age_s: float | None = None


async def read_snapshot(
    engine: AsyncEngine, redis: Redis | None, *, timeout_s: float = 2.0
) -> Snapshot:
    """The scrape's database and Redis figures (see the module docstring)."""
    snapshot = Snapshot()
    try:
        async with asyncio.timeout(timeout_s):
            await _read_database(engine, snapshot)
        snapshot.db_up = True
    except Exception as error:  # a scrape reports the failure as a figure, not a 500
        log.warning("metrics: the database did not answer (%s)", type(error).__name__)
        snapshot = Snapshot()
    if redis is not None:
        snapshot.redis_up = await _redis_answers(redis, timeout_s)
    return snapshot


async def _read_database(engine: AsyncEngine, snapshot: Snapshot) -> None:
    now = datetime.now(UTC)
    async with engine.connect() as db:
        by_state = await db.execute(
            select(EvalSession.state, func.count()).group_by(EvalSession.state)
        )
        counts = {state: int(n) for state, n in by_state.all()}
        snapshot.sessions = {state.value: counts.get(state.value, 0) for state in SessionState}
        jobs = (
            await db.execute(
                select(func.count(), func.min(ScoringJob.created_at)).where(
                    ScoringJob.state.in_(WAITING_JOB_STATES)
                )
            )
        ).one()
        snapshot.queue_depth, snapshot.oldest_job_age_s = int(jobs[0]), _age(jobs[1], now)
        tasks = (
            await db.execute(
                select(func.count(), func.min(ReviewTask.created_at)).where(
                    ReviewTask.state == ReviewTaskState.OPEN.value
                )
            )
        ).one()
        snapshot.review_depth, snapshot.oldest_review_age_s = int(tasks[0]), _age(tasks[1], now)
        snapshot.flagged_items = int(
            await db.scalar(
                select(func.count())
                .select_from(Item)
                .where(Item.status == ItemStatus.FLAGGED.value)
            )
            or 0
        )


def _age(oldest: datetime | None, now: datetime) -> float:
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # SQLite gives naive UTC
        oldest = oldest.replace(tzinfo=UTC)
    return max(0.0, (now - oldest).total_seconds())


async def _redis_answers(redis: Redis, timeout_s: float) -> bool:
    try:
        async with asyncio.timeout(timeout_s):
            return bool(await redis.ping())
    except Exception:
        return False


class SnapshotCollector(Collector):
    """The families of one ``Snapshot`` (register it in the scrape's own registry)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield _gauge(metrics.DB_UP, "1 if the database answered the scrape's queries.", s.db_up)
        if s.redis_up is not None:
            yield _gauge(metrics.REDIS_UP, "1 if Redis answered PING.", s.redis_up)
        if not s.db_up:
            return
        sessions = GaugeMetricFamily(metrics.SESSIONS, "Sessions by state.", labels=["state"])
        for state, n in s.sessions.items():
            sessions.add_metric([state], n)
        yield sessions
        yield _gauge(metrics.SCORING_QUEUE_DEPTH, "Scoring jobs waiting.", s.queue_depth)
        yield _gauge(
            metrics.SCORING_OLDEST_AGE,
            "Age of the oldest waiting scoring job (0 if none).",
            s.oldest_job_age_s,
        )
        yield _gauge(metrics.BANK_FLAGGED, "Items flagged by bank health.", s.flagged_items)
        yield _gauge(metrics.REVIEW_QUEUE_DEPTH, "Review tasks waiting.", s.review_depth)
        yield _gauge(
            metrics.REVIEW_OLDEST_AGE,
            "Age of the oldest waiting review task (0 if none).",
            s.oldest_review_age_s,
        )


def _gauge(name: str, documentation: str, value: float | bool | None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value or 0))
