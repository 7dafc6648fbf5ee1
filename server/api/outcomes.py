"""How a request ended when no response was sent, and the route it was for when it was
refused before routing: what the audit row records (``server.audit.middleware``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Match
from starlette.types import Scope

CLIENT_CLOSED = 499
"""The status audited for a request whose client hung up before it could be answered
(nginx's "client closed request"); nothing is sent."""
_CLOSED_KEY = "client_closed"
_REFUSAL_KEY = "refused_because"
CLOSED_REASON = "client closed the request"
MAX_REASON = 200


def mark_client_closed(scope: Scope) -> None:
    """Note that the client of ``scope`` left before its request was complete."""
    scope.setdefault("state", {})[_CLOSED_KEY] = True


def client_closed(scope: Scope) -> bool:
    return bool(scope.get("state", {}).get(_CLOSED_KEY))


def mark_refused(scope: Scope, reason: str) -> None:
    """Note why the request was refused before routing (a problem's title and detail,
    which never echo what the client sent)."""
    scope.setdefault("state", {})[_REFUSAL_KEY] = reason[:MAX_REASON]


def reason_of(scope: Scope) -> str | None:
    """Why the request was refused before routing, or that its client left; else None."""
    if client_closed(scope):
        return CLOSED_REASON
    reason = scope.get("state", {}).get(_REFUSAL_KEY)
    return reason if isinstance(reason, str) else None


def route_template(app: FastAPI, scope: Scope) -> str | None:
    """The template of the route ``scope``'s path and method would reach (or, if only the
    method differs, the path's), for requests refused before routing; None if none."""
    by_path: str | None = None
    for context in iter_route_contexts(app.routes):
        match, _ = context.original_route.matches(scope)
        template = context.path_format
        if match is Match.FULL:
            return template
        if match is Match.PARTIAL and by_path is None:
            by_path = template
    return by_path
