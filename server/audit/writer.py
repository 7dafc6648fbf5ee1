"""Writing audit rows outside the request's transaction, with group commit and a spool.

Each request hands its row to ``AuditWriter.write`` and waits until it is durable, so an
acknowledged request is always audited. Rows arriving while a commit is in flight are
written together in the next one: one commit for many requests under load, which keeps
the audit log from halving the server's throughput.

While the database is unavailable (``server.api.problems.is_unavailable``) a batch is not
failed but appended to a spool file and fsynced, and the requests go on (with the 503 the
outage gives them). After a failure the writer spools without trying the database for a
back-off (0.5 s doubling to 5 s), so requests do not each wait for a failing connect.

The spool files are ``server.audit.spool``. The writer's task replays closed files into
``audit_log`` once the database answers again, its own and those another process left (a
crashed one, or this server's previous run, at start-up): it takes the file's lock without
waiting (a file being written or replayed by someone else is skipped), inserts its rows in
one transaction and deletes the file after the commit. Delivery is at-least-once: a row is
written twice if the process dies between a commit and the file's deletion, or if a
connection is lost while its commit was already done. A file the database refuses for
another reason is renamed ``*.rejected`` and logged, never deleted.

Each writer owns one hash chain of the audit log (``server.audit.chaining``, named
``w-<16 hex>``): rows are linked at insert time, in the order inserted, so a spooled row
is chained by whichever writer replays it. The writer keeps its chain's head (its number
of rows and last hash) in memory, moves it only after a commit, and after any failed (or
ambiguous) insert reads the head back from the database before inserting again; a batch
costs one round trip besides the commit (the last row's id is read only when signing).
Every ``checkpoint_rows`` rows or ``checkpoint_s`` seconds after a commit, and at
``stop``, it signs a checkpoint of its head (``server.ledger.checkpoints``) when it has a
signing key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from dataclasses import replace
from enum import Enum
from pathlib import Path

from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import Row as ResultRow
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.api.problems import is_unavailable
from server.audit.chaining import LOG, chained_values
from server.audit.models import AuditEntry
from server.audit.spool import MAX_SPOOL_FILE_ROWS, Row, Spool
from server.ledger.chain import ChainHead, genesis
from server.ledger.checkpoints import Cadence, last_checkpoint_hash, new_checkpoint
from server.ledger.models import ChainCheckpoint
from server.ledger.signing import SigningKey

log = logging.getLogger(__name__)
MAX_BATCH = 500
Pending = tuple[Row, asyncio.Future[None]]


class AuditWriter:
    """Inserts audit rows on its own connections (never the request's transaction), and
    spools them while the database is unavailable (see the module's docstring)."""

    def __init__(
        self,
        engine: AsyncEngine,
        spool_dir: Path,
        *,
        insert_timeout_s: float = 5.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 5.0,
        replay_every_s: float = 1.0,
        spool_file_rows: int = MAX_SPOOL_FILE_ROWS,
        signing_key: SigningKey | None = None,
        checkpoint_rows: int = 1000,
        checkpoint_s: float = 60.0,
    ) -> None:
        self.engine = engine
        self.chain = f"w-{uuid.uuid4().hex[:16]}"
        """The name of this writer's hash chain."""
        self.signing_key = signing_key
        self._head: ChainHead | None = ChainHead(self.chain, 0, None, genesis(LOG, self.chain))
        """The chain's head as committed (its ``last_row_id`` is None unless read back);
        None when unknown (after a failed insert)."""
        self._checkpoint_hash: str | None = None
        self._checkpoint_known = True
        """Whether ``_checkpoint_hash`` is the newest checkpoint's (False after a failure)."""
        self._cadence = Cadence(checkpoint_rows, checkpoint_s)
        self._chain_lock = asyncio.Lock()
        """Serialises inserts: the chain is linear (the task and direct writes share it)."""
        self.spool = Spool(spool_dir, database_tag(engine), max_rows=spool_file_rows)
        self.insert_timeout_s = insert_timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.replay_every_s = replay_every_s
        self._queue: asyncio.Queue[Pending | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._backoff = 0.0
        """The current back-off; 0 while the last contact with the database succeeded."""
        self._down_until = 0.0
        """``time.monotonic()`` before which rows are spooled without trying the database."""
        self._next_replay = 0.0
        """``time.monotonic()`` at which the task next looks for spool files to replay."""

    @property
    def database_down(self) -> bool:
        """Whether the last contact with the database failed for unavailability."""
        return self._backoff > 0

    def start(self) -> None:
        """Start the task that commits batches and replays the spool (files left by an
        earlier process first)."""
        self._task = asyncio.create_task(self._run(), name="audit-writer")

    async def stop(self) -> None:
        """Store every row queued so far (database or spool), end the task, close the
        spool file (it is replayed by the next writer on this database)."""
        task, self._task = self._task, None
        if task is not None:
            await self._queue.put(None)
            try:
                await task
            finally:
                await self._store_queued()
        try:
            await self.checkpoint()
        except Exception as error:
            log.warning("audit: no checkpoint at stop (%s)", error)
        self.spool.rotate()

    async def write(self, row: Row) -> None:
        """Return once ``row`` is committed or, while the database is unavailable, spooled.
        Never raises because the database is unavailable; raises for anything else (a row
        the database refuses, a spool that cannot be written)."""
        if self._task is None:  # not started (e.g. a CLI-built app): store directly
            await self._store([row])
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._queue.put((row, future))
        await future

    # --- the task ---------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if self._replay_is_due():
                try:
                    await self._replay_step()
                except Exception:  # e.g. an unreadable spool directory: never end the task
                    log.exception("audit: replaying the spool failed")
                    self._next_replay = time.monotonic() + self.max_backoff_s
            batch, stopping = await self._next_batch(self._idle_s())
            if batch:
                await self._commit(batch)
            if stopping:
                return

    async def _next_batch(self, wait_s: float) -> tuple[list[Pending], bool]:
        """Up to ``MAX_BATCH`` queued rows (waiting at most ``wait_s`` for the first), and
        whether ``stop`` asked the task to end."""
        items: list[Pending | None] = []
        if self._queue.empty() and wait_s > 0:
            with contextlib.suppress(TimeoutError):
                items.append(await asyncio.wait_for(self._queue.get(), wait_s))
        while len(items) < MAX_BATCH and not self._queue.empty():
            items.append(self._queue.get_nowait())
        batch = [item for item in items if item is not None]
        return batch, len(batch) < len(items)

    def _idle_s(self) -> float:
        """How long the task may wait for a row before replaying is due."""
        return max(0.0, max(self._next_replay, self._down_until) - time.monotonic())

    async def _store_queued(self) -> None:
        batch = [item for item in _drain(self._queue) if item is not None]
        if batch:
            await self._commit(batch)

    async def _commit(self, batch: list[Pending]) -> None:
        try:
            await self._store([row for row, _ in batch])
        except Exception as error:
            log.error("audit write failed", exc_info=error)
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for _, future in batch:
            if not future.done():
                future.set_result(None)

    # --- database or spool ------------------------------------------------------

    async def _store(self, rows: list[Row]) -> None:
        """Insert ``rows``; spool them if the database is unavailable (or was, within
        the back-off)."""
        if time.monotonic() < self._down_until:
            await self._spool(rows)
            return
        try:
            await self._insert(rows)
        except Exception as error:
            if not is_unavailable(error):
                raise
            self._failed(error)
            await self._spool(rows)
        else:
            self._succeeded()

    async def _spool(self, rows: list[Row]) -> None:
        await asyncio.to_thread(self.spool.append, rows)

    async def _insert(self, rows: list[Row]) -> None:
        """One transaction, chained onto this writer's head; tried again once at once if a
        pooled connection turned out dead (the pool is then refilled), e.g. the first
        insert after a restart. Signs a checkpoint afterwards when one is due."""
        async with self._chain_lock:
            for attempt in (1, 2):
                try:
                    async with asyncio.timeout(self.insert_timeout_s):
                        async with self.engine.begin() as connection:
                            head = await self._chained_insert(connection, rows)
                    break
                except BaseException as error:
                    self._head = None  # committed or not: read it back before the next insert
                    if (
                        attempt == 2
                        or not isinstance(error, DBAPIError)
                        or not error.connection_invalidated
                    ):
                        raise
            self._head = head
            self._cadence.wrote(len(rows))
            if self._cadence.due():
                try:
                    await self._checkpoint()
                except Exception as error:  # the rows are committed: try again later
                    log.warning("audit: checkpoint failed (%s)", error)

    async def _chained_insert(self, connection: AsyncConnection, rows: list[Row]) -> ChainHead:
        """Insert ``rows`` linked after the chain's head (read from the database first if
        unknown); the new head."""
        head = self._head or await self._read_head(connection)
        values, last_hash = chained_values(rows, head)
        await connection.execute(insert(AuditEntry), values)
        # The last row's id is not read here (a round trip every request would wait for):
        # ``_checkpoint`` reads it when it signs.
        return ChainHead(self.chain, head.n_rows + len(values), None, last_hash)

    async def _read_head(self, connection: AsyncConnection) -> ChainHead:
        """This chain's head as stored: its last row by id, and its number of rows."""
        last = await self._last_row(connection)
        if last is None or last.row_hash is None:
            return ChainHead(self.chain, 0, None, genesis(LOG, self.chain))
        count = await connection.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.chain == self.chain)
        )
        return ChainHead(self.chain, int(count or 0), last.id, last.row_hash)

    async def _last_row(
        self, connection: AsyncConnection
    ) -> ResultRow[tuple[int, str | None]] | None:
        """The id and hash of this chain's last stored row (None if it has none)."""
        return (
            await connection.execute(
                select(AuditEntry.id, AuditEntry.row_hash)
                .where(AuditEntry.chain == self.chain)
                .order_by(AuditEntry.id.desc())
                .limit(1)
            )
        ).first()

    async def checkpoint(self) -> None:
        """Sign a checkpoint of the chain's head now, if rows were written since the last
        one and the writer has a key (``stop`` calls it)."""
        async with self._chain_lock:
            if self._cadence.rows_since > 0:
                await self._checkpoint()

    async def _checkpoint(self) -> None:
        """Insert a signed checkpoint of the committed head (caller holds the lock)."""
        if self.signing_key is None:
            self._cadence.done()
            return
        async with asyncio.timeout(self.insert_timeout_s):
            async with self.engine.begin() as connection:
                head = await self._signable_head(connection)
                if head is None:
                    return
                if not self._checkpoint_known:
                    self._checkpoint_hash = await last_checkpoint_hash(
                        connection, log=LOG, chain=self.chain
                    )
                values = new_checkpoint(
                    key=self.signing_key,
                    log=LOG,
                    head=head,
                    prev_checkpoint_hash=self._checkpoint_hash,
                )
                self._checkpoint_known = False
                await connection.execute(insert(ChainCheckpoint), values)
        self._head = head
        self._checkpoint_hash = values["checkpoint_hash"]
        self._checkpoint_known = True
        self._cadence.done()

    async def _signable_head(self, connection: AsyncConnection) -> ChainHead | None:
        """The committed head with its last row's id (None if the chain has no rows). The
        in-memory head does not track the id: it is the chain's last row, as only this
        writer (under the lock) writes the chain. Raises if that row's hash is not the
        head's, and forgets the head so the next insert reads it back."""
        if self._head is None:
            head = await self._read_head(connection)
            return head if head.last_row_id is not None else None
        last = await self._last_row(connection)
        if last is None and self._head.n_rows == 0:
            return None
        if last is None or last.row_hash != self._head.head_hash:
            self._head = None
            raise RuntimeError(f"audit: chain {self.chain}'s last row is not its known head")
        return replace(self._head, last_row_id=last.id)

    async def _probe(self) -> bool:
        """Whether the database answers (``SELECT 1``); updates the back-off."""
        try:
            async with asyncio.timeout(self.insert_timeout_s):
                async with self.engine.connect() as connection:
                    await connection.execute(text("SELECT 1"))
        except Exception as error:
            if not is_unavailable(error):
                log.error("audit: probing the database failed", exc_info=error)
            self._failed(error)
            return False
        self._succeeded()
        return True

    def _failed(self, error: BaseException) -> None:
        if not self._backoff:
            log.warning("audit: database unavailable (%s); spooling to %s", error, self.spool)
        self._backoff = min(max(2 * self._backoff, self.backoff_s), self.max_backoff_s)
        self._down_until = time.monotonic() + self._backoff

    def _succeeded(self) -> None:
        if self._backoff:
            log.warning("audit: database available again; replaying %s", self.spool)
            self._next_replay = 0.0
        self._backoff = 0.0
        self._down_until = 0.0

    # --- replay -----------------------------------------------------------------

    def _replay_is_due(self) -> bool:
        now = time.monotonic()
        return now >= self._next_replay and now >= self._down_until

    async def _replay_step(self) -> None:
        """Replay one spool file if the database answers; otherwise look again later."""
        if self.database_down and not await self._probe():
            return
        self.spool.rotate()  # this process's own file becomes replayable
        for path in await asyncio.to_thread(self.spool.closed_files):
            outcome = await self._replay(path)
            if outcome is not Replayed.SKIPPED:
                return  # one file per step: queued requests are served in between
        self._next_replay = time.monotonic() + self.replay_every_s

    async def _replay(self, path: Path) -> Replayed:
        claim = await asyncio.to_thread(self.spool.claim, path)
        if claim is None:
            return Replayed.SKIPPED
        try:
            if claim.rows:
                try:
                    await self._insert(claim.rows)
                except Exception as error:
                    if is_unavailable(error):
                        self._failed(error)
                        return Replayed.DATABASE_DOWN
                    log.error("audit spool %s refused; kept as *.rejected", path, exc_info=error)
                    await asyncio.to_thread(claim.reject)
                    return Replayed.REJECTED
                self._succeeded()
            await asyncio.to_thread(claim.delete)
            log.info("audit: replayed %d rows from %s", len(claim.rows), path.name)
            return Replayed.DONE
        finally:
            claim.close()


class Replayed(Enum):
    DONE = "done"
    SKIPPED = "skipped"
    """Locked by another writer, or gone."""
    DATABASE_DOWN = "database down"
    REJECTED = "rejected"


def _drain(queue: asyncio.Queue[Pending | None]) -> list[Pending | None]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def database_tag(engine: AsyncEngine) -> str:
    """A short name of the database (its URL, password hidden): a spool file is only
    replayed by writers on the database its rows were meant for."""
    url = engine.url.render_as_string(hide_password=True)
    return hashlib.sha256(url.encode()).hexdigest()[:12]
