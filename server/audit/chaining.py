"""The audit log's hash chain: which fields of a row are hashed, and linking a batch.

Every column of ``audit_log`` except ``id``, ``chain``, ``prev_hash`` and ``row_hash`` is
hashed (``server.ledger.chain.link``). The ``at`` time is normalised to UTC before it is
both stored and hashed, so the value hashed is exactly the value that reads back (aware
from PostgreSQL, naive UTC from SQLite: ``server.ledger.chain.canonical`` reads naive as
UTC).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bank.database import utcnow
from server.audit.models import AuditEntry
from server.ledger.chain import ChainHead, Log, link

CHAIN_COLUMNS = frozenset({"id", "chain", "prev_hash", "row_hash"})
HASHED_COLUMNS: tuple[str, ...] = tuple(
    column.name for column in AuditEntry.__table__.columns if column.name not in CHAIN_COLUMNS
)
"""The columns a row's hash covers (every column but the chain's own and the id)."""
HASHED_WHEN_SET = frozenset({"reason"})
"""Columns added after rows were chained: hashed only when they hold a value, so that
every row written before them verifies unchanged."""


def audit_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The hashed fields of an audit row (a row to insert, or one read back): every column
    except ``id``, ``chain``, ``prev_hash`` and ``row_hash``; a missing one is None, and
    one of ``HASHED_WHEN_SET`` without a value is left out."""
    return {
        name: row.get(name)
        for name in HASHED_COLUMNS
        if name not in HASHED_WHEN_SET or row.get(name) is not None
    }


def _utc(moment: Any) -> datetime:
    """``moment`` as an aware UTC datetime (now if missing; naive is read as UTC)."""
    if not isinstance(moment, datetime):
        return utcnow()
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def chained_values(
    rows: Sequence[Mapping[str, Any]], head: ChainHead
) -> tuple[list[dict[str, Any]], str]:
    """The column values to insert for ``rows`` appended, in order, to the chain ending at
    ``head``, and the hash of the last one. ``rows`` are not modified (a spooled row is
    chained afresh by whichever writer replays it). Every value dict has every column (a
    batch is one multi-row insert), while the hash leaves out an unset ``HASHED_WHEN_SET``
    column (``audit_fields``)."""
    values: list[dict[str, Any]] = []
    prev = head.head_hash
    for row in rows:
        stored = {name: row.get(name) for name in HASHED_COLUMNS}
        stored["repeats"] = row.get("repeats", 1)
        stored["at"] = _utc(stored["at"])
        row_hash = link(prev, audit_fields(stored))
        values.append({**stored, "chain": head.chain, "prev_hash": prev, "row_hash": row_hash})
        prev = row_hash
    return values, prev


LOG = Log.AUDIT
