"""Verifying the hash-chained logs against their signed checkpoints.

A log is described to the verifier by a ``LogSpec``: the ``Log`` it is, the ORM model of
its table (which has the columns ``id``, ``chain``, ``prev_hash`` and ``row_hash``), and
``fields(row)``, the hashed fields of a row read back as a mapping of its columns (what the
writer passed to ``server.ledger.chain.link``). The audit log's spec is ``AUDIT`` here; a
log defined elsewhere registers its spec with ``register`` when its module is imported
(the results ledger's in ``server.ledger.results``), and ``specs()`` lists them.

For every chain of a log, ``verify_log`` walks the rows in id order, a page at a time,
from the chain's genesis (or from a trusted checkpoint, ``verify_from``), and checks each
of the chain's checkpoints: its signature by a known key, its link to the previous
checkpoint, and that the walk reaches its ``(last_row_id, n_rows, head_hash)``. It reports
the first row of each chain that does not verify (``Failure``), and the first row without
a chain inserted after chaining began. What it cannot see: rows deleted from a chain's
tail after its last checkpoint, and a chain deleted with all its checkpoints (unless the
auditor kept one of them and passes it as ``--from``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from bank.database import Base
from server.audit.chaining import audit_fields
from server.audit.models import AuditEntry
from server.ledger.chain import ChainedRow, ChainHead, Log, genesis, walk
from server.ledger.checkpoints import is_authentic
from server.ledger.models import ChainCheckpoint
from server.ledger.signing import PublicKey

PAGE_ROWS = 5000
Database = AsyncSession | AsyncConnection


@dataclass(frozen=True, slots=True)
class LogSpec:
    """How to read one chained log: its table's model and the hashed fields of a row."""

    log: Log
    model: type[Base]
    fields: Callable[[Mapping[Any, Any]], Mapping[str, Any]]

    @property
    def table(self) -> Table:
        table = self.model.__table__
        assert isinstance(table, Table)
        return table


AUDIT = LogSpec(Log.AUDIT, AuditEntry, audit_fields)
_SPECS: dict[Log, LogSpec] = {Log.AUDIT: AUDIT}


def register(spec: LogSpec) -> None:
    """Make ``spec`` known to ``specs()`` (a log module calls it on import)."""
    _SPECS[spec.log] = spec


def specs() -> dict[Log, LogSpec]:
    """The registered logs' specs."""
    return dict(_SPECS)


