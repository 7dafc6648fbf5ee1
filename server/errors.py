"""One status-coded exception base for the whole server; the API renders it as problem+json.

Every problem the API can answer is a class here (the protocol-level ones too), so the
catalogue of problem types the OpenAPI document lists is this module's class tree
(``server.api.openapi``): a new error class is a new documented problem type.
"""

from __future__ import annotations

TYPE_BASE = "https://proctor.dev/problems/"
"""Prefix of every problem ``type`` URI; the rest is the title's slug (``problem_type``)."""


def problem_type(title: str) -> str:
    """The problem ``type`` URI of ``title``: ``"Quota exhausted"`` ->
    ``https://proctor.dev/problems/quota-exhausted``."""
    return TYPE_BASE + title.lower().replace(" ", "-")


class ProctorError(Exception):
    """Base of every expected error; ``status`` is the HTTP status it maps to."""

    status: int = 500
    title: str = "Internal error"

    def __init_subclass__(cls, *, status: int | None = None, title: str | None = None) -> None:
        """A subclass names its status and title in its header,
        ``class NotFound(ProctorError, status=404, title="Not found")``; what it leaves out
        is its base's."""
        super().__init_subclass__()
        if status is not None:
            cls.status = status
        if title is not None:
            cls.title = title

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class InternalError(ProctorError):
    """An unexpected failure on the server; what the request would have changed was not
    kept."""


class BadRequest(ProctorError, status=400, title="Bad request"):
    """The request line itself is refused (a NUL character in the path or the query)."""


class MethodNotAllowed(ProctorError, status=405, title="Method not allowed"):
    """The path exists, but not with this method."""


class ContentTooLarge(ProctorError, status=413, title="Content too large"):
    """The body exceeds the server's ``max_body_bytes``."""


class ServiceUnavailable(ProctorError, status=503, title="Service unavailable"):
    """The database cannot be reached now; retry after the ``Retry-After`` seconds."""


class NotFound(ProctorError, status=404, title="Not found"):
    """No such resource, or one the caller may not see (the two are not told apart)."""


class Conflict(ProctorError, status=409, title="Conflict"):
    """The request contradicts the resource's current state."""


class InvalidInput(ProctorError, status=422, title="Invalid input"):
    """The request is well-formed but its values are refused."""


class Unauthorized(ProctorError, status=401, title="Unauthorized"):
    """No valid credentials: missing, malformed, expired or revoked token, or a bad key."""


class Forbidden(ProctorError, status=403, title="Forbidden"):
    """Valid credentials without the right to do this."""


class SessionInUse(Forbidden, title="Session in use"):
    """Another token holds the session's lease."""


class TooManyRequests(ProctorError, status=429, title="Too many requests"):
    """A rate limit or a per-period quota is exhausted; retry after ``retry_after`` s."""

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = max(1, retry_after)


class QuotaExhausted(Conflict, title="Quota exhausted"):
    """The organisation has as many open sessions as it may."""


class AlreadyAnswered(Conflict, title="Already answered"):
    """The position has its answer; the first one stands."""


class NotPending(Conflict, title="Not the pending item"):
    """The answer is for an item that is not the pending one."""


class SessionClosed(Conflict, title="Session closed"):
    """The session no longer delivers items or takes answers."""
