"""A scoring worker process (``proctor judge worker``): arq for wake-ups, PostgreSQL for work.

The process runs one ``ScoringWorker.run_forever`` loop. An arq worker listens on Redis for
``score_pending`` jobs (enqueued by the API after answers) and for its own cron tick; both
only set the loop's event. If Redis goes away the arq side is restarted with backoff while
the loop keeps draining on its poll interval, so a Redis outage slows scoring down and
loses nothing.
"""

from __future__ import annotations

import asyncio
import logging

from arq.constants import default_queue_name

from server.arq_wakeups import supervise
from server.calibration.drift import drift_forever
from server.config import Settings
from server.database import create_engine
from server.health.job import health_forever
from server.scoring.wakeup import WAKE_FUNCTION
from server.scoring.worker import ScoringWorker

log = logging.getLogger(__name__)


async def run_worker_process(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Score until cancelled or ``stop`` is set (see the module docstring).

    On ``stop`` no job is claimed any more; the jobs being scored get
    ``shutdown_grace_s`` seconds to finish, then those still unfinished are cut short and
    given back to the queue, as are the claimed jobs not started yet."""
    # No pre-ping: it costs a round trip per checkout, and a dead connection only fails
    # one job, which its lease brings back.
    engine = create_engine(
        settings.effective_database_url, pool_size=10, max_overflow=10, pool_pre_ping=False
    )
    worker = ScoringWorker(engine=engine, settings=settings)
    wake = asyncio.Event()
    tasks = [
        asyncio.create_task(worker.run_forever(wake), name="scoring-loop"),
        asyncio.create_task(health_forever(engine, settings), name="health-job"),
        asyncio.create_task(drift_forever(engine, settings), name="judge-drift"),
    ]
    if settings.redis_url:
        listener = supervise(
            settings.redis_url, wake, function=WAKE_FUNCTION, queue_name=default_queue_name
        )
        tasks.append(asyncio.create_task(listener, name="arq"))
    log.info("scoring worker %s started", worker.owner)
    try:
        if stop is None:
            await asyncio.gather(*tasks)
        else:
            await _until_stopped(stop, worker, tasks[0], settings.shutdown_grace_s)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await worker.release_held()
        except Exception:  # their leases run out instead
            log.exception("could not give the unfinished scoring jobs back")
        await worker.aclose()
        await engine.dispose()


async def _until_stopped(
    stop: asyncio.Event, worker: ScoringWorker, scoring: asyncio.Task[None], grace_s: float
) -> None:
    """Wait for ``stop``, then for the scoring loop to finish its jobs in hand (at most
    ``grace_s`` seconds: then it is cancelled)."""
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, scoring}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if scoring.done():  # the loop itself failed
        await scoring
        return
    log.info("stopping: finishing the scoring jobs in hand (at most %.0f s)", grace_s)
    worker.stop()
    done, _ = await asyncio.wait({scoring}, timeout=grace_s)
    if not done:
        log.warning("shutdown grace of %.0f s over: giving unfinished jobs back", grace_s)
