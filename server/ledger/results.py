"""The results ledger: every verdict written (a judge's score or a person's) is chained.

Whoever inserts a verdict (``server.scoring.service.record_verdict``, the review queue's
``server.review.service.score_task``) or withdraws one (``enqueue_session`` with
``review_again``) calls ``record`` in the same transaction: one ``ResultEntry`` per
verdict, with the verdict's content as written, appended to the writing process's chain
(``chain_name``). A withdrawn verdict gets an entry of method ``WITHDRAWN``. The chain is
signed from time to time (``CheckpointSigner``: after ``audit_checkpoint_rows`` rows or
``audit_checkpoint_s`` seconds, and at its first row), in the same transaction.

Verification (``proctor audit verify``) then does two things: it walks the chains
(``RESULTS_SPEC``, registered with ``server.ledger.verify``) against their checkpoints, which
finds an entry edited, deleted or inserted behind the writers' backs, and
``check_verdicts`` compares every current verdict with its latest entry, which finds a
verdict changed, deleted or slipped in afterwards (``UPDATE verdicts SET score = 3``).

What it cannot see: a change made before the entry was written (in the writing
transaction), a verdict written by code that bypasses ``record`` (reported as unrecorded,
not told apart from a forgery), and, without checkpoints, the last rows of a chain rewritten
together with the verdicts by someone who holds the database.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Row, and_, func, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.locks import lock
from server.config import Settings
from server.ledger import verify
from server.ledger.chain import ChainHead, Log, genesis, link
from server.ledger.checkpoints import new_checkpoint
from server.ledger.models import ChainCheckpoint, ResultEntry
from server.ledger.signing import SigningKey, load_signing_key
from server.scoring.models import Verdict

WITHDRAWN = "withdrawn"
"""The ``method`` of the entry that records a verdict deleted on purpose (re-judging an
answer left for review): the verdict's absence is then expected, not tampering."""
CHAIN_PREFIX = "r-"
LOCK_PREFIX = "ledger:results:"
CHAINED_COLUMNS = (
    "at",
    "verdict_id",
    "session_id",
    "position",
    "judge",
    "prompt_version",
    "score",
    "method",
    "needs_review",
)
"""The columns of ``result_ledger`` a row's hash covers: all but id, chain and the hashes."""
COMPARED = ("session_id", "position", "judge", "prompt_version", "score", "method", "needs_review")
"""What a current verdict must share with its latest entry."""
VERDICT_COLUMNS = (
    Verdict.id,
    Verdict.session_id,
    Verdict.position,
    Verdict.judge,
    Verdict.prompt_version,
    Verdict.score,
    Verdict.method,
    Verdict.needs_review,
)
"""What a writer reads back (``RETURNING``) and hands to ``record``."""


# --------------------------------------------------------------------------- chains


@dataclass(slots=True)
class _ChainName:
    pid: int = -1
    name: str = ""


_chain = _ChainName()


def chain_name() -> str:
    """This process's results chain: ``r-<host>-<pid>-<random>`` (at most 40 characters),
    new after a fork."""
    pid = os.getpid()
    if _chain.pid != pid:
        host = socket.gethostname().split(".")[0][:16] or "host"
        _chain.pid = pid
        _chain.name = f"{CHAIN_PREFIX}{host}-{pid}-{uuid.uuid4().hex[:8]}"[:40]
    return _chain.name


def fields(entry: Any) -> dict[str, Any]:
    """The chained fields of a ledger row: a mapping of its columns (what the verifier
    reads) or a ``ResultEntry``."""
    if isinstance(entry, Mapping):
        return {name: entry[name] for name in CHAINED_COLUMNS}
    return {name: getattr(entry, name) for name in CHAINED_COLUMNS}


RESULTS_SPEC = verify.LogSpec(Log.RESULTS, ResultEntry, fields)
"""How ``server.ledger.verify`` reads the results ledger (registered on import)."""
verify.register(RESULTS_SPEC)


# --------------------------------------------------------------------------- signing


