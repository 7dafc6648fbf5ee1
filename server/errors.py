"""One status-coded exception base for the whole server; the API renders it as problem+json."""

from __future__ import annotations


class ProctorError(Exception):
    """Base of every expected error; ``status`` is the HTTP status it maps to."""

    status: int = 500
    title: str = "Internal error"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class NotFound(ProctorError):
    status = 404
    title = "Not found"


class Conflict(ProctorError):
    status = 409
    title = "Conflict"


class InvalidInput(ProctorError):
    status = 422
    title = "Invalid input"


class Unauthorized(ProctorError):
    """No valid credentials: missing, malformed, expired or revoked token, or a bad key."""

    status = 401
    title = "Unauthorized"


class Forbidden(ProctorError):
    """Valid credentials without the right to do this."""

    status = 403
    title = "Forbidden"


class SessionInUse(Forbidden):
    title = "Session in use"


class TooManyRequests(ProctorError):
    """A rate limit or a per-period quota is exhausted; retry after ``retry_after`` s."""

    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = max(1, retry_after)


class QuotaExhausted(Conflict):
    title = "Quota exhausted"


class AlreadyAnswered(Conflict):
    title = "Already answered"


class NotPending(Conflict):
    title = "Not the pending item"


class SessionClosed(Conflict):
    title = "Session closed"
