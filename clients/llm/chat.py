"""An OpenAI-compatible chat-completions client with retries, deferral and bounded concurrency.

Used by the LLM judge (and the model runner) to call ``POST {base_url}/chat/completions``
on any server that speaks the OpenAI protocol (OpenAI, vLLM, llama.cpp, OpenRouter, ...).

Contract
--------
* :meth:`ChatClient.complete` either returns a :class:`ChatResult` or raises a
  :class:`ChatError`; no ``httpx`` exception escapes it. The tree::

      ChatError
      ├── ChatDeferred          the provider asked us to wait longer than RetryPolicy.max_wait_s
      ├── ChatRetriesExhausted  every attempt failed with a retryable error
      ├── ChatRejected          a non-retryable status (400, 401, 403, 404, 422, 3xx, ...)
      │   └── ChatContextOverflow   the prompt does not fit the model's context (whatever
      │                             the status: 400 from OpenAI or vLLM, 500 from llama.cpp)
      └── ChatProtocolError     a 2xx whose body is not a chat completion

* Retried: HTTP 408, 409, 429 and 5xx (except a context overflow, which no retry mends:
  :func:`says_context_overflow`), and every ``httpx.TransportError`` (timeouts, refused
  or reset connections, remote protocol errors) or ``httpx.DecodingError``. The wait before
  the next attempt is the server's ``retry-after-ms`` / ``Retry-After`` when it sent one
  (:func:`~clients.sdk.retry_wait.parse_retry_after`), else :func:`backoff_delay`. A
  server-requested wait longer than ``max_wait_s`` raises :class:`ChatDeferred` at once,
  without sleeping, so the caller can reschedule the job instead of parking a worker.
  Deferral is checked before exhaustion: a long ``Retry-After`` on the last attempt still
  defers.
* Concurrency is bounded by an ``asyncio.Semaphore`` held only for the HTTP exchange itself
  (request sent, response fully read), never while sleeping between attempts, so a
  rate-limited call does not occupy a slot.
* The API key is sent only in the ``Authorization`` header, secret headers only as
  themselves. They are kept out of ``repr`` and redacted from every error message (a
  server may echo them back in an error body).
* Networking happens only through the client's own ``httpx.AsyncClient``; pass
  ``transport=`` to route it elsewhere (as with httpx itself), and ``sleep=`` / ``random=``
  to make the retry timing deterministic in tests.
* The hot path is kept cheap: ``json`` and plain dict access, no pydantic, no logging.
"""

from __future__ import annotations

import asyncio
import json
import math
import random as _random_module
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx

from clients.sdk.retry_wait import exponential_delay, parse_retry_after

__all__ = [
    "RETRYABLE_STATUSES",
    "ChatClient",
    "ChatContextOverflow",
    "ChatDeferred",
    "ChatEndpoint",
    "ChatError",
    "ChatProtocolError",
    "ChatRejected",
    "ChatResult",
    "ChatRetriesExhausted",
    "ChatStats",
    "Pricing",
    "RetryPolicy",
    "Usage",
    "backoff_delay",
    "parse_retry_after",
    "says_context_overflow",
]

#: HTTP statuses that are retried (besides every 5xx, which is retried too).
RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 409, 429})

#: Maximum length of a response-body excerpt carried by an error.
EXCERPT_CHARS = 300

#: What inference servers say when a prompt is longer than the context: OpenAI's error code,
#: vLLM's and OpenAI's message, llama.cpp's message (in lower case).
CONTEXT_OVERFLOW_MARKS: tuple[str, ...] = (
    "context_length_exceeded",
    "maximum context length",
    "exceeds the available context size",
    "exceed_context_size_error",
)


def says_context_overflow(body: str) -> bool:
    """Whether an error body says the prompt does not fit the model's context."""
    lowered = body.lower()
    return any(mark in lowered for mark in CONTEXT_OVERFLOW_MARKS)


