"""clients.llm.chat against a real HTTP server speaking the OpenAI chat-completions protocol.

A Starlette app runs under uvicorn in a background thread (its own event loop) on a free
127.0.0.1 port. Each test gets its own :class:`Scenario` under a unique URL prefix
(``/s/<id>/v1/chat/completions``), so a handler still running from an earlier test (a
timed-out request) cannot disturb another test's counters. A scenario scripts the
response to each request and records what the server saw: the request, its arrival and
finish times (``time.monotonic``, shared by both threads) and the peak number in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from clients.llm.chat import (
    ChatClient,
    ChatDeferred,
    ChatEndpoint,
    ChatProtocolError,
    ChatRejected,
    ChatRetriesExhausted,
    Pricing,
    RetryPolicy,
    Usage,
    backoff_delay,
    parse_retry_after,
)
from tests.support.ports import free_port

API_KEY = "sk-test-SECRET-4f9c2a"
MESSAGES = [{"role": "user", "content": "Is 2 + 2 = 4?"}]


# --------------------------------------------------------------------------- #
# The scripted server
# --------------------------------------------------------------------------- #


def completion(
    content: str = "ok",
    *,
    reasoning_content: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "served-model",
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """An OpenAI chat-completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@dataclass(frozen=True)
class Step:
    """One scripted response: status, body (dict → JSON, str → text), headers, delay."""

    status: int = 200
    body: dict[str, Any] | str | None = None  # None → completion()
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    def response(self) -> Response:
        if isinstance(self.body, str):
            return Response(self.body, status_code=self.status, headers=self.headers)
        body = completion() if self.body is None else self.body
        return JSONResponse(body, status_code=self.status, headers=self.headers)


OK = Step()


@dataclass
class Seen:
    """A request as the server saw it."""

    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    arrived: float
    finished: float = 0.0


class Scenario:
    """Scripted behaviour and server-side observations for one test.

    ``respond(seen, index)`` picks the step for the ``index``-th request (0-based); it is
    called in the server thread under the scenario's lock.
    """

    def __init__(self, respond: Callable[[Seen, int], Step]) -> None:
        self.respond = respond
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.base_url = ""

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.seen)


