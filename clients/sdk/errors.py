"""Exceptions of the Proctor SDK.

Every error the clients raise is a :class:`ProctorError`::

    ProctorError
    ├── APIConnectionError            no response: DNS, refused connection, reset, TLS, ...
    │   └── APITimeoutError               ... because a timeout expired
    └── APIStatusError                the server answered 4xx/5xx (an RFC 9457 problem)
        ├── AuthenticationError           401  bad API key; expired or revoked token
        ├── PermissionDeniedError         403  valid credentials without the right
        │   └── SessionInUseError              another token drives the session (its lease
        │                                      frees after PROCTOR_LEASE_IDLE_S idle)
        ├── NotFoundError                 404  (also another organisation's ids)
        ├── ConflictError                 409
        │   ├── AlreadyAnsweredError           the position was answered; the first answer stands
        │   ├── NotPendingError                not the pending item (call ``next`` first)
        │   ├── QuotaExhaustedError            too many open sessions for the organisation
        │   └── SessionClosedError             the session is answered, expired or aborted
        ├── ValidationError               422  ``.errors``: one ``{"loc", "msg"}`` per bad field
        ├── RateLimitError                429  ``.retry_after``: seconds (rate limit or the
        │                                      sessions-per-period quota)
        └── InternalServerError           5xx
            └── ServiceUnavailableError   503  ``.retry_after`` (the database is unreachable)

:func:`error_from_response` picks the class of a response: by the problem's ``type`` slug
(``https://proctor.dev/problems/<slug>``) first, then by its ``title``, then by the HTTP
status. Messages carry the status, title and detail the server wrote; never a token or key.
"""

from __future__ import annotations

from typing import Any

import httpx

from clients.sdk.retry_wait import parse_retry_after

PROBLEM_TYPE_BASE = "https://proctor.dev/problems/"

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AlreadyAnsweredError",
    "AuthenticationError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "NotPendingError",
    "PermissionDeniedError",
    "ProctorError",
    "QuotaExhaustedError",
    "RateLimitError",
    "ServiceUnavailableError",
    "SessionClosedError",
    "SessionInUseError",
    "ValidationError",
    "error_from_response",
    "parse_retry_after",
]


class ProctorError(Exception):
    """Base of every error raised by the SDK."""


class APIConnectionError(ProctorError):
    """The request got no response (after the retries the call allows)."""

    def __init__(self, message: str = "connection error", *, request: httpx.Request | None = None):
        super().__init__(message)
        self.request = request


class APITimeoutError(APIConnectionError):
    """A connect, read, write or pool timeout expired."""

    def __init__(self, message: str = "request timed out", *, request: httpx.Request | None = None):
        super().__init__(message, request=request)


class APIStatusError(ProctorError):
    """The server answered with an error status; ``problem`` is its problem+json body (or
    what could be made of a body that was not one)."""

    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        self.response = response
        self.problem = problem
        self.status: int = response.status_code
        self.title: str = str(problem.get("title") or response.reason_phrase or "HTTP error")
        self.detail: str = str(problem.get("detail") or "")
        self.type: str = str(problem.get("type") or "about:blank")
        message = f"{self.status} {self.title}"
        super().__init__(f"{message}: {self.detail}" if self.detail else message)

    @property
    def request(self) -> httpx.Request:
        return self.response.request


class AuthenticationError(APIStatusError):
    """401: a bad API key, or a missing, malformed, expired or revoked token."""


class PermissionDeniedError(APIStatusError):
    """403: valid credentials without the right to do this."""


class SessionInUseError(PermissionDeniedError):
    """403 "Session in use": another token holds the session's lease; it becomes free once
    the holder has been idle for the server's ``PROCTOR_LEASE_IDLE_S``."""


class NotFoundError(APIStatusError):
    """404: no such resource, or one of another organisation."""


class ConflictError(APIStatusError):
    """409: the request conflicts with the state of the resource."""


class AlreadyAnsweredError(ConflictError):
    """409 "Already answered": the position has an answer already; the first one stands."""


class NotPendingError(ConflictError):
    """409 "Not the pending item": an answer for another item than the pending one."""


class QuotaExhaustedError(ConflictError):
    """409 "Quota exhausted": the organisation has as many open sessions as it may."""


class SessionClosedError(ConflictError):
    """409 "Session closed": the session is answered, expired or aborted."""


class ValidationError(APIStatusError):
    """422: the request was malformed; ``errors`` names each bad field."""

    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        super().__init__(response, problem)
        raw = problem.get("errors")
        self.errors: list[dict[str, Any]] = (
            [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []
        )


class RateLimitError(APIStatusError):
    """429: a rate limit or a per-period quota; ``retry_after`` seconds (None if unsaid)."""

    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        super().__init__(response, problem)
        self.retry_after: float | None = parse_retry_after(response.headers)


class InternalServerError(APIStatusError):
    """5xx: the server (or a proxy in front of it) failed."""


class ServiceUnavailableError(InternalServerError):
    """503: the server is temporarily unable to serve (its database is unreachable)."""

    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        super().__init__(response, problem)
        self.retry_after: float | None = parse_retry_after(response.headers)


_BY_SLUG: dict[str, type[APIStatusError]] = {
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "session-in-use": SessionInUseError,
    "not-found": NotFoundError,
    "conflict": ConflictError,
    "already-answered": AlreadyAnsweredError,
    "not-the-pending-item": NotPendingError,
    "quota-exhausted": QuotaExhaustedError,
    "session-closed": SessionClosedError,
    "invalid-input": ValidationError,
    "too-many-requests": RateLimitError,
    "service-unavailable": ServiceUnavailableError,
    "internal-error": InternalServerError,
}
_BY_TITLE: dict[str, type[APIStatusError]] = {
    slug.replace("-", " "): cls for slug, cls in _BY_SLUG.items()
}
_BY_STATUS: dict[int, type[APIStatusError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: ValidationError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def _problem_of(response: httpx.Response) -> dict[str, Any]:
    """The problem+json body, or a stand-in for a body that is not JSON (a proxy's page)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    text = response.text.strip() if response.content else ""
    return {
        "type": "about:blank",
        "title": response.reason_phrase or "HTTP error",
        "status": response.status_code,
        "detail": text[:500],
    }


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for an error ``response``: by ``type`` slug, then title, then status.

    A class found by slug or title is used only if its status agrees with the response's
    (a 409 is never mapped to a 403 class because of a stray title); a status without a
    class of its own (400, 405, ...) is a plain :class:`APIStatusError`."""
    problem = _problem_of(response)
    status = response.status_code
    by_status = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    candidates: list[type[APIStatusError] | None] = []
    kind = problem.get("type")
    if isinstance(kind, str) and kind.startswith(PROBLEM_TYPE_BASE):
        candidates.append(_BY_SLUG.get(kind[len(PROBLEM_TYPE_BASE) :].strip("/")))
    title = problem.get("title")
    if isinstance(title, str):
        candidates.append(_BY_TITLE.get(title.strip().lower()))
    for cls in candidates:
        if cls is not None and by_status is not APIStatusError and issubclass(cls, by_status):
            return cls(response, problem)
    return by_status(response, problem)
