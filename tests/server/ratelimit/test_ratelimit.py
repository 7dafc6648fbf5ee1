"""The rate limiter on in-process counters with a controlled clock (no I/O)."""

from __future__ import annotations

import pytest

from server.errors import TooManyRequests
from server.ratelimit import Limit, MemoryCounters, RateLimiter


class Clock:
    def __init__(self, now: float = 600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def limiter(clock: Clock) -> RateLimiter:
    return RateLimiter(MemoryCounters(clock), window_s=60, clock=clock)


async def test_hit_counts_every_limit_and_names_the_one_exceeded() -> None:
    clock = Clock()
    rl = limiter(clock)
    key, org = Limit("key:k", 3, "this API key"), Limit("org:o", 4, "this organisation")
    for _ in range(3):
        await rl.hit(key, org)
    with pytest.raises(TooManyRequests, match="this API key") as refused:
        await rl.hit(key, org)
    assert refused.value.retry_after == 60
    other_key = Limit("key:k2", 3, "this API key")
    with pytest.raises(TooManyRequests, match="this organisation"):
        await rl.hit(other_key, org)  # the fifth request of the organisation
    clock.now += 60  # a new window
    await rl.hit(key, org)


async def test_check_refuses_once_count_has_reached_the_limit_in_this_window() -> None:
    clock = Clock(630.0)
    rl = limiter(clock)
    failures = Limit("authfail:203.0.113.7", 2, "refused authentications")
    rl.check(failures)
    await rl.count(failures)
    rl.check(failures)
    await rl.count(failures)
    with pytest.raises(TooManyRequests) as refused:
        rl.check(failures)
    assert refused.value.retry_after == 30
    rl.check(Limit("authfail:198.51.100.9", 2, "refused authentications"))
    clock.now += 30  # the next window forgets it
    rl.check(failures)


@pytest.mark.parametrize(
    ("host", "counted_as"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("testclient", "testclient"),
    ],
)
def test_client_address_counts_an_ipv6_host_by_its_64(host: str, counted_as: str) -> None:
    from starlette.requests import Request

    from server.auth.throttle import client_address

    request = Request({"type": "http", "client": (host, 1234), "headers": []})
    assert client_address(request) == counted_as
