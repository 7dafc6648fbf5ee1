"""An endpoint's requests and tokens per minute, held over every worker.

The counts are the rate limiter's fixed one-minute windows (``server.ratelimit.Counters``):
in Redis, shared by every ``proctor run-worker``, or in process on the embedded default.
Before a call, the endpoint's request count of this minute is raised by one and its token
count read; past either limit the call waits for the next minute (and counts there). After
the call the tokens the model reported are added. Counters that are unavailable (Redis
down) read zero: calls go on unpaced rather than stop, as requests to the API do.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from server.ratelimit import Counters

WINDOW_S = 60
MAX_SLEEP_S = 1.0
"""A wait is slept in steps of at most this, so a pause or cancel is seen soon."""


@dataclass
class EndpointPace:
    """The pace of one model's endpoint (``None`` limits: unpaced)."""

    counters: Counters
    model_id: uuid.UUID
    requests_per_minute: int | None
    tokens_per_minute: int | None
    clock: Callable[[], float] = field(default=time.time)

    @property
    def paced(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    def _keys(self) -> tuple[str, str]:
        return f"run-requests:{self.model_id}", f"run-tokens:{self.model_id}"

    async def wait_turn(self, stopped: Callable[[], bool]) -> None:
        """Return once a call fits this minute's limits (or ``stopped()`` says to give up)."""
        requests_key, tokens_key = self._keys()
        while not stopped():
            fits = True
            if self.requests_per_minute is not None:
                (count,) = await self.counters.incr([requests_key], WINDOW_S)
                fits = count <= self.requests_per_minute
            if fits and self.tokens_per_minute is not None:
                (tokens,) = await self.counters.incr([tokens_key], WINDOW_S, 0)
                fits = tokens < self.tokens_per_minute
            if fits:
                return
            left = WINDOW_S - self.clock() % WINDOW_S
            await asyncio.sleep(min(MAX_SLEEP_S, left + 0.01))

    async def spent(self, tokens: int) -> None:
        """Count ``tokens`` against this minute's token limit."""
        if self.tokens_per_minute is not None and tokens > 0:
            await self.counters.incr([self._keys()[1]], WINDOW_S, tokens)