class ScriptedServer:
    """The uvicorn server and its scenario registry."""

    def __init__(self) -> None:
        self.scenarios: dict[str, Scenario] = {}
        self.ids = itertools.count()
        self.port = 0

    def scenario(self, respond: Callable[[Seen, int], Step]) -> Scenario:
        sid = str(next(self.ids))
        scenario = Scenario(respond)
        scenario.base_url = f"http://127.0.0.1:{self.port}/s/{sid}/v1/"  # trailing slash
        self.scenarios[sid] = scenario
        return scenario

    def sequence(self, *steps: Step, then: Step = OK) -> Scenario:
        """A scenario answering with ``steps`` in order, then ``then`` forever."""
        return self.scenario(lambda _seen, i: steps[i] if i < len(steps) else then)

    async def handle(self, request: Request) -> Response:
        scenario = self.scenarios[request.path_params["sid"]]
        seen = Seen(
            body=json.loads(await request.body()),
            headers=dict(request.headers),
            path=request.url.path,
            arrived=time.monotonic(),
        )
        with scenario.lock:
            step = scenario.respond(seen, len(scenario.seen))
            scenario.seen.append(seen)
            scenario.in_flight += 1
            scenario.max_in_flight = max(scenario.max_in_flight, scenario.in_flight)
        try:
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
        finally:
            with scenario.lock:
                scenario.in_flight -= 1
                seen.finished = time.monotonic()
        return step.response()


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    app = Starlette(
        routes=[Route("/s/{sid}/v1/chat/completions", scripted.handle, methods=["POST"])]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    scripted.port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield scripted
    finally:
        uv.should_exit = True
        thread.join(10)
        sock.close()


class RecordingSleep:
    """An injected ``sleep`` that records each requested delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def endpoint(scenario: Scenario, **overrides: Any) -> ChatEndpoint:
    values: dict[str, Any] = {"base_url": scenario.base_url, "model": "judge-model"}
    values.update(overrides)
    return ChatEndpoint(**values)


# --------------------------------------------------------------------------- #
# Success
# --------------------------------------------------------------------------- #


async def test_success_usage_cost_and_request_shape(server: ScriptedServer) -> None:
    scenario = server.sequence(
        Step(body=completion("yes", usage={"prompt_tokens": 1000, "completion_tokens": 500}))
    )
    pricing = Pricing(input_per_mtok=2.0, output_per_mtok=8.0)
    ep = endpoint(scenario, api_key=API_KEY, temperature=0.25, max_tokens=64)
    async with ChatClient(ep, pricing=pricing) as client:
        result = await client.complete(MESSAGES)
        stats = client.stats

    assert result.content == "yes"
    assert result.reasoning is None
    assert result.usage == Usage(prompt_tokens=1000, completion_tokens=500)
    assert result.cost == pytest.approx(1000 / 1e6 * 2.0 + 500 / 1e6 * 8.0)
    assert result.model == "served-model"
    assert result.finish_reason == "stop"
    assert (result.attempts, result.waited_s) == (1, 0.0)
    assert 0 < result.latency_s < 5

    (seen,) = scenario.seen
    assert seen.path.endswith("/v1/chat/completions")  # trailing slash of base_url stripped
    assert seen.body == {
        "model": "judge-model",
        "messages": MESSAGES,
        "temperature": 0.25,
        "max_tokens": 64,
    }
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.headers["content-type"] == "application/json"

    assert (stats.calls, stats.attempts, stats.retries, stats.errors) == (1, 1, 0, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (1000, 500)
    assert stats.cost == pytest.approx(result.cost)
    assert stats.latency_s == pytest.approx(result.latency_s)
    assert API_KEY not in repr(ep)


async def test_missing_usage_is_zero_and_no_auth_or_max_tokens_when_unset(
    server: ScriptedServer,
) -> None:
    scenario = server.sequence(OK)
    async with ChatClient(endpoint(scenario), pricing=Pricing(1.0, 1.0)) as client:
        result = await client.complete(MESSAGES)
    assert result.usage == Usage(0, 0)
    assert result.cost == 0.0
    (seen,) = scenario.seen
    assert "authorization" not in seen.headers
    assert "max_tokens" not in seen.body


async def test_per_call_max_tokens_overrides_endpoint(server: ScriptedServer) -> None:
    scenario = server.sequence(OK)
    async with ChatClient(endpoint(scenario, max_tokens=64)) as client:
        await client.complete(MESSAGES, max_tokens=7)
    assert scenario.seen[0].body["max_tokens"] == 7


async def test_reasoning_content_captured(server: ScriptedServer) -> None:
    scenario = server.sequence(
        Step(body=completion("42", reasoning_content="6 * 7 = 42")),
        Step(body={"model": "m", "choices": [{"message": {"content": "x", "reasoning": "r"}}]}),
    )
    async with ChatClient(endpoint(scenario)) as client:
        first = await client.complete(MESSAGES)
        second = await client.complete(MESSAGES)
    assert (first.content, first.reasoning) == ("42", "6 * 7 = 42")
    assert (second.content, second.reasoning, second.finish_reason) == ("x", "r", None)


# --------------------------------------------------------------------------- #
# Retry-After and retries
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Retry-After": "1"}, 1.0), ({"retry-after-ms": "50"}, 0.05)],
    ids=["retry-after-1s", "retry-after-ms-50"],
)
async def test_429_retry_after_honoured(
    server: ScriptedServer, headers: dict[str, str], expected: float
) -> None:
    scenario = server.sequence(Step(429, {"error": {"message": "slow down"}}, headers))
    sleep = RecordingSleep()
    async with ChatClient(endpoint(scenario), sleep=sleep) as client:
        result = await client.complete(MESSAGES)
        stats = client.stats
    assert sleep.delays == [pytest.approx(expected)]
    assert sleep.delays[0] >= expected
    assert result.attempts == 2
    assert result.waited_s == pytest.approx(expected)
    assert stats.retries == 1
    assert stats.waited_s == pytest.approx(expected)
    assert scenario.count == 2


async def test_retry_after_real_time(server: ScriptedServer) -> None:
    """With the real asyncio.sleep, the retry reaches the server ≥ 1 s after the 429."""
    scenario = server.sequence(Step(429, {"error": "rate limited"}, {"Retry-After": "1"}))
    async with ChatClient(endpoint(scenario)) as client:
        started = time.monotonic()
        result = await client.complete(MESSAGES)
        elapsed = time.monotonic() - started
    first, second = scenario.seen
    assert second.arrived - first.finished >= 1.0  # measured by the server
    assert elapsed >= 1.0
    assert result.attempts == 2
    assert result.waited_s == 1.0
    assert result.latency_s < 1.0  # latency covers the successful exchange only


async def test_http_date_retry_after(server: ScriptedServer) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    scenario = server.sequence(Step(503, "busy", {"Retry-After": when}))
    sleep = RecordingSleep()
    async with ChatClient(endpoint(scenario), sleep=sleep) as client:
        result = await client.complete(MESSAGES)
    # HTTP-dates have 1 s resolution: the wait is in (2 - ε, 3].
    (delay,) = sleep.delays
    assert 1.5 < delay <= 3.0
    assert result.attempts == 2


async def test_503_then_success_uses_backoff(server: ScriptedServer) -> None:
    scenario = server.sequence(Step(503, "overloaded"), Step(500, "oops"))
    sleep = RecordingSleep()
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    async with ChatClient(endpoint(scenario), retry=policy, sleep=sleep, random=lambda: 0.5) as c:
        result = await c.complete(MESSAGES)
    assert sleep.delays == [backoff_delay(1, policy, 0.5), backoff_delay(2, policy, 0.5)]
    assert sleep.delays == [0.375, 0.75]
    assert (result.attempts, result.waited_s, result.content) == (3, 1.125, "ok")


@pytest.mark.parametrize("status", [408, 409, 429, 502, 599])
async def test_retryable_statuses(server: ScriptedServer, status: int) -> None:
    scenario = server.sequence(Step(status, "try again"))
    async with ChatClient(endpoint(scenario), sleep=RecordingSleep()) as client:
        assert (await client.complete(MESSAGES)).attempts == 2


async def test_read_timeout_then_success(server: ScriptedServer) -> None:
    scenario = server.sequence(Step(delay_s=3.0))  # far above the timeout: room for a busy machine
    sleep = RecordingSleep()
    ep = endpoint(scenario, read_timeout_s=0.2)
    async with ChatClient(ep, sleep=sleep) as client:
        started = time.monotonic()
        result = await client.complete(MESSAGES)
        elapsed = time.monotonic() - started
    assert result.attempts == 2
    assert len(sleep.delays) == 1
    assert 0.2 <= elapsed < 3.0  # the client gave up on the slow response, not waited it out
    assert scenario.count == 2


async def test_connection_refused_exhausts_retries() -> None:
    ep = ChatEndpoint(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m")
    sleep = RecordingSleep()
    policy = RetryPolicy(max_attempts=3)
    async with ChatClient(ep, retry=policy, sleep=sleep) as client:
        with pytest.raises(ChatRetriesExhausted) as info:
            await client.complete(MESSAGES)
        stats = client.stats
    assert info.value.attempts == 3
    assert info.value.last_status is None
    assert "ConnectError" in info.value.last_error
    assert len(sleep.delays) == 2  # no sleep after the last attempt
    assert all(0.0 < d <= policy.max_delay_s for d in sleep.delays)
    assert (stats.attempts, stats.retries, stats.errors, stats.calls) == (3, 2, 1, 0)


async def test_persistent_503_exhausts_with_last_status(server: ScriptedServer) -> None:
    scenario = server.sequence(then=Step(503, "still overloaded"))
    async with ChatClient(
        endpoint(scenario), retry=RetryPolicy(max_attempts=4), sleep=RecordingSleep()
    ) as client:
        with pytest.raises(ChatRetriesExhausted) as info:
            await client.complete(MESSAGES)
    assert (info.value.attempts, info.value.last_status) == (4, 503)
    assert "still overloaded" in info.value.last_error
    assert scenario.count == 4


# --------------------------------------------------------------------------- #
# Non-retryable outcomes
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_4xx_rejected_without_retry_and_key_redacted(
    server: ScriptedServer, status: int
) -> None:
    echo = {"error": {"message": f"Invalid request for key {API_KEY}: bad 'messages'"}}
    scenario = server.sequence(Step(status, echo))
    sleep = RecordingSleep()
    async with ChatClient(endpoint(scenario, api_key=API_KEY), sleep=sleep) as client:
        with pytest.raises(ChatRejected) as info:
            await client.complete(MESSAGES)
    assert info.value.status == status
    assert "bad 'messages'" in info.value.body
    assert API_KEY not in str(info.value)
    assert API_KEY not in info.value.body
    assert API_KEY not in repr(info.value.args)
    assert scenario.count == 1
    assert sleep.delays == []


async def test_retry_after_beyond_cap_defers(server: ScriptedServer) -> None:
    scenario = server.sequence(Step(429, "quota", {"Retry-After": "120"}))
    sleep = RecordingSleep()
    policy = RetryPolicy(max_wait_s=30.0)
    async with ChatClient(endpoint(scenario), retry=policy, sleep=sleep) as client:
        with pytest.raises(ChatDeferred) as info:
            await client.complete(MESSAGES)
        stats = client.stats
    assert info.value.wait_s == 120.0
    assert "429" in info.value.reason
    assert sleep.delays == []  # deferred at once, nothing slept
    assert scenario.count == 1
    assert (stats.deferred, stats.errors) == (1, 1)


@pytest.mark.parametrize(
    "body",
    [
        "this is not json",
        {"object": "chat.completion", "choices": []},
        {"choices": [{"index": 0, "message": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]},
        {"error": {"message": "upstream failed"}},
        '["a", "list"]',
    ],
    ids=["garbage", "no-choices", "no-content", "null-content", "error-object", "list"],
)
async def test_2xx_garbage_is_protocol_error(
    server: ScriptedServer, body: dict[str, Any] | str
) -> None:
    scenario = server.sequence(Step(200, body))
    sleep = RecordingSleep()
    async with ChatClient(endpoint(scenario), sleep=sleep) as client:
        with pytest.raises(ChatProtocolError) as info:
            await client.complete(MESSAGES)
    assert info.value.status == 200
    assert scenario.count == 1
    assert sleep.delays == []


# --------------------------------------------------------------------------- #
# Concurrency
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("wide_transport", [False, True], ids=["own-pool", "wide-transport"])
async def test_concurrency_bound_respected(server: ScriptedServer, wide_transport: bool) -> None:
    """At most ``concurrency`` requests in flight, seen by the server.

    With the client's own transport the pool limit (sized to ``concurrency``) would also
    bound this; the injected transport with a 100-connection pool leaves only the
    semaphore to do it.
    """
    scenario = server.sequence(then=Step(delay_s=0.1))
    transport = (
        httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=100))
        if wide_transport
        else None
    )
    async with ChatClient(endpoint(scenario), concurrency=4, transport=transport) as client:
        started = time.monotonic()
        results = await asyncio.gather(*(client.complete(MESSAGES) for _ in range(20)))
        elapsed = time.monotonic() - started
    assert len(results) == 20
    assert scenario.count == 20
    assert scenario.max_in_flight == 4  # never more, and the bound is actually used
    assert elapsed >= 0.5  # 20 calls x 100 ms / 4 slots


async def test_calls_waiting_on_retry_after_do_not_hold_slots(server: ScriptedServer) -> None:
    """Two rate-limited calls sleep on Retry-After while eight others run through both slots.

    The injected sleep blocks until released, so the limited calls are provably still
    waiting while the others complete; with slots held during the sleep (concurrency=2)
    the others could not start at all.
    """

    def respond(seen: Seen, _index: int) -> Step:
        limited = seen.body["messages"][0]["content"].startswith("limited")
        first = sum(1 for s in scenario.seen if s.body == seen.body) == 0
        if limited and first:
            return Step(429, "rate limited", {"Retry-After": "5"})
        return Step(delay_s=0.05)

    scenario = server.scenario(respond)
    release = asyncio.Event()
    both_sleeping = asyncio.Event()
    sleeping: list[float] = []

    async def gated_sleep(delay: float) -> None:
        sleeping.append(delay)
        if len(sleeping) == 2:
            both_sleeping.set()
        await release.wait()

    def msgs(text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}]

    async with ChatClient(endpoint(scenario), concurrency=2, sleep=gated_sleep) as client:
        limited = [asyncio.create_task(client.complete(msgs(f"limited {i}"))) for i in range(2)]
        # Both limited calls got their 429 and are now sleeping.
        await asyncio.wait_for(both_sleeping.wait(), timeout=10)
        others = await asyncio.wait_for(
            asyncio.gather(*(client.complete(msgs(f"other {i}")) for i in range(8))), timeout=10
        )
        assert len(others) == 8
        assert not any(task.done() for task in limited)  # still waiting on Retry-After
        release.set()
        done = await asyncio.wait_for(asyncio.gather(*limited), timeout=10)
    assert sleeping == [5.0, 5.0]
    assert [r.attempts for r in done] == [2, 2]
    assert scenario.max_in_flight <= 2
    assert scenario.count == 12


async def test_real_time_rate_limited_calls_let_others_proceed(server: ScriptedServer) -> None:
    """Real sleeps: others finish on the server while the limited calls are still waiting."""

    def respond(seen: Seen, index: int) -> Step:
        if index < 2:
            return Step(429, "rate limited", {"retry-after-ms": "600"})
        return Step(delay_s=0.05)

    scenario = server.scenario(respond)
    both_sleeping = asyncio.Event()
    slept: list[float] = []

    async def real_sleep(delay: float) -> None:  # asyncio.sleep, plus a signal
        slept.append(delay)
        if len(slept) == 2:
            both_sleeping.set()
        await asyncio.sleep(delay)

    async with ChatClient(endpoint(scenario), concurrency=2, sleep=real_sleep) as client:
        first = [asyncio.create_task(client.complete(MESSAGES)) for _ in range(2)]
        await asyncio.wait_for(both_sleeping.wait(), timeout=10)
        rest = [asyncio.create_task(client.complete(MESSAGES)) for _ in range(6)]
        results = await asyncio.gather(*first, *rest)
    assert [r.attempts for r in results[:2]] == [2, 2]
    limited_end = max(s.finished for s in scenario.seen[:2])
    others = scenario.seen[2:]
    retries = [s for s in others if s.arrived >= limited_end + 0.6]
    before = [s for s in others if s.finished < limited_end + 0.6]
    assert len(retries) == 2  # the two retries came after their 600 ms wait ...
    assert len(before) == 6  # ... while all six other calls had already been served
    assert scenario.max_in_flight <= 2


# --------------------------------------------------------------------------- #
# Transport injection and construction
# --------------------------------------------------------------------------- #


async def test_injected_transport_is_used() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion("via transport"))

    ep = ChatEndpoint(base_url="http://llm.invalid/v1", model="m")
    async with ChatClient(ep, transport=httpx.MockTransport(handler)) as client:
        result = await client.complete(MESSAGES)
    assert result.content == "via transport"
    assert str(seen[0].url) == "http://llm.invalid/v1/chat/completions"


def test_constructor_validates() -> None:
    ep = ChatEndpoint(base_url="http://127.0.0.1:1/v1", model="m")
    with pytest.raises(ValueError, match="concurrency"):
        ChatClient(ep, concurrency=0)
    with pytest.raises(ValueError, match="max_attempts"):
        ChatClient(ep, retry=RetryPolicy(max_attempts=0))
    with pytest.raises(ValueError, match="http"):
        ChatClient(ChatEndpoint(base_url="127.0.0.1:8000/v1", model="m"))


# --------------------------------------------------------------------------- #
# parse_retry_after
# --------------------------------------------------------------------------- #

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "1"}, 1.0),
        ({"Retry-After": "120"}, 120.0),
        ({"retry-after": " 7 "}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": ".25"}, 0.25),
        ({"retry-after-ms": "50"}, 0.05),
        ({"Retry-After-Ms": "12.5"}, 0.0125),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),  # ms wins
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),  # bad ms: fall back
        ({"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 01 Jan 2025 12:00:30 -0000"}, 30.0),  # zone-less date
        ({"Retry-After": "Wed, 01 Jan 2025 11:59:00 GMT"}, 0.0),  # past
        ({"Retry-After": "-5"}, 0.0),
        ({"retry-after-ms": "-100"}, 0.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": ""}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "1_000"}, None),
        ({"Retry-After": "Wed, 99 Foo 2025"}, None),
        ({"retry-after-ms": "x"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == (
        None if expected is None else pytest.approx(expected)
    )
    assert parse_retry_after(httpx.Headers(headers), now=NOW) == (
        None if expected is None else pytest.approx(expected)
    )


def test_parse_retry_after_date_defaults_to_now() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    wait = parse_retry_after({"Retry-After": when})
    assert wait is not None and 58.0 < wait <= 60.0


# --------------------------------------------------------------------------- #
# backoff_delay
# --------------------------------------------------------------------------- #


def test_backoff_delay_bounds_and_growth() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    for attempt in range(1, 80):
        cap = min(8.0, 0.5 * 2 ** (attempt - 1))
        low = backoff_delay(attempt, policy, 0.0)
        high = backoff_delay(attempt, policy, 1.0)
        assert low == pytest.approx(cap / 2)
        assert high == pytest.approx(cap)
        for r in (0.0, 0.3, 0.999, 1.0, 1.5, -1.0):
            assert cap / 2 <= backoff_delay(attempt, policy, r) <= policy.max_delay_s
    lows = [backoff_delay(a, policy, 0.0) for a in range(1, 8)]
    assert lows == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]  # grows, then capped
    highs = [backoff_delay(a, policy, 1.0) for a in range(1, 8)]
    assert highs == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff_delay(10_000, policy, 1.0) == 8.0  # no overflow
    with pytest.raises(ValueError):
        backoff_delay(0, policy, 0.5)


async def test_secret_headers_and_stop_are_sent_and_every_secret_redacted(
    server: ScriptedServer,
) -> None:
    org_secret = "org-SECRET-77e1"
    echo = {"error": {"message": f"bad key {API_KEY} for org {org_secret}"}}
    scenario = server.sequence(Step(200, completion()), Step(403, echo))
    # the key behind an auth scheme: a server echoes the token without "Bearer"
    headers = (("X-Api-Key", f"Bearer {API_KEY}"), ("OpenAI-Organization", org_secret))
    chosen = endpoint(scenario, secret_headers=headers, stop=("###", "\n\n"))
    assert API_KEY not in repr(chosen) and org_secret not in repr(chosen)
    async with ChatClient(chosen, sleep=RecordingSleep()) as client:
        await client.complete(MESSAGES)
        with pytest.raises(ChatRejected) as info:
            await client.complete(MESSAGES)
    first = scenario.seen[0]
    assert first.headers["x-api-key"] == f"Bearer {API_KEY}"
    assert first.headers["openai-organization"] == org_secret
    assert first.body["stop"] == ["###", "\n\n"]
    assert API_KEY not in str(info.value) and org_secret not in str(info.value)
    assert info.value.body.count("[redacted]") == 2


async def test_no_stop_field_without_stop_sequences(server: ScriptedServer) -> None:
    scenario = server.sequence(Step(200, completion()))
    async with ChatClient(endpoint(scenario)) as client:
        await client.complete(MESSAGES)
    assert "stop" not in scenario.seen[0].body
