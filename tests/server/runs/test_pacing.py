"""An endpoint's pace over fixed one-minute windows (``server.runs.pacing``), on the rate
limiter's in-process counters with a clock the test moves: the requests and tokens of a
minute are held to the endpoint's limits, a stop ends a wait, no limit means no wait."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis

from server.ratelimit import MemoryCounters, RedisCounters
from server.runs import pacing
from server.runs.pacing import EndpointPace
from tests.support import services


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_040.0  # 20 s into a minute

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def quick_sleep(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    """``asyncio.sleep`` moves the test's clock instead of waiting."""
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr(pacing.asyncio, "sleep", sleep)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def pace(clock: Clock, rpm: int | None, tpm: int | None) -> EndpointPace:
    return EndpointPace(MemoryCounters(clock=clock), uuid.uuid4(), rpm, tpm, clock=clock)


async def test_the_requests_of_a_minute_wait_for_the_next_past_the_limit(clock: Clock) -> None:
    paced = pace(clock, rpm=3, tpm=None)
    for _ in range(3):
        await paced.wait_turn(lambda: False)
    assert clock.now == 1_000_040.0  # three calls fit this minute
    await paced.wait_turn(lambda: False)
    assert 1_000_080.0 <= clock.now < 1_000_082.0  # the fourth waited for the next minute


async def test_tokens_spent_hold_the_next_call_until_the_window_turns(clock: Clock) -> None:
    paced = pace(clock, rpm=None, tpm=1000)
    await paced.wait_turn(lambda: False)
    await paced.spent(999)
    await paced.wait_turn(lambda: False)
    assert clock.now == 1_000_040.0  # 999 < 1000: still fits
    await paced.spent(5)
    await paced.wait_turn(lambda: False)
    assert clock.now >= 1_000_080.0


async def test_a_stop_ends_the_wait_and_no_limit_never_waits(clock: Clock) -> None:
    paced = pace(clock, rpm=1, tpm=None)
    await paced.wait_turn(lambda: False)
    stops = iter([False, False, True])
    await paced.wait_turn(lambda: next(stops))
    assert clock.now < 1_000_080.0  # gave up before the window turned
    free = pace(clock, rpm=None, tpm=None)
    assert not free.paced
    await free.spent(10**9)


@pytest.mark.redis
async def test_two_workers_share_the_count_of_an_endpoint_in_redis(
    clock: Clock, redis_server: services.RedisServer
) -> None:
    model = uuid.uuid4()
    clients = [Redis.from_url(redis_server.url) for _ in range(2)]
    try:
        first, second = (
            EndpointPace(RedisCounters(c, clock=clock), model, 2, None, clock=clock)
            for c in clients
        )
        await first.wait_turn(lambda: False)
        await second.wait_turn(lambda: False)
        assert clock.now == 1_000_040.0
        await first.wait_turn(lambda: False)  # the third of the minute, over both
        assert clock.now >= 1_000_080.0
    finally:
        for client in clients:
            await client.aclose()