# --------------------------------------------------------------------------- #
# Configuration and results
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class ChatEndpoint:
    """Where and how to call: ``POST {base_url}/chat/completions``.

    ``base_url`` is the API root including the version, e.g. ``http://127.0.0.1:8000/v1``
    (a trailing slash is ignored). ``api_key``, when set, is sent as ``Authorization:
    Bearer``; ``secret_headers`` (name, value) are sent with every request (a provider's
    own key header, an organisation id); both are excluded from ``repr`` and every value is
    redacted from error messages. ``max_tokens`` is sent only when not ``None``, ``stop``
    only when not empty. ``connect_timeout_s`` bounds connecting (and waiting for a pooled
    connection); ``read_timeout_s`` bounds each read and write of the exchange.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    secret_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try.

    ``max_attempts`` counts HTTP exchanges (the first one included). Without a server hint
    the wait after failed attempt *n* is ``backoff_delay(n, policy, r)``: exponential from
    ``base_delay_s``, capped at ``max_delay_s``, with jitter. A server-requested wait
    (``Retry-After``) is honoured as is, unless it exceeds ``max_wait_s``, in which case
    :class:`ChatDeferred` is raised instead of sleeping.
    """

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_wait_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Pricing:
    """Price in currency units per million tokens: ``cost = tokens / 1e6 * price``."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` under this price list."""
        return (
            usage.prompt_tokens / 1e6 * self.input_per_mtok
            + usage.completion_tokens / 1e6 * self.output_per_mtok
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the server (zeros when it reported none)."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One successful completion.

    ``content`` is ``choices[0].message.content``; ``reasoning`` its ``reasoning_content``
    (or ``reasoning``) when the server returned one. ``latency_s`` is the wall time of the
    successful HTTP exchange only; ``waited_s`` the total time slept between attempts;
    ``attempts`` the number of HTTP exchanges made (1 = no retry). ``model`` is the model
    name the server reported (the requested one if it reported none).
    """

    content: str
    reasoning: str | None
    usage: Usage
    cost: float
    latency_s: float
    attempts: int
    waited_s: float
    model: str
    finish_reason: str | None


@dataclass(frozen=True, slots=True)
class ChatStats:
    """Cumulative counters of a :class:`ChatClient` (a snapshot).

    ``calls`` counts completions returned, ``errors`` the :class:`ChatError` raised
    (``deferred`` of them :class:`ChatDeferred`), ``attempts`` all HTTP exchanges tried
    and ``retries`` the re-attempts among them. ``latency_s`` sums the latency of the
    successful exchanges, ``waited_s`` all sleeps between attempts; tokens and ``cost``
    cover successful calls.
    """

    calls: int
    errors: int
    attempts: int
    retries: int
    deferred: int
    latency_s: float
    waited_s: float
    prompt_tokens: int
    completion_tokens: int
    cost: float


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


class ChatError(Exception):
    """Base of every error raised by :meth:`ChatClient.complete`."""


class ChatDeferred(ChatError):
    """The provider asked us to wait ``wait_s`` seconds, more than ``RetryPolicy.max_wait_s``.

    Nothing was slept. The caller should reschedule the job at ``now + wait_s``.
    ``reason`` says what asked (e.g. ``"HTTP 429"``).
    """

    def __init__(self, wait_s: float, reason: str, *, attempts: int = 1) -> None:
        super().__init__(f"{reason}: server asked to retry in {wait_s:.3f} s (deferred)")
        self.wait_s = wait_s
        self.reason = reason
        self.attempts = attempts


class ChatRetriesExhausted(ChatError):
    """All ``attempts`` failed with retryable errors.

    ``last_status`` is the HTTP status of the last attempt (``None`` if it failed at the
    transport level); ``last_error`` describes it (status and body excerpt, or the httpx
    exception).
    """

    def __init__(self, attempts: int, last_status: int | None, last_error: str) -> None:
        super().__init__(f"gave up after {attempts} attempt(s); last error: {last_error}")
        self.attempts = attempts
        self.last_status = last_status
        self.last_error = last_error


class ChatRejected(ChatError):
    """A non-retryable, non-2xx status (400, 401, 403, 404, 422, ...); not retried.

    ``body`` is a short excerpt of the response body, with the API key redacted;
    ``attempts`` the HTTP exchanges made, this one included (earlier ones may have been
    retried 5xx answers).
    """

    def __init__(self, status: int, body: str, *, attempts: int = 1) -> None:
        super().__init__(f"HTTP {status} rejected: {body}")
        self.status = status
        self.body = body
        self.attempts = attempts


class ChatContextOverflow(ChatRejected):
    """The prompt is longer than the model's context (:func:`says_context_overflow`); not
    retried, whatever the status: the same prompt never fits. An item the model cannot
    answer, not a broken endpoint."""


class ChatProtocolError(ChatError):
    """A 2xx whose body is not a chat completion (bad JSON, no choices, no content).

    Not retried. ``status`` and ``body`` (an excerpt, API key redacted) describe it.
    """

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(f"{message} (HTTP {status}): {body}")
        self.status = status
        self.body = body


# --------------------------------------------------------------------------- #
# Pure helpers
# --------------------------------------------------------------------------- #


def backoff_delay(attempt: int, policy: RetryPolicy, random: float) -> float:
    """The wait after failed attempt ``attempt`` (1-based) when the server gave no hint.

    Pure. ``cap = min(max_delay_s, base_delay_s * 2 ** (attempt - 1))`` and the result is
    ``cap / 2 + random * cap / 2`` ("equal jitter"), ``random`` in ``[0, 1]`` (clamped).

    Why equal jitter: it decorrelates clients that failed together (the point of jitter)
    while guaranteeing at least half of the exponential wait. "Full jitter"
    (``random * cap``) spreads load slightly better, but can retry a failing server almost
    immediately, which for a single judge hammering an overloaded provider is the wrong
    trade. Both the lower and the upper bound grow with ``attempt`` until ``max_delay_s``;
    the result never exceeds ``max_delay_s``.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    cap = exponential_delay(attempt - 1, initial_s=policy.base_delay_s, max_s=policy.max_delay_s)
    jitter = min(1.0, max(0.0, random))
    return cap / 2.0 + jitter * cap / 2.0


# --------------------------------------------------------------------------- #
# The client
# --------------------------------------------------------------------------- #


class _Retry:
    """Internal outcome of one attempt that may be retried."""

    __slots__ = ("error", "response", "status")

    def __init__(self, status: int | None, error: str, response: httpx.Response | None) -> None:
        self.status = status
        self.error = error
        self.response = response


class ChatClient:
    """A chat-completions client for one endpoint; share one per endpoint.

    ``concurrency`` bounds the HTTP exchanges in flight (and sizes the connection pool).
    ``pricing`` turns usage into cost. ``transport`` replaces httpx's network transport
    (then the pool limits are the transport's own); ``sleep`` and ``random`` (a ``[0, 1)``
    source) drive the waits between attempts. Use as ``async with ChatClient(...) as c:``
    or call :meth:`aclose` (which also closes an injected transport, as httpx does).
    """

    def __init__(
        self,
        endpoint: ChatEndpoint,
        *,
        retry: RetryPolicy = RetryPolicy(),  # frozen, hence safe to share
        concurrency: int = 8,
        pricing: Pricing = Pricing(),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: Callable[[], float] = _random_module.random,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if retry.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {retry.max_attempts}")
        base = endpoint.base_url.rstrip("/")
        if urlsplit(base).scheme not in {"http", "https"}:
            raise ValueError(f"base_url must be an http(s) URL, got {endpoint.base_url!r}")
        self.endpoint = endpoint
        self.retry = retry
        self.pricing = pricing
        self._url = base + "/chat/completions"
        self._text_url = base + "/completions"
        self._secrets = _secrets_of(endpoint)
        self._sleep = sleep
        self._random = random
        self._semaphore = asyncio.Semaphore(concurrency)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        headers.update(endpoint.secret_headers)
        timeout = httpx.Timeout(
            connect=endpoint.connect_timeout_s,
            read=endpoint.read_timeout_s,
            write=endpoint.read_timeout_s,
            pool=endpoint.connect_timeout_s,
        )
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.AsyncClient(
            headers=headers, timeout=timeout, limits=limits, transport=transport
        )
        # Cumulative counters (plain attributes: cheap to bump, snapshotted by ``stats``).
        self._calls = 0
        self._errors = 0
        self._attempts = 0
        self._retries = 0
        self._deferred = 0
        self._latency_s = 0.0
        self._waited_s = 0.0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cost = 0.0

    @property
    def stats(self) -> ChatStats:
        """A snapshot of the cumulative counters."""
        return ChatStats(
            calls=self._calls,
            errors=self._errors,
            attempts=self._attempts,
            retries=self._retries,
            deferred=self._deferred,
            latency_s=self._latency_s,
            waited_s=self._waited_s,
            prompt_tokens=self._prompt_tokens,
            completion_tokens=self._completion_tokens,
            cost=self._cost,
        )

    async def aclose(self) -> None:
        """Close the connection pool (and an injected transport)."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int | None = None
    ) -> ChatResult:
        """Send ``messages`` and return the first choice, retrying as the module describes.

        ``max_tokens`` overrides the endpoint's. Raises :class:`ChatDeferred`,
        :class:`ChatRetriesExhausted`, :class:`ChatRejected` or :class:`ChatProtocolError`.
        """
        try:
            return await self._complete(messages, max_tokens)
        except ChatError:
            self._errors += 1
            raise

    async def complete_text(self, prompt: str, *, max_tokens: int | None = None) -> ChatResult:
        """Send a raw ``prompt`` to ``POST {base_url}/completions`` (a base model behind a
        chat template rendered by the caller) and return ``choices[0].text`` as the
        result's ``content``; retries and errors as :meth:`complete`."""
        try:
            return await self._exchange(self._text_url, {"prompt": prompt}, max_tokens, text=True)
        except ChatError:
            self._errors += 1
            raise

    async def _complete(
        self, messages: Sequence[Mapping[str, str]], max_tokens: int | None
    ) -> ChatResult:
        listed = [m if isinstance(m, dict) else dict(m) for m in messages]
        return await self._exchange(self._url, {"messages": listed}, max_tokens, text=False)

    async def _exchange(
        self, url: str, fields: dict[str, Any], max_tokens: int | None, *, text: bool
    ) -> ChatResult:
        endpoint = self.endpoint
        payload: dict[str, Any] = {
            "model": endpoint.model,
            **fields,
            "temperature": endpoint.temperature,
        }
        limit = endpoint.max_tokens if max_tokens is None else max_tokens
        if limit is not None:
            payload["max_tokens"] = limit
        if endpoint.stop:
            payload["stop"] = list(endpoint.stop)
        body = json.dumps(payload).encode()
        policy = self.retry
        attempts = 0
        waited = 0.0
        while True:
            attempts += 1
            self._attempts += 1
            failure: _Retry | None = None
            async with self._semaphore:  # held for the exchange only, never while sleeping
                started = time.perf_counter()
                try:
                    response = await self._client.post(url, content=body)
                except (httpx.TransportError, httpx.DecodingError) as exc:
                    failure = _Retry(None, f"{type(exc).__name__}: {exc}", None)
                latency = time.perf_counter() - started
            if failure is None:
                status = response.status_code
                if 200 <= status < 300:
                    result = self._parse(response, latency, attempts, waited, text=text)
                    self._calls += 1
                    self._latency_s += latency
                    self._prompt_tokens += result.usage.prompt_tokens
                    self._completion_tokens += result.usage.completion_tokens
                    self._cost += result.cost
                    return result
                excerpt = self._excerpt(response)
                if says_context_overflow(excerpt):
                    raise ChatContextOverflow(status, excerpt, attempts=attempts)
                if status not in RETRYABLE_STATUSES and status < 500:
                    raise ChatRejected(status, excerpt, attempts=attempts)
                failure = _Retry(status, f"HTTP {status}: {excerpt}", response)

            wait = None if failure.response is None else parse_retry_after(failure.response.headers)
            if wait is not None and wait > policy.max_wait_s:
                self._deferred += 1
                reason = f"HTTP {failure.status}"
                raise ChatDeferred(wait, reason, attempts=attempts)
            if attempts >= policy.max_attempts:
                raise ChatRetriesExhausted(attempts, failure.status, self.redact(failure.error))
            if wait is None:
                wait = backoff_delay(attempts, policy, self._random())
            self._retries += 1
            self._waited_s += wait
            waited += wait
            await self._sleep(wait)

    def _parse(
        self,
        response: httpx.Response,
        latency: float,
        attempts: int,
        waited: float,
        *,
        text: bool = False,
    ) -> ChatResult:
        """Turn a 2xx response into a :class:`ChatResult` (or raise ChatProtocolError);
        ``text``: a text completion (``choices[0].text``), else a chat completion."""
        try:
            data = json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            raise self._protocol_error("body is not JSON", response) from None
        if not isinstance(data, dict):
            raise self._protocol_error("body is not a JSON object", response)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            what = "error" if "error" in data else "no choices"
            raise self._protocol_error(f"not a chat completion ({what})", response)
        choice = choices[0]
        if text:
            message = {"content": choice.get("text")} if isinstance(choice, dict) else None
        else:
            message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise self._protocol_error("choices[0] has no message", response)
        content = _text(message.get("content"))
        if content is None:
            raise self._protocol_error("choices[0].message has no content", response)
        reasoning = _text(message.get("reasoning_content"))
        if reasoning is None:
            reasoning = _text(message.get("reasoning"))
        usage = _usage(data.get("usage"))
        finish = choice.get("finish_reason")
        model = data.get("model")
        return ChatResult(
            content=content,
            reasoning=reasoning,
            usage=usage,
            cost=self.pricing.cost(usage),
            latency_s=latency,
            attempts=attempts,
            waited_s=waited,
            model=model if isinstance(model, str) else self.endpoint.model,
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def redact(self, text: str) -> str:
        """``text`` with every secret of the endpoint (its key, its secret headers' values)
        replaced by ``[redacted]``."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    def _excerpt(self, response: httpx.Response) -> str:
        """A short, single-line excerpt of the body, with the API key redacted."""
        # Redact the whole body before cutting it, so no fragment of the key can survive.
        raw = self.redact(response.content.decode("utf-8", errors="replace"))
        text = " ".join(raw.split())
        return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"

    def _protocol_error(self, message: str, response: httpx.Response) -> ChatProtocolError:
        return ChatProtocolError(message, status=response.status_code, body=self._excerpt(response))


MIN_SECRET_PART = 8
"""The shortest word of a header value redacted on its own (shorter ones are schemes)."""


def _secrets_of(endpoint: ChatEndpoint) -> list[str]:
    """What to redact: the key, each secret header's value and each of its words of
    ``MIN_SECRET_PART`` characters or more (a server echoes the token of ``Bearer
    sk-...`` without its scheme); longest first, so a secret containing another is
    redacted whole."""
    values = [endpoint.api_key or "", *(value for _, value in endpoint.secret_headers)]
    found = {v for v in values if v}
    found |= {word for v in values for word in v.split() if len(word) >= MIN_SECRET_PART}
    return sorted(found, key=len, reverse=True)


def _text(value: object) -> str | None:
    """A message field as text: a string, or the text parts of a content-part list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            part["text"]
            for part in value
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "".join(parts) if parts else None
    return None


def _usage(value: object) -> Usage:
    """``usage`` as :class:`Usage`; missing or malformed counts are zeros."""
    if not isinstance(value, dict):
        return Usage(0, 0)
    return Usage(_count(value.get("prompt_tokens")), _count(value.get("completion_tokens")))


def _count(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and math.isfinite(value):
        return max(0, int(value))
    return 0
