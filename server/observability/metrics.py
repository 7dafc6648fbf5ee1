"""Every Prometheus metric Proctor exports, and how a scrape gathers them.

The names are a contract with the dashboards and alert rules under ``deploy/``:
``METRIC_NAMES`` lists every family as PromQL sees it (a counter with its ``_total``).

Counters and histograms live in the process that observes them. Under several uvicorn
workers each process writes its values into files under ``PROMETHEUS_MULTIPROC_DIR``
(prometheus-client's multiprocess mode, chosen when that variable is set before the
library is imported; ``proctor serve`` sets it up) and a scrape adds them up
(``scrape_registry``). Figures read from the database are not here: the scrape computes
them (``server.observability.collector``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    values,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# no ``_created`` series beside each counter (half the series, and nothing reads them)
disable_created_metrics()  # type: ignore[no-untyped-call]

# Buckets: a request is answered in milliseconds; a judge call takes seconds.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
JUDGE_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)

HTTP_REQUESTS = Counter(
    "proctor_http_requests", "HTTP requests answered.", ["method", "route", "status"]
)
HTTP_DURATION = Histogram(
    "proctor_http_request_duration_seconds",
    "Time to answer an HTTP request.",
    ["method", "route"],
    buckets=HTTP_BUCKETS,
)
ITEMS_DELIVERED = Counter("proctor_items_delivered", "Items delivered to sessions.")
ANSWERS = Counter("proctor_answers", "Answers accepted.")
VERDICTS = Counter("proctor_verdicts", "Verdicts written.", ["method"])
JUDGE_CALLS = Counter(
    "proctor_judge_calls", "LLM judge calls, one per verdict attempt.", ["judge", "outcome"]
)
JUDGE_RETRIES = Counter("proctor_judge_retries", "Judge HTTP attempts beyond the first.", ["judge"])
JUDGE_RATE_LIMITED = Counter(
    "proctor_judge_rate_limited", "HTTP 429 responses from the judge's provider.", ["judge"]
)
JUDGE_DURATION = Histogram(
    "proctor_judge_call_duration_seconds",
    "Wall time of a judge call, retries included.",
    ["judge"],
    buckets=JUDGE_BUCKETS,
)
JUDGE_TOKENS = Counter("proctor_judge_tokens", "Tokens used by the judge.", ["judge", "kind"])
JUDGE_COST = Counter("proctor_judge_cost_usd", "Cost of the judge's calls in USD.", ["judge"])
HEALTH_RUNS = Counter("proctor_health_job_runs", "Bank health job runs.", ["outcome"])
HEALTH_LAST_SUCCESS = Gauge(
    "proctor_health_last_success_timestamp_seconds",
    "Unix time of the last successful bank health run.",
    multiprocess_mode="max",
)
DB_POOL_CHECKED_OUT = Gauge(
    "proctor_db_pool_checked_out",
    "Database connections in use (summed over the worker processes).",
    multiprocess_mode="livesum",
)

# Families computed at scrape time (server.observability.collector) and the drift gauge
# (server.calibration.drift), named here so that METRIC_NAMES is the whole contract.
SESSIONS = "proctor_sessions"
SCORING_QUEUE_DEPTH = "proctor_scoring_queue_depth"
SCORING_OLDEST_AGE = "proctor_scoring_oldest_job_age_seconds"
BANK_FLAGGED = "proctor_bank_flagged_items"
REVIEW_QUEUE_DEPTH = "proctor_review_queue_depth"
REVIEW_OLDEST_AGE = "proctor_review_oldest_task_age_seconds"
DB_UP = "proctor_db_up"
REDIS_UP = "proctor_redis_up"
JUDGE_DRIFTING = "proctor_judge_drifting"

METRIC_NAMES: frozenset[str] = frozenset(
    {
        "proctor_http_requests_total",
        "proctor_http_request_duration_seconds",
        SESSIONS,
        "proctor_items_delivered_total",
        "proctor_answers_total",
        SCORING_QUEUE_DEPTH,
        SCORING_OLDEST_AGE,
        "proctor_verdicts_total",
        "proctor_judge_calls_total",
        "proctor_judge_retries_total",
        "proctor_judge_rate_limited_total",
        "proctor_judge_call_duration_seconds",
        "proctor_judge_tokens_total",
        "proctor_judge_cost_usd_total",
        JUDGE_DRIFTING,
        "proctor_health_job_runs_total",
        "proctor_health_last_success_timestamp_seconds",
        BANK_FLAGGED,
        REVIEW_QUEUE_DEPTH,
        REVIEW_OLDEST_AGE,
        "proctor_db_pool_checked_out",
        DB_UP,
        REDIS_UP,
    }
)
"""Every metric family, as PromQL names it."""


def is_multiprocess() -> bool:
    """Whether this process writes its metrics into ``PROMETHEUS_MULTIPROC_DIR`` (decided
    by prometheus-client when it was imported, whatever the environment says now)."""
    return bool(os.environ.get(MULTIPROC_ENV)) and values.ValueClass is not values.MutexValue


def scrape_registry() -> CollectorRegistry:
    """The registry a scrape renders: every process's values added up in multiprocess
    mode, else this process's own registry."""
    if not is_multiprocess():
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


# --- counting what a transaction did, once it is committed ---------------------------

_PENDING = "proctor_metrics_on_commit"


def on_commit(db: AsyncSession, count: Callable[[], None]) -> None:
    """Call ``count`` when ``db``'s transaction commits (never if it rolls back), so a
    counter never counts what the database did not keep."""
    db.sync_session.info.setdefault(_PENDING, []).append(count)


@event.listens_for(Session, "after_commit")
def _run_pending(session: Session) -> None:
    for count in session.info.pop(_PENDING, ()):
        count()


@event.listens_for(Session, "after_rollback")
def _drop_pending(session: Session) -> None:
    session.info.pop(_PENDING, None)


# --- the database pool ---------------------------------------------------------------


def instrument_pool(engine: AsyncEngine) -> None:
    """Keep ``proctor_db_pool_checked_out`` in step with ``engine``'s pool."""

    def checked_out(*_: Any) -> None:
        DB_POOL_CHECKED_OUT.inc()

    def checked_in(*_: Any) -> None:
        DB_POOL_CHECKED_OUT.dec()

    event.listen(engine.sync_engine, "checkout", checked_out)
    event.listen(engine.sync_engine, "checkin", checked_in)


# --- the health job ------------------------------------------------------------------


def health_run(outcome: str) -> None:
    """Count one health job run (``ok``, ``failed`` or ``skipped``); a run that did not
    fail is a success."""
    HEALTH_RUNS.labels(outcome=outcome).inc()
    if outcome != "failed":
        HEALTH_LAST_SUCCESS.set(time.time())


def process_exiting() -> None:
    """Drop this process's live gauges (multiprocess mode) as it ends."""
    if is_multiprocess():
        mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
