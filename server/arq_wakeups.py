"""An arq worker that only wakes a loop: the shared part of the scoring and run workers.

Work lives in the database; an arq job on Redis only sets the loop's event (``wake``), so
a lost job delays work by a poll interval and loses nothing. If Redis drops the arq worker
it is started again after ``ARQ_RESTART_S``, and the loop is woken in case a wake-up was
lost meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from arq import cron, func
from arq.connections import RedisSettings
from arq.worker import Worker

log = logging.getLogger(__name__)
ARQ_RESTART_S = 1.0


async def wake_loop(ctx: dict[str, Any]) -> None:
    """arq job: wake this process's loop."""
    ctx["wake"].set()


def wake_worker(
    redis_url: str, wake: asyncio.Event, *, function: str, queue_name: str, tick_s: int = 10
) -> Worker:
    """An arq worker on ``queue_name`` whose job ``function`` (and a tick every ``tick_s``
    seconds) sets ``wake``."""
    return Worker(
        functions=[func(wake_loop, name=function, keep_result=0, max_tries=1)],
        cron_jobs=[cron(wake_loop, name=f"{function}_tick", second=set(range(0, 60, tick_s)))],
        queue_name=queue_name,
        redis_settings=RedisSettings.from_dsn(redis_url),
        ctx={"wake": wake},
        handle_signals=False,
        max_jobs=4,
        keep_result=0,
        poll_delay=0.2,
        log_results=False,
    )


async def supervise(redis_url: str, wake: asyncio.Event, *, function: str, queue_name: str) -> None:
    """Keep a ``wake_worker`` running, restarting it whenever Redis drops it."""
    while True:
        worker = wake_worker(redis_url, wake, function=function, queue_name=queue_name)
        try:
            await worker.async_run()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("arq wake-up listener stopped (%s); restarting", error)
            wake.set()  # wake-ups may have been lost meanwhile
        finally:
            with contextlib.suppress(Exception):
                await worker.close()
        await asyncio.sleep(ARQ_RESTART_S)
