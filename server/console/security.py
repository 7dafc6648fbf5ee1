"""Response headers of every console page, and the checks behind its forms.

The policy allows our own script and stylesheet only (no inline script or style, so an
injected ``<script>`` or ``style=`` would not run), no framing, no referrer leaving the
site, and no caching of pages (they show answers and references).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_PREFIX = "/console"
STATIC_PREFIX = "/console/static/"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
PAGE_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # not no-referrer: under it Chromium sends ``Origin: null`` with form POSTs, and the
    # console's own forms would fail the same-origin check
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


class ConsoleHeaders:
    """ASGI middleware: ``PAGE_HEADERS`` on every ``/console`` response, and
    ``Cache-Control: no-store`` on all of them but the static files."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        static = path.startswith(STATIC_PREFIX)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in PAGE_HEADERS.items():
                    headers[name] = value
                if not static:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


def same_token(given: object, expected: str) -> bool:
    """Whether form field value ``given`` is the CSRF token ``expected`` (constant time)."""
    if not isinstance(given, str) or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def same_origin(origin: str | None, *, host: str | None, required: bool = False) -> bool:
    """Whether a request's ``Origin`` header names this server's ``Host``. An absent header
    passes unless ``required`` (then the CSRF token of the login decides); the login form
    requires it, because before a login there is no session-bound token yet and a planted
    pre-login cookie pair must not log a victim in under someone else's key (login CSRF).
    Browsers send it on every form POST, so a cross-site form fails here before its token
    is even looked at. The scheme is not compared: behind a TLS-terminating proxy the
    browser's is https and ours http."""
    if origin is None:
        return not required
    return host is not None and urlsplit(origin).netloc == host