class Reason(StrEnum):
    """Why a row (or a checkpoint) does not verify."""

    EDITED = "edited"
    """The row's hash does not match its fields."""
    BROKEN_LINK = "broken link"
    """Its ``prev_hash`` is not the previous row's hash: a row before it was deleted, or
    it was inserted."""
    MISSING_AFTER_CHECKPOINT = "missing after checkpoint"
    """A checkpoint covers rows the chain no longer has (deleted at its tail)."""
    CHECKPOINT_MISMATCH = "does not match checkpoint"
    """The walk reached a checkpoint's row with another hash or row count (rows were
    rewritten up to it)."""
    UNCHAINED = "unchained row inserted"
    """A row without a chain, with an id above the first chained row."""
    BAD_SIGNATURE = "bad checkpoint signature"
    """A checkpoint that no known key signed, or whose hash does not match its payload."""
    CHECKPOINT_LINK = "checkpoint link broken"
    """A checkpoint does not link to the chain's previous one (one was deleted or
    inserted)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """The first thing in a chain that does not verify."""

    log: Log
    chain: str | None
    row_id: int
    reason: Reason
    detail: str = ""
    checkpoint_id: int | None = None


@dataclass(frozen=True, slots=True)
class ChainReport:
    """One chain walked: how far, against how many checkpoints, and its first failure."""

    log: Log
    chain: str
    n_rows: int
    last_row_id: int | None
    head_hash: str
    n_checkpoints: int
    failure: Failure | None = None


@dataclass(frozen=True, slots=True)
class LogReport:
    """Every chain of one log, and the first unchained row inserted among chained ones."""

    log: Log
    chains: list[ChainReport] = field(default_factory=list)
    unchained: Failure | None = None
    n_legacy_rows: int = 0
    """Rows written before chaining began (no chain, ids below the first chained row)."""

    @property
    def failures(self) -> list[Failure]:
        found = [chain.failure for chain in self.chains if chain.failure is not None]
        return found + ([self.unchained] if self.unchained is not None else [])

    @property
    def ok(self) -> bool:
        return not self.failures


# --- reading -------------------------------------------------------------------------


async def _rows(
    db: Database, spec: LogSpec, chain: str, after_id: int
) -> AsyncIterator[ChainedRow]:
    """The rows of ``chain`` with ids above ``after_id``, in id order, a page at a time."""
    table = spec.table
    while True:
        page = (
            (
                await db.execute(
                    select(table)
                    .where(table.c.chain == chain, table.c.id > after_id)
                    .order_by(table.c.id)
                    .limit(PAGE_ROWS)
                )
            )
            .mappings()
            .all()
        )
        for row in page:
            yield _chained(spec, row)
        if len(page) < PAGE_ROWS:
            return
        after_id = page[-1]["id"]


def _chained(spec: LogSpec, row: Mapping[Any, Any]) -> ChainedRow:
    return ChainedRow(row["id"], row["prev_hash"] or "", row["row_hash"] or "", spec.fields(row))


async def _checkpoints(db: Database, log: Log, chain: str, after_id: int) -> list[ChainCheckpoint]:
    statement = (
        select(ChainCheckpoint)
        .where(
            ChainCheckpoint.log == log.value,
            ChainCheckpoint.chain == chain,
            ChainCheckpoint.id > after_id,
        )
        .order_by(ChainCheckpoint.id)
    )
    if isinstance(db, AsyncSession):
        return list((await db.scalars(statement)).all())
    return [ChainCheckpoint(**row) for row in (await db.execute(statement)).mappings()]


async def _chains(db: Database, spec: LogSpec) -> list[str]:
    """Every chain with a row or a checkpoint."""
    table = spec.table
    with_rows = await db.execute(select(table.c.chain).where(table.c.chain.is_not(None)).distinct())
    with_checkpoints = await db.execute(
        select(ChainCheckpoint.chain).where(ChainCheckpoint.log == spec.log.value).distinct()
    )
    return sorted({name for (name,) in with_rows} | {name for (name,) in with_checkpoints})


# --- verifying -----------------------------------------------------------------------


def _checkpoint_failure(
    log: Log, checkpoints: list[ChainCheckpoint], keys: Mapping[str, PublicKey], prev: str | None
) -> tuple[int, Failure | None]:
    """How many of ``checkpoints`` (in order) are authentic and linked, starting from
    ``prev``; and the failure of the first one that is not."""
    for index, checkpoint in enumerate(checkpoints):
        if not is_authentic(checkpoint, dict(keys)):
            reason, detail = Reason.BAD_SIGNATURE, f"key {checkpoint.key_id}"
        elif checkpoint.prev_checkpoint_hash != prev:
            reason, detail = Reason.CHECKPOINT_LINK, "a checkpoint before it is missing"
        else:
            prev = checkpoint.checkpoint_hash
            continue
        failure = Failure(
            log, checkpoint.chain, checkpoint.last_row_id, reason, detail, checkpoint.id
        )
        return index, failure
    return len(checkpoints), None


async def verify_chain(
    db: Database,
    spec: LogSpec,
    chain: str,
    keys: Mapping[str, PublicKey],
    *,
    anchor: ChainCheckpoint | None = None,
) -> ChainReport:
    """Walk ``chain`` from its genesis, or from the trusted checkpoint ``anchor`` (its
    rows up to the anchor are not read), against its checkpoints (see the module)."""
    log = spec.log
    start = (
        ChainHead(chain, anchor.n_rows, anchor.last_row_id, anchor.head_hash)
        if anchor is not None
        else ChainHead(chain, 0, None, genesis(log, chain))
    )
    checkpoints = await _checkpoints(db, log, chain, anchor.id if anchor is not None else 0)
    n_good, bad_checkpoint = _checkpoint_failure(
        log, checkpoints, keys, anchor.checkpoint_hash if anchor is not None else None
    )
    pending = checkpoints[:n_good]
    head, failure = start, None
    async for row in _rows(db, spec, chain, start.last_row_id or 0):
        while pending and pending[0].last_row_id < row.id:  # its row was skipped
            failure = _mismatch(log, pending[0], row.id, head)
            break
        if failure is not None:
            break
        head, broken = walk(log, chain, [row], start=head)
        if broken is not None:
            failure = Failure(log, chain, broken.row_id, Reason(broken.reason))
            break
        if pending and pending[0].last_row_id == row.id:
            checkpoint = pending.pop(0)
            if (checkpoint.n_rows, checkpoint.head_hash) != (head.n_rows, head.head_hash):
                failure = _mismatch(log, checkpoint, row.id, head)
                break
    if failure is None and pending:
        checkpoint = pending[0]
        missing = checkpoint.n_rows - head.n_rows
        failure = Failure(
            log,
            chain,
            checkpoint.last_row_id,
            Reason.MISSING_AFTER_CHECKPOINT,
            f"{missing} row(s) after row {head.last_row_id} up to row {checkpoint.last_row_id}",
            checkpoint.id,
        )
    if bad_checkpoint is not None and (failure is None or failure.row_id > bad_checkpoint.row_id):
        failure = bad_checkpoint
    return ChainReport(
        log, chain, head.n_rows, head.last_row_id, head.head_hash, len(checkpoints), failure
    )


def _mismatch(log: Log, checkpoint: ChainCheckpoint, row_id: int, head: ChainHead) -> Failure:
    return Failure(
        log,
        checkpoint.chain,
        row_id,
        Reason.CHECKPOINT_MISMATCH,
        f"checkpoint {checkpoint.id} states {checkpoint.n_rows} rows up to row "
        f"{checkpoint.last_row_id}; the walk has {head.n_rows} up to row {head.last_row_id}",
        checkpoint.id,
    )


async def unchained_failure(db: Database, spec: LogSpec) -> tuple[Failure | None, int]:
    """The first row without a chain above the first chained row, and how many rows
    without a chain precede that first chained row (written before chaining began)."""
    table = spec.table
    first = await db.scalar(select(func.min(table.c.id)).where(table.c.chain.is_not(None)))
    if first is None:
        legacy = await db.scalar(select(func.count()).select_from(table))
        return None, int(legacy or 0)
    legacy = await db.scalar(
        select(func.count()).select_from(table).where(table.c.chain.is_(None), table.c.id < first)
    )
    inserted = await db.scalar(
        select(func.min(table.c.id)).where(table.c.chain.is_(None), table.c.id > first)
    )
    failure = (
        Failure(spec.log, None, int(inserted), Reason.UNCHAINED, "the row has no chain")
        if inserted is not None
        else None
    )
    return failure, int(legacy or 0)


async def verify_log(db: Database, spec: LogSpec, keys: Mapping[str, PublicKey]) -> LogReport:
    """Every chain of ``spec``'s log walked from genesis, and its unchained rows."""
    chains = [await verify_chain(db, spec, chain, keys) for chain in await _chains(db, spec)]
    unchained, legacy = await unchained_failure(db, spec)
    return LogReport(spec.log, chains, unchained, legacy)


