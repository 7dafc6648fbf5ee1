"""How long a client waits before retrying: the server's ``Retry-After``, else a capped
exponential backoff.

Shared by the Proctor SDK (:mod:`clients.sdk._core`) and the chat client of the judge and
the runner (:mod:`clients.llm.chat`); each adds its own jitter to :func:`exponential_delay`.
It imports nothing of Proctor, so the SDK stays a standalone package.

Contract of :func:`parse_retry_after` (pure, total: it never raises): the headers come
from a server we do not control, so anything that is not a well-formed wait is ``None``
(the caller backs off on its own instead), never an exception.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from datetime import UTC, datetime

import httpx

LONGEST_WAIT_S = 86_400.0
"""The longest wait :func:`parse_retry_after` returns: a longer one is read as a day. No
client sleeps that long (each has a far lower limit beyond which it gives up or defers),
and a deferral of a day is still a date a database can store."""

_SECONDS = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)\s*")
"""A plain decimal number of seconds (RFC 9110 says digits only; fractions are accepted
too): no exponent, ``nan``, ``inf`` or digit separators."""


def parse_retry_after(
    headers: httpx.Headers | Mapping[str, str], *, now: datetime | None = None
) -> float | None:
    """The wait, in seconds, a response asks for; ``None`` if it asks for none (or garbage).

    ``retry-after-ms`` (milliseconds, may be fractional; OpenAI and Azure send it) wins
    when it is a valid number. Otherwise ``Retry-After`` is read as a number of seconds
    (integer or decimal) or as an HTTP-date (relative to ``now``, default the current UTC
    time; a date without zone is taken as UTC). Negative waits and past dates give
    ``0.0``; waits beyond :data:`LONGEST_WAIT_S` (or too large for a float) give
    :data:`LONGEST_WAIT_S`. Header names are case-insensitive, also for a plain mapping.
    """
    millis = _seconds(_header(headers, "retry-after-ms"))
    if millis is not None:
        return _bounded(millis / 1000.0)
    value = _header(headers, "retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return _bounded(seconds)
    when = _http_date(value)
    if when is None:
        return None
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return _bounded((when - now).total_seconds())


def exponential_delay(retry: int, *, initial_s: float, max_s: float) -> float:
    """``min(max_s, initial_s * 2 ** retry)`` for retry number ``retry`` (0-based), without
    jitter; any ``retry`` at least 0 is safe (no ``OverflowError``).

    Raises
    ------
    ValueError
        ``retry`` below 0.
    """
    if retry < 0:
        raise ValueError(f"retry is 0-based, got {retry}")
    # 2.0 ** 64 is far past any cap and keeps the power finite
    return min(max_s, initial_s * 2.0 ** min(retry, 64))


def _header(headers: httpx.Headers | Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup (``name`` is lower-case)."""
    if isinstance(headers, httpx.Headers):
        found: str | None = headers.get(name)
        return found
    value = headers.get(name)
    if value is not None:
        return value
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _seconds(value: str | None) -> float | None:
    """``value`` as a plain decimal number; None if it is not one."""
    if value is None or not _SECONDS.fullmatch(value):
        return None
    return float(value)


def _http_date(value: str) -> datetime | None:
    """``value`` as an aware HTTP-date (UTC if it names no zone); None if it is not one."""
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _bounded(seconds: float) -> float:
    """``seconds`` within ``[0, LONGEST_WAIT_S]`` (an overflowed ``inf`` is the longest)."""
    return min(LONGEST_WAIT_S, max(0.0, seconds))
