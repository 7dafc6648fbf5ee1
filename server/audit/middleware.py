"""ASGI middleware: every HTTP request is audited, refused ones included.

The row is written when the response starts (or, if the application crashed before
answering, when the error response goes out), before the client can see the status.
It records time, subject, organisation, session, method, route, status and client address;
never a header, a query string, a body, a token or an answer. A request refused before
routing (by ``server.api.guard``) is recorded with the template of the route it was for,
and why (``reason``: the guard's problem), and one whose client hung up before it was
complete with status 499 (``server.api.outcomes.CLIENT_CLOSED``), not as a server error.
Repeated refusals of one kind are folded into one row per window
(``server.audit.refusals``), so a flood of bad requests costs a counter, not a row each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bank.database import utcnow
from server.api.outcomes import CLIENT_CLOSED, client_closed, reason_of
from server.api.problems import is_unavailable
from server.api.runtime import Runtime
from server.audit.refusals import is_foldable
from server.observability.paths import QUIET_PATHS

log = logging.getLogger(__name__)
MAX_ROUTE = 200
UNMATCHED = "<unmatched>"


class AuditMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        runtime_of: Callable[[], Runtime],
        route_of: Callable[[Scope], str | None] = lambda scope: None,
    ) -> None:
        self.app = app
        self._runtime_of = runtime_of
        """Gives the ``Runtime`` (created in the app's lifespan)."""
        self._route_of = route_of
        """The route template of a request refused before routing (``route_template``)."""
        self._flush_task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in QUIET_PATHS:  # probes, scrapes
            await self.app(scope, receive, send)
            return
        audited = False

        async def send_audited(message: Message) -> None:
            nonlocal audited
            if message["type"] == "http.response.start" and not audited:
                audited = True
                await self._audit(self._row(scope, message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, send_audited)
        except BaseException as error:
            if not audited:  # the app failed without starting a response: the error
                audited = True  # page the outer handler sends says 503 or 500 alike
                await self._audit(self._row(scope, 503 if is_unavailable(error) else 500))
            raise
        if not audited:  # finished without answering: the client left, or a bug
            await self._audit(self._row(scope, CLIENT_CLOSED if client_closed(scope) else 500))

    def _row(self, scope: Scope, status: int) -> dict[str, Any]:
        row = audit_row(scope, status)
        if row["route"] == UNMATCHED:  # refused before routing (the guard, a 404)
            row["route"] = (self._route_of(scope) or UNMATCHED)[:MAX_ROUTE]
        reason = reason_of(scope)
        if reason is not None:
            row["reason"] = reason
        return row

    async def _audit(self, row: dict[str, Any]) -> None:
        runtime = self._runtime_of()
        if not is_foldable(row):
            await runtime.audit.write(row)
            return
        write_now, due = runtime.refusals.admit(row, now=time.time())
        for folded in [row, *due] if write_now else due:
            await runtime.audit.write(folded)
        if not write_now:
            self._flush_when_the_window_closes(runtime)

    def _flush_when_the_window_closes(self, runtime: Runtime) -> None:
        """Write folded rows once their window has closed, even if no request comes then."""
        if self._flush_task is not None and not self._flush_task.done():
            return
        window_s = runtime.refusals.window_s
        delay = window_s - time.time() % window_s + 0.05

        async def flush_later() -> None:
            await asyncio.sleep(delay)
            with contextlib.suppress(Exception):  # the writer logs its own failures
                for row in runtime.refusals.due(now=time.time()):
                    await runtime.audit.write(row)

        self._flush_task = asyncio.create_task(flush_later(), name="audit-refusal-flush")


def audit_row(scope: Scope, status: int) -> dict[str, Any]:
    """The audit row of a request: what the principal, the route and the client were."""
    principal = scope.get("state", {}).get("principal")
    # The route template, never the raw path: a mistyped URL could carry anything.
    template = getattr(scope.get("route"), "path", None) or UNMATCHED
    session_id = _as_uuid(scope.get("path_params", {}).get("session_id"))
    client = scope.get("client")
    return {
        "at": utcnow(),
        "subject": principal.subject if principal else None,
        "org_id": principal.org_id if principal else None,
        "session_id": session_id,
        "method": scope.get("method", "")[:8],
        "route": str(template)[:MAX_ROUTE],
        "status": status,
        "client": client[0][:64] if client else None,
        "repeats": 1,
    }


def _as_uuid(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None