async def verify_from(
    db: Database, spec: LogSpec, anchor: ChainCheckpoint, keys: Mapping[str, PublicKey]
) -> LogReport:
    """The chain of the trusted checkpoint ``anchor`` walked from it (the caller checked
    its signature), after checking that the row it ends on is still there, unchanged."""
    table = spec.table
    row = (
        (await db.execute(select(table).where(table.c.id == anchor.last_row_id))).mappings().first()
    )
    failure: Failure | None = None
    if row is None or row["chain"] != anchor.chain:
        failure = Failure(
            spec.log,
            anchor.chain,
            anchor.last_row_id,
            Reason.MISSING_AFTER_CHECKPOINT,
            "the row the trusted checkpoint ends on is gone",
            anchor.id,
        )
    else:
        head, broken = walk(
            spec.log,
            anchor.chain,
            [_chained(spec, row)],
            start=ChainHead(anchor.chain, 0, None, row["prev_hash"] or ""),
        )
        if broken is not None or head.head_hash != anchor.head_hash:
            failure = Failure(
                spec.log,
                anchor.chain,
                anchor.last_row_id,
                Reason.EDITED,
                "the row the trusted checkpoint ends on changed",
                anchor.id,
            )
    if failure is not None:
        report = ChainReport(spec.log, anchor.chain, 0, None, anchor.head_hash, 0, failure)
        return LogReport(spec.log, [report])
    return LogReport(spec.log, [await verify_chain(db, spec, anchor.chain, keys, anchor=anchor)])
