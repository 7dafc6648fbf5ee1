"""The retry wait shared by the SDK and the chat client: hostile Retry-After headers give a
bounded wait or None, never an exception; the exponential delay never overflows."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.sdk.retry_wait import LONGEST_WAIT_S, exponential_delay, parse_retry_after

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "NaN"}, None),
        ({"Retry-After": "-inf"}, None),
        ({"Retry-After": "1e3"}, None),  # not a plain decimal
        ({"Retry-After": "0x10"}, None),
        ({"Retry-After": "5 seconds"}, None),
        ({"Retry-After": "\x00"}, None),
        ({"Retry-After": "Mon, 32 Jan 2025 00:00:00 GMT"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({"Retry-After": "-1"}, 0.0),
        ({"Retry-After": "-99999999999999999999"}, 0.0),
        ({"retry-after-ms": "-0.5", "Retry-After": "9"}, 0.0),  # a valid ms still wins
        ({"Retry-After": "Tue, 01 Jan 1980 00:00:00 GMT"}, 0.0),  # long past
        ({"Retry-After": "Wed, 01 Jan 2025 11:59:59 GMT"}, 0.0),  # a second ago
        ({"Retry-After": "86401"}, LONGEST_WAIT_S),
        ({"Retry-After": "99999999999999"}, LONGEST_WAIT_S),  # past timedelta's range
        ({"Retry-After": "9" * 400}, LONGEST_WAIT_S),  # float() would give inf
        ({"retry-after-ms": "9" * 400}, LONGEST_WAIT_S),
        ({"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, LONGEST_WAIT_S),
        ({"Retry-After": "86400"}, 86_400.0),
    ],
)
def test_hostile_and_edge_headers(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected
    assert parse_retry_after(httpx.Headers(headers), now=NOW) == expected


def test_a_naive_now_is_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert parse_retry_after({"Retry-After": "Wed, 01 Jan 2025 12:00:10 GMT"}, now=naive) == 10.0


@given(st.text(max_size=60), st.text(max_size=60))
def test_any_header_text_gives_a_bounded_wait_or_none(seconds: str, millis: str) -> None:
    for headers in ({"Retry-After": seconds}, {"Retry-After": seconds, "retry-after-ms": millis}):
        wait = parse_retry_after(headers, now=NOW)
        assert wait is None or (math.isfinite(wait) and 0.0 <= wait <= LONGEST_WAIT_S)
        if wait is not None:  # a worker can always turn it into a date
            NOW + timedelta(seconds=wait)


def test_exponential_delay_doubles_up_to_the_cap() -> None:
    delays = [exponential_delay(r, initial_s=0.5, max_s=8.0) for r in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert exponential_delay(10**9, initial_s=0.5, max_s=8.0) == 8.0  # no OverflowError
    with pytest.raises(ValueError, match="0-based"):
        exponential_delay(-1, initial_s=0.5, max_s=8.0)
