"""Redis cut off (a partition: connections accepted or not, never answered): the rate
limiter lets requests through within ``PROCTOR_REDIS_TIMEOUT_S`` and then leaves Redis
alone for a while, instead of every request queueing on a connect (tests/multihost found
both)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from server.circuit import CircuitBreaker
from server.ratelimit import REDIS_SKIP_S, RedisCounters
from server.scoring.wakeup import ArqWaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SilentServer:
    """A TCP server that accepts connections and never answers (a Redis behind a
    partition, as far as a client with a timeout can tell)."""

    def __init__(self) -> None:
        self.connections = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def _accept(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._server.close()


@pytest.fixture
async def silent_redis() -> AsyncIterator[tuple[SilentServer, Redis]]:
    server = SilentServer()
    port = await server.start()
    redis = Redis.from_url(
        f"redis://127.0.0.1:{port}/0", socket_timeout=0.3, socket_connect_timeout=0.3
    )
    yield server, redis
    await redis.aclose()
    await server.close()


async def test_counters_fail_open_then_skip_redis_until_the_breaker_closes(
    silent_redis: tuple[SilentServer, Redis], caplog: pytest.LogCaptureFixture
) -> None:
    server, redis = silent_redis
    clock = Clock()
    counters = RedisCounters(redis, breaker=CircuitBreaker(REDIS_SKIP_S, clock=clock))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="server.ratelimit"):
        assert await counters.incr(["key:a", "org:o"], 60) == [0, 0]
    assert time.monotonic() - started < 5  # the socket timeout, not the partition's length
    assert "not limiting" in caplog.text
    assert server.connections == 1

    # while the breaker is open, Redis is not asked at all: no wait, no new connection
    for _ in range(20):
        assert await counters.incr(["key:a"], 60) == [0]
    assert server.connections == 1

    clock.now += REDIS_SKIP_S  # the breaker closes: the next request tries Redis again
    assert await counters.incr(["key:a"], 60) == [0]
    assert server.connections == 2


async def test_wakeups_skip_redis_after_a_failure() -> None:
    class FailingPool:
        calls = 0

        async def enqueue_job(self, *_args: object, **_kwargs: object) -> None:
            FailingPool.calls += 1
            raise ConnectionError("partitioned")

    waker = ArqWaker(FailingPool())
    await waker.wake()
    assert FailingPool.calls == 1
    await asyncio.sleep(0.6)  # past the half-second coalescing of wake-ups
    await waker.wake()
    assert FailingPool.calls == 1  # the breaker is open: the workers poll meanwhile


def test_breaker_opens_for_its_period_after_each_failure() -> None:
    clock = Clock()
    breaker = CircuitBreaker(5.0, clock=clock)
    assert breaker.allows()
    breaker.failed()
    assert not breaker.allows()
    clock.now += 4.9
    assert not breaker.allows()
    clock.now += 0.1
    assert breaker.allows()
