"""ASGI middleware: exactly one audit row per HTTP request, refused ones included.

The row is written when the response starts (or, if the application crashed before
answering, when the error response goes out), before the client can see the status.
It records time, subject, organisation, session, method, route, status and client address;
never a header, a query string, a body, a token or an answer.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bank.database import utcnow
from server.audit.writer import AuditWriter

log = logging.getLogger(__name__)
MAX_ROUTE = 200
UNMATCHED = "<unmatched>"


class AuditMiddleware:
    def __init__(self, app: ASGIApp, writer_of: Any) -> None:
        self.app = app
        self._writer_of = writer_of
        """Callable returning the ``AuditWriter`` (created in the app's lifespan)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        audited = False

        async def send_audited(message: Message) -> None:
            nonlocal audited
            if message["type"] == "http.response.start" and not audited:
                audited = True
                await self._audit(scope, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_audited)
        finally:
            if not audited:  # the app failed without starting a response
                audited = True
                await self._audit(scope, 500)

    async def _audit(self, scope: Scope, status: int) -> None:
        writer: AuditWriter = self._writer_of()
        await writer.write(audit_row(scope, status))


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
    }


def _as_uuid(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None
