"""A circuit breaker for calls to a disposable service (Redis).

When Redis is cut off, every call waits out its socket timeout; redis-py's asyncio pool
connects while holding its lock, so the waits queue one behind the other and a partition
brings the API down to about one request per timeout per process (measured by the
multi-host run, tests/multihost). After a failure the breaker skips the service for
``open_s`` seconds, so requests go on at once without it; the first call after that tries
again.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class CircuitBreaker:
    """Open (skip the service) for ``open_s`` seconds after each failure."""

    def __init__(self, open_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.open_s = open_s
        self._clock = clock
        self._open_until = float("-inf")

    def allows(self) -> bool:
        """Whether to call the service now."""
        return self._clock() >= self._open_until

    def failed(self) -> None:
        """The service failed: skip it for the next ``open_s`` seconds."""
        self._open_until = self._clock() + self.open_s
