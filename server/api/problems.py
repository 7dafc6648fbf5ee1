"""Errors as RFC 9457 problem details (``application/problem+json``), from one handler."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.errors import ProctorError, TooManyRequests

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://proctor.dev/problems/"


def problem(
    request: Request,
    *,
    status: int,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {
        "type": TYPE_BASE + title.lower().replace(" ", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


async def proctor_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ProctorError)
    headers = {}
    if isinstance(error, TooManyRequests):
        headers["Retry-After"] = str(error.retry_after)
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return problem(
        request, status=error.status, title=error.title, detail=error.detail, headers=headers
    )


async def validation_error(request: Request, error: Exception) -> JSONResponse:
    """422 naming each bad field; the submitted values are never echoed back."""
    assert isinstance(error, RequestValidationError)
    errors = [
        {"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", ""))}
        for e in error.errors()
    ]
    where = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
    return problem(request, status=422, title="Invalid input", detail=where, errors=errors)


async def http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    title = {404: "Not found", 405: "Method not allowed"}.get(error.status_code, "HTTP error")
    return problem(
        request,
        status=error.status_code,
        title=title,
        detail=str(error.detail),
        headers=dict(error.headers or {}),
    )


async def database_error(request: Request, error: Exception) -> JSONResponse:
    """503 + Retry-After while the database is unreachable (the client retries; nothing it
    did not see acknowledged was kept half-way); any other database error is a 500."""
    unreachable = isinstance(error, (OperationalError, InterfaceError, OSError)) or (
        isinstance(error, DBAPIError) and error.connection_invalidated
    )
    if not unreachable:
        return await unexpected_error(request, error)
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, error)
    return problem(
        request,
        status=503,
        title="Service unavailable",
        detail="the database is unavailable; retry shortly",
        headers={"Retry-After": "2"},
    )


async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(request, status=500, title="Internal error", detail="internal error")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProctorError, proctor_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(DBAPIError, database_error)
    app.add_exception_handler(OSError, database_error)
    app.add_exception_handler(Exception, unexpected_error)