@dataclass(slots=True)
class CheckpointSigner:
    """Signs a chain's checkpoint when it is due: at the chain's first row, then once
    ``every_rows`` rows were added or ``every_s`` seconds passed since the last one."""

    key: SigningKey
    every_rows: int
    every_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> CheckpointSigner:
        """The signer ``settings`` configure (the key is loaded once per key source)."""
        return cls(
            key=_key_of(settings),
            every_rows=settings.audit_checkpoint_rows,
            every_s=settings.audit_checkpoint_s,
        )


_keys: dict[tuple[str, str, str], SigningKey] = {}


def _key_of(settings: Settings) -> SigningKey:
    secret = settings.audit_signing_key
    source = (
        secret.get_secret_value() if secret is not None else "",
        str(settings.audit_signing_key_file or ""),
        str(settings.data_dir),
    )
    if source not in _keys:
        _keys[source] = load_signing_key(settings)
    return _keys[source]


# --------------------------------------------------------------------------- writing


async def record(
    db: AsyncSession,
    verdicts: Sequence[Any],
    *,
    withdrawn: bool = False,
    signer: CheckpointSigner | None = None,
) -> None:
    """Append one entry per verdict to this process's chain, in the caller's transaction.

    ``verdicts``: rows or objects with the ``VERDICT_COLUMNS`` (their content after the
    write; ``withdrawn``: they were just deleted). The chain's appends are serialised by a
    transaction-scoped lock; one multi-row INSERT writes them. With a ``signer``, a due
    checkpoint is signed and inserted too.
    """
    if not verdicts:
        return
    chain = chain_name()
    await lock(db, LOCK_PREFIX + chain)
    checkpoint, head_hash, since = await _head(db, chain)
    rows = []
    for verdict in verdicts:
        chained = _entry(verdict, withdrawn=withdrawn)
        row_hash = link(head_hash, chained)
        rows.append({**chained, "chain": chain, "prev_hash": head_hash, "row_hash": row_hash})
        head_hash = row_hash
    ids = (
        await db.execute(
            insert(ResultEntry).returning(ResultEntry.id, sort_by_parameter_order=True), rows
        )
    ).scalars()
    last_id = max(ids)
    since += len(rows)
    if signer is not None and _due(signer, checkpoint, since):
        n_rows = (checkpoint.n_rows if checkpoint is not None else 0) + since
        values = new_checkpoint(
            key=signer.key,
            log=Log.RESULTS,
            head=ChainHead(chain, n_rows, last_id, head_hash),
            prev_checkpoint_hash=checkpoint.checkpoint_hash if checkpoint is not None else None,
        )
        await db.execute(insert(ChainCheckpoint).values(**values))
        checkpoint = _Checkpoint(
            last_id, n_rows, head_hash, values["checkpoint_hash"], values["at"]
        )
        since = 0
    _heads[chain] = _Head(last_id, head_hash, since, checkpoint)


@dataclass(frozen=True, slots=True)
class _Head:
    """What this process last appended to its chain (trusted only while the chain's last
    row in the database is still ``last_id`` with ``head_hash``)."""

    last_id: int
    head_hash: str
    since: int
    """Rows after ``checkpoint``."""
    checkpoint: _Checkpoint | None


_heads: dict[str, _Head] = {}


async def _head(db: AsyncSession, chain: str) -> tuple[_Checkpoint | None, str, int]:
    """The chain's last checkpoint, head hash and rows since that checkpoint: from this
    process's memory when the chain's last row is the one it appended last (one indexed
    read), else read back (a transaction that appended rolled back, or a new process)."""
    cached = _heads.get(chain)
    if cached is not None:
        last = (
            await db.execute(
                select(ResultEntry.id, ResultEntry.row_hash)
                .where(ResultEntry.chain == chain)
                .order_by(ResultEntry.id.desc())
                .limit(1)
            )
        ).first()
        if last is not None and tuple(last) == (cached.last_id, cached.head_hash):
            return cached.checkpoint, cached.head_hash, cached.since
    checkpoint = await _last_checkpoint(db, chain)
    after = checkpoint.last_row_id if checkpoint is not None else 0
    head_hash, since = await _tail(db, chain, after)
    head_hash = head_hash or (checkpoint.head_hash if checkpoint else genesis(Log.RESULTS, chain))
    return checkpoint, head_hash, since


