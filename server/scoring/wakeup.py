"""Waking scoring workers after answers arrive.

A wake-up is a hint, never the record: the outbox row committed with the answer is. Losing
a wake-up (Redis down, a dropped job) only delays scoring until the worker's next poll.

* ``EventWaker``: the in-process worker of the embedded default (an ``asyncio.Event``).
* ``ArqWaker``: ``proctor judge worker`` processes, through an arq job ``score_pending``.
  Wake-ups are coalesced: at most one arq job per half second per API process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from server.circuit import CircuitBreaker
from server.ratelimit import REDIS_SKIP_S

log = logging.getLogger(__name__)
WAKE_FUNCTION = "score_pending"
COALESCE_S = 0.5


class Waker(Protocol):
    async def wake(self) -> None: ...


class EventWaker:
    """Sets the in-process worker's event."""

    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    async def wake(self) -> None:
        self.event.set()


class ArqWaker:
    """Enqueues ``function`` (``score_pending``; ``drive_runs`` for the run workers) on the
    arq queue (fail-open: Redis errors are logged)."""

    def __init__(
        self, pool: Any, function: str = WAKE_FUNCTION, queue_name: str | None = None
    ) -> None:
        self._pool = pool
        self._function = function
        self._queue = {"_queue_name": queue_name} if queue_name else {}
        self._last = 0.0
        self._breaker = CircuitBreaker(REDIS_SKIP_S)

    async def wake(self) -> None:
        now = time.monotonic()
        if now - self._last < COALESCE_S or not self._breaker.allows():
            return
        self._last = now
        try:
            # One job id per half second of wall time: bursts from every API process
            # coalesce into one job, and a new id is never blocked by an old result.
            await self._pool.enqueue_job(
                self._function,
                _job_id=f"{self._function}:{int(time.time() / COALESCE_S)}",
                **self._queue,
            )
        except Exception:
            self._breaker.failed()
            log.warning("could not enqueue %s (Redis); the workers will poll", self._function)


class NoWaker:
    async def wake(self) -> None:
        return None
