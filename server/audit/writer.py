"""Writing audit rows outside the request's transaction, with group commit.

Each request hands its row to ``AuditWriter.write`` and waits until it is committed, so
an acknowledged request is always audited. Rows arriving while a commit is in flight are
written together in the next one: one commit for many requests under load, which keeps
the audit log from halving the server's throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from server.audit.models import AuditEntry

log = logging.getLogger(__name__)
MAX_BATCH = 500


class AuditWriter:
    """Inserts audit rows on its own connections (never the request's transaction)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._queue: asyncio.Queue[tuple[dict[str, Any], asyncio.Future[None]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="audit-writer")

    async def stop(self) -> None:
        if self._task is not None:
            await self._drain()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def write(self, row: dict[str, Any]) -> None:
        """Return once ``row`` is committed; raise if it could not be."""
        if self._task is None:  # not started (e.g. a CLI-built app): write directly
            await self._insert([row])
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._queue.put((row, future))
        await future

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._commit(batch)

    async def _drain(self) -> None:
        batch = []
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        if batch:
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[dict[str, Any], asyncio.Future[None]]]) -> None:
        try:
            await self._insert([row for row, _ in batch])
        except Exception as error:
            log.exception("audit write failed")
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for _, future in batch:
            if not future.done():
                future.set_result(None)

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(insert(AuditEntry), rows)
