"""The scheduled health job: every ``health_interval_s`` seconds, a new snapshot (and
flags) once ``health_min_new_verdicts`` verdicts arrived since the last one. It runs in the
scoring worker process, or in the API process on the embedded default; never on a
request."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from bank.health.flags import parse_thresholds
from bank.health.report import HealthOptions
from server.config import Settings
from server.database import unit_of_work
from server.health.service import RefreshOutcome, refresh_health
from server.observability import metrics
from server.scoring.assignment import assign_judges

log = logging.getLogger(__name__)


async def refresh_once(engine: AsyncEngine, settings: Settings) -> RefreshOutcome | None:
    """One tick; None (with a warning) when the configured population selects no model
    the verdicts know."""
    try:
        outcome = await _refresh(engine, settings)
    except ValueError as error:
        log.warning("bank health: health_population %r: %s", settings.health_population, error)
        return None
    if outcome.snapshot_id is not None:
        log.info(
            "bank health snapshot %s after %d new verdicts; %d items flagged",
            outcome.snapshot_id,
            outcome.new_verdicts,
            outcome.flagged,
        )
    if outcome.held_back:
        log.warning(
            "bank health: %d items flagged, more than %.0f%% of the active bank; none moved "
            "(review the thresholds, or flag with `proctor bank health --flag`)",
            outcome.held_back,
            100 * settings.health_flag_max_share,
        )
    return outcome


async def _refresh(engine: AsyncEngine, settings: Settings) -> RefreshOutcome:
    async with unit_of_work(engine) as db:
        judges = await assign_judges(db, settings)
    return await refresh_health(
        engine,
        judges=judges,
        population=settings.health_population,
        min_new_verdicts=settings.health_min_new_verdicts,
        flag=settings.health_flag,
        max_flag_share=settings.health_flag_max_share,
        options=HealthOptions(thresholds=parse_thresholds(settings.health_thresholds)),
        keep_snapshots=settings.health_keep_snapshots,
    )


async def health_forever(engine: AsyncEngine, settings: Settings) -> None:
    """Run :func:`refresh_once` on the interval until cancelled; a failure is logged and
    the next tick tries again."""
    while True:
        await asyncio.sleep(settings.health_interval_s)
        try:
            outcome = await refresh_once(engine, settings)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("bank health job failed")
            outcome = None
        metrics.health_run(run_outcome(outcome))


def run_outcome(outcome: RefreshOutcome | None) -> str:
    """How a run is counted: ``failed`` (no outcome), ``ok`` (a new snapshot) or
    ``skipped`` (too few new verdicts for one)."""
    if outcome is None:
        return "failed"
    return "ok" if outcome.snapshot_id is not None else "skipped"