def _entry(verdict: Any, *, withdrawn: bool) -> dict[str, Any]:
    """The chained fields of a new entry for ``verdict``. ``link`` hashes exactly these
    (plus nothing else), so they are what a verifier reads back."""
    return {
        "at": utcnow(),
        "verdict_id": int(verdict.id),
        "session_id": verdict.session_id,
        "position": int(verdict.position),
        "judge": verdict.judge,
        "prompt_version": verdict.prompt_version,
        "score": None if verdict.score is None else int(verdict.score),
        "method": WITHDRAWN if withdrawn else verdict.method,
        "needs_review": bool(verdict.needs_review),
    }


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    last_row_id: int
    n_rows: int
    head_hash: str
    checkpoint_hash: str
    at: datetime


async def _last_checkpoint(db: AsyncSession, chain: str) -> _Checkpoint | None:
    row = (
        await db.execute(
            select(
                ChainCheckpoint.last_row_id,
                ChainCheckpoint.n_rows,
                ChainCheckpoint.head_hash,
                ChainCheckpoint.checkpoint_hash,
                ChainCheckpoint.at,
            )
            .where(ChainCheckpoint.log == Log.RESULTS.value, ChainCheckpoint.chain == chain)
            .order_by(ChainCheckpoint.id.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else _Checkpoint(*row)


async def _tail(db: AsyncSession, chain: str, after: int) -> tuple[str | None, int]:
    """The hash of the chain's last row after row ``after`` (None: there is none), and how
    many rows follow ``after`` (bounded by the checkpoint cadence)."""
    after_it = and_(ResultEntry.chain == chain, ResultEntry.id > after)
    last = await db.scalar(
        select(ResultEntry.row_hash).where(after_it).order_by(ResultEntry.id.desc()).limit(1)
    )
    if last is None:
        return None, 0
    count = await db.scalar(select(func.count()).select_from(ResultEntry).where(after_it))
    return last, int(count or 0)


def _due(signer: CheckpointSigner, checkpoint: _Checkpoint | None, since: int) -> bool:
    if checkpoint is None or since >= signer.every_rows:
        return True
    at = checkpoint.at if checkpoint.at.tzinfo else checkpoint.at.replace(tzinfo=UTC)
    return (utcnow() - at).total_seconds() >= signer.every_s


# --------------------------------------------------------------------------- verdicts


class VerdictProblem(StrEnum):
    """How a verdict disagrees with the ledger."""

    CHANGED = "changed"
    """It differs from its latest entry."""
    UNRECORDED = "unrecorded"
    """It has no entry, and was written after chaining began."""
    DELETED = "deleted"
    """Its latest entry records a verdict that is gone (or whose id another took)."""


@dataclass(frozen=True, slots=True)
class VerdictFinding:
    """One verdict that does not match the ledger."""

    verdict_id: int
    session_id: uuid.UUID
    position: int
    problem: VerdictProblem
    expected: Mapping[str, Any] | None
    """The latest entry's fields (None for an unrecorded verdict)."""
    found: Mapping[str, Any] | None
    """The verdict's fields (None for a deleted verdict)."""

    @property
    def differences(self) -> list[str]:
        """The fields that differ between ``expected`` and ``found``."""
        if self.expected is None or self.found is None:
            return []
        return [name for name in COMPARED if self.expected[name] != self.found[name]]


@dataclass(slots=True)
class VerdictReport:
    """``check_verdicts``: counts, and the first ``limit`` findings of each kind."""

    verdicts: int = 0
    matching: int = 0
    before_chaining: int = 0
    """Verdicts with no entry, created before the ledger's first entry."""
    withdrawn: int = 0
    """Entries recording a verdict deleted on purpose (re-judged), verdict indeed gone."""
    changed: int = 0
    unrecorded: int = 0
    deleted: int = 0
    findings: list[VerdictFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.changed or self.unrecorded or self.deleted)

    def count(self, problem: VerdictProblem) -> int:
        """Count one more verdict with ``problem``; the new count of that problem."""
        match problem:
            case VerdictProblem.CHANGED:
                self.changed += 1
                return self.changed
            case VerdictProblem.UNRECORDED:
                self.unrecorded += 1
                return self.unrecorded
            case VerdictProblem.DELETED:
                self.deleted += 1
                return self.deleted


def _latest() -> Any:
    """The id of each verdict's latest entry."""
    return (
        select(ResultEntry.verdict_id, func.max(ResultEntry.id).label("entry_id"))
        .group_by(ResultEntry.verdict_id)
        .subquery("latest")
    )


IDENTITY = ("session_id", "position", "judge", "prompt_version")
"""What makes a verdict the one it is; an entry followed (same verdict id) by an entry of
another identity recorded a verdict that was deleted and whose id was reused."""


async def check_verdicts(db: AsyncSession, *, limit: int = 100) -> VerdictReport:
    """Compare every current verdict with its latest ledger entry (see ``VerdictReport``).

    The comparisons run in the database (joins and one window over the ledger; only
    disagreeing rows come back, streamed), so they cost a few scans whatever the tables'
    sizes. At most ``limit`` findings of each kind are kept; the counts cover all.
    """
    report = VerdictReport()
    report.verdicts = int(await db.scalar(select(func.count()).select_from(Verdict)) or 0)

    def found(finding: VerdictFinding) -> None:
        if report.count(finding.problem) <= limit:
            report.findings.append(finding)

    await _disagreeing_verdicts(db, report, found)
    report.matching = report.verdicts - report.before_chaining - report.changed
    report.matching -= report.unrecorded
    await _gone_verdicts(db, report, found)
    await _reused_ids(db, found)
    return report


async def _disagreeing_verdicts(
    db: AsyncSession, report: VerdictReport, found: Callable[[VerdictFinding], None]
) -> None:
    """Verdicts that differ from their latest entry, or have none."""
    first_at = await _chaining_began(db)
    latest, entry = _latest(), ResultEntry
    differs = or_(*(getattr(entry, n).is_distinct_from(getattr(Verdict, n)) for n in COMPARED))
    statement = (
        select(*VERDICT_COLUMNS, Verdict.created_at, *_entry_columns())
        .outerjoin(latest, latest.c.verdict_id == Verdict.id)
        .outerjoin(entry, entry.id == latest.c.entry_id)
        .where(or_(entry.id.is_(None), differs))
        .order_by(Verdict.id)
    )
    async for row in await db.stream(statement):
        current = {name: getattr(row, name) for name in COMPARED}
        if row.entry_id is not None:
            found(VerdictFinding(row.id, row.session_id, row.position, VerdictProblem.CHANGED,
                                 _entry_fields(row), current))  # fmt: skip
        elif first_at is None or _aware(row.created_at) < _aware(first_at):
            report.before_chaining += 1
        else:
            found(VerdictFinding(row.id, row.session_id, row.position, VerdictProblem.UNRECORDED,
                                 None, current))  # fmt: skip


async def _chaining_began(db: AsyncSession) -> datetime | None:
    """When the ledger's first entry was written: the earliest of its entries and of its
    checkpoints (deleting the first entries does not move it while a checkpoint stays)."""
    entry_at = await db.scalar(select(func.min(ResultEntry.at)))
    checkpoint_at = await db.scalar(
        select(func.min(ChainCheckpoint.at)).where(ChainCheckpoint.log == Log.RESULTS.value)
    )
    known = [_aware(at) for at in (entry_at, checkpoint_at) if at is not None]
    return min(known) if known else None


async def _gone_verdicts(
    db: AsyncSession, report: VerdictReport, found: Callable[[VerdictFinding], None]
) -> None:
    """Latest entries whose verdict is gone: withdrawn on purpose, or deleted."""
    latest, entry = _latest(), ResultEntry
    statement = (
        select(*_entry_columns(), entry.verdict_id)
        .join(latest, latest.c.entry_id == entry.id)
        .outerjoin(Verdict, Verdict.id == entry.verdict_id)
        .where(Verdict.id.is_(None))
        .order_by(entry.verdict_id)
    )
    async for row in await db.stream(statement):
        if row.e_method == WITHDRAWN:
            report.withdrawn += 1
        else:
            found(_deleted(row))


async def _reused_ids(db: AsyncSession, found: Callable[[VerdictFinding], None]) -> None:
    """Entries of verdicts deleted without a trace whose id a new verdict then took (SQLite
    hands out the highest deleted id again): the next entry of the same verdict id records
    another verdict, and no withdrawal came between."""
    entry = ResultEntry

    def following(column: Any, label: str) -> Any:
        return func.lead(column).over(partition_by=entry.verdict_id, order_by=entry.id).label(label)

    history = select(
        *_entry_columns(),
        entry.verdict_id,
        following(entry.id, "next_id"),
        *(following(getattr(entry, n), f"n_{n}") for n in IDENTITY),
    ).subquery("history")
    other = or_(*(history.c[f"n_{n}"].is_distinct_from(history.c[f"e_{n}"]) for n in IDENTITY))
    statement = (
        select(history)
        .where(history.c.next_id.is_not(None), history.c.e_method != WITHDRAWN, other)
        .order_by(history.c.verdict_id, history.c.entry_id)
    )
    async for row in await db.stream(statement):
        found(_deleted(row))


def _deleted(row: Row[Any]) -> VerdictFinding:
    """The finding for an entry (``_entry_columns`` and ``verdict_id``) whose verdict is gone."""
    return VerdictFinding(
        row.verdict_id,
        row.e_session_id,
        row.e_position,
        VerdictProblem.DELETED,
        _entry_fields(row),
        None,
    )


def _entry_columns() -> list[Any]:
    entry = ResultEntry
    return [entry.id.label("entry_id")] + [
        getattr(entry, name).label(f"e_{name}") for name in COMPARED
    ]


def _entry_fields(row: Row[Any]) -> dict[str, Any]:
    return {name: getattr(row, f"e_{name}") for name in COMPARED}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def describe(finding: VerdictFinding) -> str:
    """One line locating a finding: verdict, session, position, expected vs found."""
    where = f"verdict {finding.verdict_id} (session {finding.session_id}, position "
    where += f"{finding.position})"
    if finding.problem is VerdictProblem.CHANGED:
        assert finding.expected is not None and finding.found is not None
        diffs = ", ".join(
            f"{name}: ledger {finding.expected[name]!r}, verdict {finding.found[name]!r}"
            for name in finding.differences
        )
        return f"{where} changed after it was recorded: {diffs}"
    if finding.problem is VerdictProblem.UNRECORDED:
        return f"{where} has no ledger entry (written outside the scoring and review paths)"
    return f"{where} was deleted; the ledger recorded score {_score(finding.expected)}"


def _score(values: Mapping[str, Any] | None) -> Any:
    return None if values is None else values.get("score")


def summary(report: VerdictReport) -> str:
    """One line: what ``check_verdicts`` compared and found."""
    state = "ok" if report.ok else "FAILED"
    return (
        f"verdicts: {state}: {report.verdicts} verdict(s), {report.matching} match the "
        f"ledger, {report.changed} changed, {report.deleted} deleted, {report.unrecorded} "
        f"unrecorded; {report.withdrawn} withdrawn by re-judging, {report.before_chaining} "
        "written before chaining"
    )


def as_json(report: VerdictReport) -> dict[str, Any]:
    """``report`` as JSON-able data (findings with their differing fields)."""
    out: dict[str, Any] = {
        "verdicts": report.verdicts,
        "matching": report.matching,
        "before_chaining": report.before_chaining,
        "withdrawn": report.withdrawn,
        "changed": report.changed,
        "deleted": report.deleted,
        "unrecorded": report.unrecorded,
        "ok": report.ok,
    }
    out["findings"] = [
        {
            "verdict_id": f.verdict_id,
            "session_id": str(f.session_id),
            "position": f.position,
            "problem": f.problem.value,
            "differences": f.differences,
            "expected": None
            if f.expected is None
            else {k: _plain(v) for k, v in f.expected.items()},
            "found": None if f.found is None else {k: _plain(v) for k, v in f.found.items()},
        }
        for f in report.findings
    ]
    return out


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value
