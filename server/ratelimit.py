"""Fixed-window rate limits on counters kept in Redis, or in process for the embedded default.

A request may count against several limits at once (its API key and its organisation);
they are incremented in one round trip. Counters are disposable: if Redis is unreachable
(an error, or no answer within ``PROCTOR_REDIS_TIMEOUT_S``) the limiter lets requests
through (and logs it) rather than refusing service, and does not ask Redis again for
``REDIS_SKIP_S`` seconds; no rule of the protocol depends on it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from server.circuit import CircuitBreaker
from server.errors import TooManyRequests

log = logging.getLogger(__name__)

REDIS_SKIP_S = 5.0
"""After a Redis failure, seconds the counters are not asked (requests go through unlimited)."""


class Counters(Protocol):
    async def incr(self, keys: Sequence[str], window_s: int, amount: int = 1) -> list[int]:
        """Add ``amount`` to each of ``keys`` in the current window of ``window_s`` seconds;
        return their counts (0 each if the counters are unavailable)."""
        ...


class MemoryCounters:
    """Counters in a dict: one process, the embedded default and tests of the limiter."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._window: dict[int, int] = {}

    def _roll(self, window_s: int) -> None:
        window = int(self._clock() // window_s)
        if self._window.get(window_s) != window:
            self._window[window_s] = window
            self._counts = {k: v for k, v in self._counts.items() if not k.endswith(f"|{window_s}")}

    async def incr(self, keys: Sequence[str], window_s: int, amount: int = 1) -> list[int]:
        self._roll(window_s)
        counts = []
        for key in keys:
            full = f"{key}|{window_s}"
            self._counts[full] = self._counts.get(full, 0) + amount
            counts.append(self._counts[full])
        return counts


class RedisCounters:
    """Counters in Redis (``INCR`` + ``EXPIRE`` per key, one round trip), shared by all
    replicas."""

    def __init__(
        self,
        redis: Redis,
        clock: Callable[[], float] = time.time,
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._redis = redis
        self._clock = clock
        self._breaker = breaker or CircuitBreaker(REDIS_SKIP_S)

    def _full(self, key: str, window_s: int) -> str:
        return f"proctor:rl:{key}:{window_s}:{int(self._clock() // window_s)}"

    async def incr(self, keys: Sequence[str], window_s: int, amount: int = 1) -> list[int]:
        if not self._breaker.allows():
            return [0] * len(keys)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    full = self._full(key, window_s)
                    pipe.incrby(full, amount)
                    pipe.expire(full, window_s + 1)
                replies = await pipe.execute()
        except (RedisError, OSError) as error:
            self._breaker.failed()
            log.warning(
                "rate limit counters unavailable, not limiting for %.0f s: %s",
                self._breaker.open_s,
                error,
            )
            return [0] * len(keys)
        return [int(count) for count in replies[::2]]


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``per_window`` requests counted under ``key`` per window."""

    key: str
    per_window: int
    what: str
    """What is limited, for the refusal (e.g. "this API key")."""


class RateLimiter:
    """Fixed windows of ``window_s`` seconds over ``counters``."""

    def __init__(
        self,
        counters: Counters,
        *,
        window_s: int = 60,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.counters = counters
        self.window_s = window_s
        self._clock = clock
        self._reached: set[str] = set()
        """Keys of ``count`` limits reached in ``_reached_window`` (this process saw it)."""
        self._reached_window = -1

    async def hit(self, *limits: Limit) -> None:
        """Count one request against every limit; ``TooManyRequests`` with Retry-After if
        any of them is now exceeded."""
        counts = await self.counters.incr([limit.key for limit in limits], self.window_s)
        for limit, count in zip(limits, counts, strict=True):
            if count > limit.per_window:
                self._refuse(limit)

    def check(self, limit: Limit) -> None:
        """``TooManyRequests`` if ``count`` has seen ``limit`` reached in this window; no
        I/O, so it can run before anything else on every request. Each process learns it
        from its own ``count`` calls, which read the shared total: a flood spread over
        replicas is stopped in each of them once the total is reached."""
        if limit.key in self._reached_now():
            self._refuse(limit)

    async def count(self, limit: Limit) -> None:
        """Count one event (e.g. a refused authentication) against ``limit``."""
        (total,) = await self.counters.incr([limit.key], self.window_s)
        if total >= limit.per_window:
            self._reached_now().add(limit.key)

    def _reached_now(self) -> set[str]:
        window = int(self._clock() // self.window_s)
        if window != self._reached_window:
            self._reached_window = window
            self._reached = set()
        return self._reached

    def _refuse(self, limit: Limit) -> None:
        remaining = self.window_s - (self._clock() % self.window_s)
        raise TooManyRequests(
            f"rate limit: at most {limit.per_window} per {self.window_s} s for {limit.what}",
            retry_after=math.ceil(remaining),
        )
