"""Fixed-window rate limits on counters kept in Redis, or in process for the embedded default.

Counters are disposable: if Redis is unreachable the limiter lets requests through (and
logs it) rather than refusing service; no rule of the protocol depends on it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from server.errors import TooManyRequests

log = logging.getLogger(__name__)


class Counters(Protocol):
    async def incr(self, key: str, window_s: int) -> int:
        """Increment ``key`` in the current window of ``window_s`` seconds; return the count."""
        ...


class MemoryCounters:
    """Counters in a dict: one process, the embedded default and tests of the limiter."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._window: dict[int, int] = {}

    async def incr(self, key: str, window_s: int) -> int:
        window = int(self._clock() // window_s)
        if self._window.get(window_s) != window:
            self._window[window_s] = window
            self._counts = {k: v for k, v in self._counts.items() if not k.endswith(f"|{window_s}")}
        full = f"{key}|{window_s}"
        self._counts[full] = self._counts.get(full, 0) + 1
        return self._counts[full]


class RedisCounters:
    """Counters in Redis (``INCR`` + ``EXPIRE`` in one round trip), shared by all replicas."""

    def __init__(self, redis: Redis, clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._clock = clock

    async def incr(self, key: str, window_s: int) -> int:
        window = int(self._clock() // window_s)
        full = f"proctor:rl:{key}:{window_s}:{window}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.incr(full)
                pipe.expire(full, window_s + 1)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as error:
            log.warning("rate limit counters unavailable, not limiting: %s", error)
            return 0
        return int(count)


class RateLimiter:
    """At most ``limit`` hits per key per ``window_s`` seconds."""

    def __init__(
        self,
        counters: Counters,
        *,
        limit: int,
        window_s: int = 60,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.counters = counters
        self.limit = limit
        self.window_s = window_s
        self._clock = clock

    async def hit(self, key: str) -> None:
        """Count one request for ``key``; ``TooManyRequests`` with Retry-After if over."""
        count = await self.counters.incr(key, self.window_s)
        if count > self.limit:
            remaining = self.window_s - (self._clock() % self.window_s)
            raise TooManyRequests(
                f"rate limit: at most {self.limit} requests per {self.window_s} s",
                retry_after=math.ceil(remaining),
            )
