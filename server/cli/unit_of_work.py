"""Running a piece of async work against the configured database from a CLI command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.sealing import BankKeyError, current
from server.bank_keys import install_keyring
from server.cli.output import fail
from server.config import Settings, get_settings
from server.database import create_engine, read_only_snapshot, unit_of_work, upgrade
from server.errors import ProctorError

T = TypeVar("T")


def run_in_unit_of_work(work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run ``work`` in one transaction on the configured database and return its result.

    The transaction commits when ``work`` returns and rolls back if it raises. The embedded
    default (SQLite) migrates itself first. A ``ProctorError`` becomes ``error: ...`` on
    stderr and exit status 1.
    """
    return _run(work, unit_of_work)


def run_read_only(work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """``run_in_unit_of_work`` for work that only reads: one ``read_only_snapshot`` (rolled
    back at the end), which on SQLite takes no write lock, so the server's writers go on
    while a long check (a chain walk, a re-derivation) runs."""
    return _run(work, read_only_snapshot)


def _run(
    work: Callable[[AsyncSession], Awaitable[T]],
    transaction: Callable[[AsyncEngine], AbstractAsyncContextManager[AsyncSession]],
) -> T:
    settings = get_settings()
    url = settings.effective_database_url
    try:
        current()  # the bank's keys, before any work (the root command installed them)
    except BankKeyError as error:
        fail(str(error))
    if settings.is_embedded:
        upgrade(url)

    async def main() -> T:
        engine = create_engine(url)
        try:
            async with transaction(engine) as session:
                return await work(session)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except ProctorError as error:
        fail(error.detail)


def require_bank_keyring(settings: Settings) -> None:
    """Load and install the keys sealing the bank now, or stop with ``error: ...`` (status
    1): for commands that run for long (a judge worker) and must not fail at their first
    item instead."""
    try:
        install_keyring(settings)
    except BankKeyError as error:
        fail(str(error))
