"""Helpers for the SDK tests (no tests here): the real app served over real HTTP from a
thread (for the blocking client), settings with short sessions, and transports that wrap
the real one to lose a response after the server has acted, or to answer once in place of
the server (a proxy's 429/503), while recording every exchange."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import uvicorn

from server.app import create_app
from server.config import Settings
from tests.support.api import World, seed_world, test_settings

N_ITEMS = 4
SETTLE_S = 0.2
"""Pause before stopping an app whose last request may have woken the in-process scoring
worker: on Python 3.11, ``asyncio.wait_for`` swallows a cancellation that arrives while the
awaited event is being set, and the worker's ``run_forever`` (``wait_for(wake.wait())``)
then never stops, so the lifespan shutdown hangs. Once the worker has taken the wake-up,
cancelling it is safe. (A server bug, reported; not worked around in the server.)"""
"""Items per session: the server's default, so vendors (who may not choose) get it too."""


def sdk_settings(db_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"default_session_items": N_ITEMS}
    values.update(overrides)
    return test_settings(db_url, **values)


async def seeded(db_url: str) -> tuple[str, World]:
    return db_url, await seed_world(db_url)


def model_of(world: World) -> str:
    assert world.a.model_id is not None
    return str(world.a.model_id)


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The real app (lifespan included) under uvicorn in a thread; yields its URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
    )
    thread = threading.Thread(target=server.run, name="sdk-test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        time.sleep(SETTLE_S)
        server.should_exit = True
        thread.join(timeout=30)


Kind = Literal["lose_response", "fail_before", "respond_instead", "respond_after"]


@dataclass
class Fault:
    method: str
    path_end: str
    kind: Kind
    times: int = 1
    error: type[httpx.TransportError] = httpx.ReadError
    response: Callable[[], httpx.Response] | None = None


@dataclass
class Exchange:
    method: str
    path: str
    status: int | None
    """None: no response reached the client (an injected transport error)."""
    authorization: str | None
    reached_server: bool
    user_agent: str | None


@dataclass
class Recorder:
    """Scripted faults and the log of every request (shared by both transports)."""

    faults: list[Fault] = field(default_factory=list)
    log: list[Exchange] = field(default_factory=list)

    def add(self, method: str, path_end: str, kind: Kind, **options: Any) -> None:
        self.faults.append(Fault(method, path_end, kind, **options))

    def take(self, request: httpx.Request) -> Fault | None:
        for fault in self.faults:
            if (
                fault.times > 0
                and request.method == fault.method
                and request.url.path.endswith(fault.path_end)
            ):
                fault.times -= 1
                return fault
        return None

    def record(
        self, request: httpx.Request, status: int | None, *, reached_server: bool = True
    ) -> None:
        self.log.append(
            Exchange(
                request.method,
                request.url.path,
                status,
                request.headers.get("authorization"),
                reached_server,
                request.headers.get("user-agent"),
            )
        )

    def before_sending(self, fault: Fault | None, request: httpx.Request) -> httpx.Response | None:
        """Apply ``fault`` where it acts before the request leaves: raise the injected error
        (``fail_before``) or give the canned response (``respond_instead``); else ``None``."""
        if fault is not None and fault.kind == "fail_before":
            self.record(request, None, reached_server=False)
            raise fault.error("injected before sending", request=request)
        if fault is not None and fault.kind == "respond_instead":
            assert fault.response is not None
            self.record(request, fault.response().status_code, reached_server=False)
            return fault.response()
        return None

    def after_answer(
        self, fault: Fault | None, request: httpx.Request, response: httpx.Response
    ) -> httpx.Response:
        """Record the server's answer, then apply ``fault`` where it acts afterwards: lose the
        response (``lose_response``) or replace it (``respond_after``)."""
        self.record(request, response.status_code)
        if fault is not None and fault.kind == "lose_response":
            raise fault.error("injected after the server answered", request=request)
        if fault is not None and fault.kind == "respond_after":
            assert fault.response is not None
            return fault.response()
        return response

    def calls(self, method: str, path_end: str) -> list[Exchange]:
        return [e for e in self.log if e.method == method and e.path.endswith(path_end)]

    @property
    def tokens(self) -> list[str]:
        """Every bearer token the client sent, in order."""
        return [
            e.authorization.removeprefix("Bearer ") for e in self.log if e.authorization is not None
        ]


def problem_response(status: int, title: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {
        "type": "https://proctor.dev/problems/" + title.lower().replace(" ", "-"),
        "title": title,
        "status": status,
        "detail": "injected by the test transport",
    }
    return httpx.Response(status, json=body, headers=headers)


class FaultyTransport(httpx.BaseTransport):
    """Forwards to ``inner`` (the real network transport) except where a fault applies."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.recorder = Recorder()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        fault = self.recorder.take(request)
        if (instead := self.recorder.before_sending(fault, request)) is not None:
            return instead
        response = self.inner.handle_request(request)
        response.read()
        response.close()
        return self.recorder.after_answer(fault, request, response)

    def close(self) -> None:
        self.inner.close()


class AsyncFaultyTransport(httpx.AsyncBaseTransport):
    """The asyncio twin of :class:`FaultyTransport` (around an ``httpx.ASGITransport``)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.recorder = Recorder()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fault = self.recorder.take(request)
        if (instead := self.recorder.before_sending(fault, request)) is not None:
            return instead
        response = await self.inner.handle_async_request(request)
        await response.aread()
        await response.aclose()
        return self.recorder.after_answer(fault, request, response)

    async def aclose(self) -> None:
        await self.inner.aclose()
