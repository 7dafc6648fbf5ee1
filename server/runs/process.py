"""A run worker process (``proctor run-worker``): PostgreSQL for the work, arq on Redis
for wake-ups, Proctor's API (``PROCTOR_RUN_API_URL``) for the sessions.

Any number of these run on any hosts; each drives up to ``PROCTOR_RUN_SLOTS_PER_WORKER``
sessions at once (``server.runs.worker``). The arq side only wakes the loop (a queue of its
own, so the scoring workers never take a run's wake-up); without Redis the loop polls.
"""

from __future__ import annotations

import asyncio
import logging

from server.arq_wakeups import supervise
from server.config import Settings
from server.database import create_engine

log = logging.getLogger(__name__)
RUN_WAKE_FUNCTION = "drive_runs"
RUN_QUEUE = "proctor:runs"
"""The arq queue of the run workers' wake-ups."""


async def run_worker_process(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Drive runs until cancelled or ``stop`` is set; then the slots in hand go back."""
    from server.api.runtime import shared_counters, token_codec
    from server.runs.driver import ApiTarget
    from server.runs.worker import RunWorker

    engine = create_engine(settings.effective_database_url, pool_size=10, max_overflow=10)
    redis, counters = shared_counters(settings)  # the endpoints' pace, over every worker
    worker = RunWorker(
        engine=engine,
        settings=settings,
        codec=token_codec(settings),
        api=ApiTarget(settings.run_api_url.rstrip("/")),
        counters=counters,
    )
    wake = asyncio.Event()
    tasks = [asyncio.create_task(worker.run_forever(wake), name="run-loop")]
    if settings.redis_url:
        listener = supervise(
            settings.redis_url, wake, function=RUN_WAKE_FUNCTION, queue_name=RUN_QUEUE
        )
        tasks.append(asyncio.create_task(listener, name="arq"))
    log.info("run worker %s started (API %s)", worker.owner, settings.run_api_url)
    try:
        if stop is None:
            await asyncio.gather(*tasks)
        else:
            await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.dispose()
        if redis is not None:
            await redis.aclose()
