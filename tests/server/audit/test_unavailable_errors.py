"""Which errors of the database layer are an outage (503 + Retry-After: the client retries)
and which are a bug or a refused statement (500), through the app's problem handlers.

The driver errors are built as asyncpg raises them and wrapped as SQLAlchemy's asyncpg
dialect does (``orig`` an adapted error carrying the SQLSTATE, caused by asyncpg's);
connect-time errors (``CannotConnectNowError`` while PostgreSQL starts up) reach the app
unwrapped, and the pool's ``TimeoutError`` is SQLAlchemy's own.
"""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi as Dbapi
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from server.api.problems import install_problem_handlers, is_unavailable


def wrapped(error: asyncpg.PostgresError, *, invalidated: bool = False) -> DBAPIError:
    """``error`` as SQLAlchemy raises it from an asyncpg connection."""
    adapted_class = (
        Dbapi.IntegrityError
        if isinstance(error, asyncpg.IntegrityConstraintViolationError)
        else Dbapi.Error
    )
    adapted = adapted_class(f"{type(error)}: {error}")
    vars(adapted).update(pgcode=error.sqlstate, sqlstate=error.sqlstate)  # as the dialect does
    adapted.__cause__ = error
    wrapper = DBAPIError.instance(
        "SELECT 1", None, adapted, Dbapi.Error, connection_invalidated=invalidated
    )
    assert isinstance(wrapper, DBAPIError)
    return wrapper


def group_of(error: Exception) -> ExceptionGroup[Exception]:
    return ExceptionGroup("a task group failed", [error])


OUTAGES: dict[str, Callable[[], BaseException]] = {
    "admin shutdown (57P01)": lambda: wrapped(
        asyncpg.AdminShutdownError("terminating connection due to administrator command")
    ),
    "crash shutdown (57P02)": lambda: wrapped(
        asyncpg.CrashShutdownError("terminating connection because of crash of another")
    ),
    "connection lost (08003)": lambda: wrapped(
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    ),
    "starting up, raw at connect (57P03)": lambda: asyncpg.CannotConnectNowError(
        "the database system is starting up"
    ),
    "too many connections (53300)": lambda: asyncpg.TooManyConnectionsError(
        "sorry, too many clients already"
    ),
    "pool timeout": lambda: PoolTimeoutError("QueuePool limit of size 20 overflow 20 reached"),
    "connection refused": lambda: ConnectionRefusedError(111, "Connect call failed"),
    "invalidated connection": lambda: wrapped(asyncpg.PostgresError("gone"), invalidated=True),
    "inside an exception group": lambda: group_of(ConnectionResetError(104, "reset by peer")),
}
BUGS: dict[str, Callable[[], BaseException]] = {
    "unique violation (23505)": lambda: wrapped(asyncpg.UniqueViolationError("duplicate key")),
    "invalid text (22P02)": lambda: wrapped(
        asyncpg.InvalidTextRepresentationError("invalid input syntax for type uuid")
    ),
    "division by zero, raw (22012)": lambda: asyncpg.DivisionByZeroError("division by zero"),
    "not the database": lambda: ValueError("a bug"),
}


def app_raising(make: Callable[[], BaseException]) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/fails")
    async def fails() -> None:
        raise make()

    return app


async def status_of(make: Callable[[], BaseException]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app_raising(make), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://proctor.test") as client:
        return await client.get("/fails")


@pytest.mark.parametrize("case", list(OUTAGES))
async def test_an_unavailable_database_is_503_with_retry_after(case: str) -> None:
    assert is_unavailable(OUTAGES[case]())
    response = await status_of(OUTAGES[case])
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "2"
    assert response.json()["title"] == "Service unavailable"


@pytest.mark.parametrize("case", list(BUGS))
async def test_other_database_errors_stay_500(case: str) -> None:
    assert not is_unavailable(BUGS[case]())
    response = await status_of(BUGS[case])
    assert response.status_code == 500, response.text
    assert "retry-after" not in response.headers
