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
