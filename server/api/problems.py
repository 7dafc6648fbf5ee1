"""Errors as RFC 9457 problem details (``application/problem+json``), from one handler."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.errors import (
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    ProctorError,
    ServiceUnavailable,
    TooManyRequests,
    problem_type,
)

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_S = 2
"""What a 503 for an unavailable database tells the client to wait before retrying."""
UNAVAILABLE_SQLSTATES = ("08", "57P", "53300")
"""SQLSTATE prefixes meaning "not reachable now": class 08 (connection exception), 57P
(admin / crash shutdown, cannot connect now) and 53300 (too many connections)."""
MAX_CHAIN = 16
"""How many linked errors (``orig``, cause, context) ``is_unavailable`` looks at."""


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
        "type": problem_type(title),
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
    return problem(
        request, status=InvalidInput.status, title=InvalidInput.title, detail=where, errors=errors
    )


async def http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    known = {NotFound.status: NotFound.title, MethodNotAllowed.status: MethodNotAllowed.title}
    title = known.get(error.status_code, "HTTP error")
    return problem(
        request,
        status=error.status_code,
        title=title,
        detail=str(error.detail),
        headers=dict(error.headers or {}),
    )


def is_unavailable(error: BaseException) -> bool:
    """Whether ``error`` means the database cannot be reached or is not taking work right
    now (retrying later can succeed), rather than a bug or a statement it refused.

    True for: the pool's ``sqlalchemy.exc.TimeoutError``; ``OperationalError`` and
    ``InterfaceError``; a ``DBAPIError`` whose connection was invalidated; any ``OSError``
    (refused or reset connections, timeouts); and any driver error whose SQLSTATE is in
    ``UNAVAILABLE_SQLSTATES`` (asyncpg's ``ConnectionDoesNotExistError``, ``AdminShutdownError``,
    ``CannotConnectNowError``..., raw or wrapped by SQLAlchemy). The error's ``orig``, its
    cause and its context (what it was raised while handling) and the members of an
    exception group are looked at too: whatever failed because the database went away is
    the outage's doing.
    """
    return any(_is_unavailable_itself(link) for link in _linked(error))


def _is_unavailable_itself(error: BaseException) -> bool:
    if isinstance(error, (PoolTimeoutError, OperationalError, InterfaceError, OSError)):
        return True
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    sqlstate = getattr(error, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith(UNAVAILABLE_SQLSTATES)


def _linked(error: BaseException) -> list[BaseException]:
    """``error`` and the errors behind it (``orig``, cause, context, group members)."""
    seen: list[BaseException] = []
    pending = [error]
    while pending and len(seen) < MAX_CHAIN:
        current = pending.pop()
        if any(current is known for known in seen):
            continue
        seen.append(current)
        orig = getattr(current, "orig", None)
        for linked in (orig, current.__cause__, current.__context__):
            if isinstance(linked, BaseException):
                pending.append(linked)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return seen


async def database_error(request: Request, error: Exception) -> JSONResponse:
    """503 + Retry-After while the database is unavailable (``is_unavailable``: the client
    retries; nothing it did not see acknowledged was kept half-way); any other database
    error is a 500."""
    if not is_unavailable(error):
        return internal_error(request, error)
    return database_unavailable(request, error)


def database_unavailable(request: Request, error: BaseException) -> JSONResponse:
    # The first line only: SQLAlchemy appends the statement and its parameters (answers).
    summary = (str(error).splitlines() or [type(error).__name__])[0]
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, summary)
    return problem(
        request,
        status=ServiceUnavailable.status,
        title=ServiceUnavailable.title,
        detail="the database is unavailable; retry shortly",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
    """500, unless the error comes from an unavailable database (then 503 + Retry-After,
    also for errors raised outside the routes, e.g. in a middleware)."""
    if is_unavailable(error):
        return database_unavailable(request, error)
    return internal_error(request, error)


def internal_error(request: Request, error: BaseException) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
    return problem(
        request, status=ProctorError.status, title=ProctorError.title, detail="internal error"
    )


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProctorError, proctor_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    # Every error the database layer raises (SQLAlchemy's, the driver's unwrapped ones, e.g.
    # ``CannotConnectNowError`` at connect time, and OSError) is classified by one handler.
    for database_layer in (SQLAlchemyError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        app.add_exception_handler(database_layer, database_error)
    app.add_exception_handler(Exception, unexpected_error)
