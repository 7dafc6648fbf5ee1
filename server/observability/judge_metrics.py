"""Metrics of the LLM judges: calls and their outcome, retries, 429s, latency, tokens, cost.

The chat client (``clients.llm.chat``) knows nothing of Prometheus. Two things connect
it: ``MeteredTransport`` wraps the httpx transport the client sends through and counts
the provider's 429 answers, and ``ClientMeter`` turns the client's cumulative
``ChatStats`` into counter increments after each call (retries, tokens, cost).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx
from prometheus_client import Counter

from clients.llm.chat import (
    ChatClient,
    ChatDeferred,
    ChatError,
    ChatProtocolError,
    ChatRejected,
    ChatRetriesExhausted,
    ChatStats,
)
from server.observability import metrics

RATE_LIMITED = 429


class MeteredTransport(httpx.AsyncBaseTransport):
    """Passes every request to ``inner`` and counts the 429s of judge ``judge``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, judge: str) -> None:
        self._inner = inner
        self._rate_limited = metrics.JUDGE_RATE_LIMITED.labels(judge=judge)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if response.status_code == RATE_LIMITED:
            self._rate_limited.inc()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def metered_transport(judge: str, base_url: str, concurrency: int) -> MeteredTransport:
    """The network transport httpx would make for a client of ``concurrency`` connections
    to ``base_url`` (the environment's proxy for it included), counted for ``judge``."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    inner = httpx.AsyncHTTPTransport(limits=limits, proxy=_environment_proxy(base_url))
    return MeteredTransport(inner, judge)


def _environment_proxy(url: str) -> str | None:
    """``HTTP(S)_PROXY`` for ``url`` unless ``NO_PROXY`` exempts its host (what httpx does
    when it makes its own transport)."""
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


class ClientMeter:
    """Publishes what a ``ChatClient`` did since the last ``publish`` into the judge's
    counters (the client's stats are cumulative and shared by concurrent calls, so each
    publish adds the difference)."""

    def __init__(self, judge: str, client: ChatClient) -> None:
        self.judge = judge
        self.client = client
        self._last = client.stats

    def publish(self) -> None:
        now, last = self.client.stats, self._last
        self._last = now
        _add(metrics.JUDGE_RETRIES.labels(judge=self.judge), now.retries - last.retries)
        for kind in ("prompt", "completion"):
            used = _tokens(now, kind) - _tokens(last, kind)
            _add(metrics.JUDGE_TOKENS.labels(judge=self.judge, kind=kind), used)
        _add(metrics.JUDGE_COST.labels(judge=self.judge), now.cost - last.cost)


def _tokens(stats: ChatStats, kind: str) -> int:
    return stats.prompt_tokens if kind == "prompt" else stats.completion_tokens


def _add(counter: Counter, amount: float) -> None:
    if amount > 0:
        counter.inc(amount)


def call_outcome(error: ChatError | None) -> str:
    """The ``outcome`` label of a judge call that raised ``error`` (None: ``ok``)."""
    if error is None:
        return "ok"
    if isinstance(error, ChatDeferred):
        return "deferred"
    if isinstance(error, ChatRejected):
        return "rejected"
    if isinstance(error, ChatProtocolError):
        return "protocol_error"
    if isinstance(error, ChatRetriesExhausted):
        return "retries_exhausted"
    return "error"  # a ChatError of a kind added later


@contextmanager
def judge_call(meter: ClientMeter) -> Iterator[None]:
    """Count one judge call around the block: its outcome, wall time, and what the client
    spent meanwhile. A call cut short by anything but a ``ChatError`` (a cancellation at
    shutdown) is timed but not counted as a call."""
    started = time.perf_counter()
    outcome: str | None = None
    try:
        yield
        outcome = call_outcome(None)
    except ChatError as error:
        outcome = call_outcome(error)
        raise
    finally:
        judge = meter.judge
        metrics.JUDGE_DURATION.labels(judge=judge).observe(time.perf_counter() - started)
        if outcome is not None:
            metrics.JUDGE_CALLS.labels(judge=judge, outcome=outcome).inc()
        meter.publish()
