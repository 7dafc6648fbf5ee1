"""Shutting the in-process scoring worker down right after it was woken (the API's lifespan
does exactly this when it stops just after an answer was accepted)."""

from __future__ import annotations

import asyncio

from server.database import create_engine
from server.scoring.worker import ScoringWorker
from tests.support.api import test_settings


async def test_a_cancel_that_arrives_with_a_wake_up_stops_the_worker(fresh_db_url: str) -> None:
    engine = create_engine(fresh_db_url)
    worker = ScoringWorker(engine=engine, settings=test_settings(fresh_db_url, scoring_poll_s=30))
    try:
        for _ in range(5):
            wake = asyncio.Event()
            task = asyncio.create_task(worker.run_forever(wake))
            await asyncio.sleep(0.2)  # drained the empty outbox; now waiting to be woken
            wake.set()
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=5)
            assert task in done and task.cancelled(), "the worker swallowed its cancellation"
    finally:
        await worker.aclose()
        await engine.dispose()
