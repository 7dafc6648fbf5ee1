"""The outermost ASGI layer: request id, HTTP metrics and the one log line per request.

``RequestObserver`` wraps the whole application, Starlette's error middleware included,
so that every response (a 404, a refusal, the 500 page of a crash) carries the
``X-Request-ID`` header and is counted and logged. It is plain ASGI (no
``BaseHTTPMiddleware``): per request it costs a header scan, two metric updates and one
log line. The request id is the client's ``X-Request-ID`` when that is a sane token, else
a new one; it is bound to ``structlog.contextvars`` so that every line logged while the
request is handled carries it.

The access line holds the request id, method, route template (never the raw path, which
could carry anything), status, duration, subject (the API key id, never a token),
organisation and client address. Never a header, a query string or a body.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping

import structlog
from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.api.problems import is_unavailable
from server.observability import metrics
from server.observability.paths import QUIET_PATHS

REQUEST_ID_HEADER = "X-Request-ID"
_HEADER_KEY = REQUEST_ID_HEADER.lower().encode()
_SANE_ID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404 for an unknown path)."""

ACCESS_LOGGER = "proctor.access"
access_log = structlog.get_logger(ACCESS_LOGGER)
_access_level = logging.getLogger(ACCESS_LOGGER)


def request_id_of(scope: Scope) -> str:
    """The client's ``X-Request-ID`` if it is 1-64 characters of ``[A-Za-z0-9._-]``, else
    a new random one (32 hex digits)."""
    for key, value in scope.get("headers", ()):
        if key == _HEADER_KEY:
            if _SANE_ID.fullmatch(value):
                return bytes(value).decode("ascii")
            break
    return uuid.uuid4().hex


def route_of(scope: Scope, paths: Mapping[object, str]) -> str:
    """The template of the route that answered (``/v1/sessions/{session_id}/next``):
    FastAPI's routes name themselves in the scope, Starlette's (``/openapi.json``) only
    their endpoint, looked up in ``paths``."""
    path = getattr(scope.get("route"), "path", None)
    if path is None:
        path = paths.get(scope.get("endpoint"))
    return str(path or UNMATCHED)


def endpoint_paths(routes: Iterable[BaseRoute]) -> dict[object, str]:
    """The path template of each endpoint among ``routes``."""
    return {
        route.endpoint: route.path for route in routes if isinstance(route, Route | WebSocketRoute)
    }


class RequestObserver:
    """See the module docstring; ``routes`` gives the application's routes."""

    def __init__(self, app: ASGIApp, routes: Callable[[], Iterable[BaseRoute]]) -> None:
        self.app = app
        self._routes = routes
        self._paths: dict[object, str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        header = request_id.encode("ascii")
        status = 0
        started = time.perf_counter()

        async def send_observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                headers.raw.append((_HEADER_KEY, header))
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_observed)
            except BaseException as error:
                if not status:
                    status = 503 if is_unavailable(error) else 500
                raise
            finally:
                if self._paths is None:  # the routes are all there once requests come
                    self._paths = endpoint_paths(self._routes())
                _observe(scope, self._paths, status or 500, time.perf_counter() - started)


def _observe(scope: Scope, paths: Mapping[object, str], status: int, duration_s: float) -> None:
    method = scope.get("method", "")
    route = route_of(scope, paths)
    metrics.HTTP_REQUESTS.labels(method=method, route=route, status=str(status)).inc()
    metrics.HTTP_DURATION.labels(method=method, route=route).observe(duration_s)
    level = _level(scope, status)
    if not _access_level.isEnabledFor(level):
        return
    principal = scope.get("state", {}).get("principal")
    client = scope.get("client")
    access_log.log(
        level,
        "request",
        method=method,
        route=route,
        status=status,
        duration_ms=round(duration_s * 1000, 3),
        subject=getattr(principal, "subject", None),
        org=str(principal.org_id) if principal is not None else None,
        client=client[0] if client else None,
    )


def _level(scope: Scope, status: int) -> int:
    if status >= 500:
        return logging.ERROR
    if scope.get("path") in QUIET_PATHS:  # probes and scrapes every few seconds
        return logging.DEBUG
    return logging.INFO


class ObservedFastAPI(FastAPI):
    """FastAPI with ``RequestObserver`` outside its whole middleware stack."""

    def build_middleware_stack(self) -> ASGIApp:
        return RequestObserver(super().build_middleware_stack(), lambda: self.routes)
