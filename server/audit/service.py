"""Reading the audit log (keyword-only services; nothing here writes to it).

The JSON endpoint (``GET /v1/admin/audit``) and the console's audit page and CSV export
read through ``read_audit``, so they filter and order the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from server.audit.models import AuditEntry
from server.errors import InvalidInput

MAX_LIMIT = 1_000_000
"""The most rows one read or export returns."""


@dataclass(frozen=True, slots=True)
class AuditFilters:
    """Which audit rows to read; every field left None matches everything."""

    subject: str | None = None
    """The API key id of the requests' principal (exact)."""
    org_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    route: str | None = None
    """Part of the route template (``/console/orgs`` matches ``/console/orgs/{org_id}``
    too), or the whole template with ``route_exact``. ``%`` and ``_`` are literal."""
    route_exact: bool = False
    status_min: int | None = None
    """Lowest status, inclusive (404 for exactly 404 with ``status_max`` 404; 400 and 499
    for the class 4xx)."""
    status_max: int | None = None
    """Highest status, inclusive."""
    since: datetime | None = None
    """Rows at or after this instant (timezone-aware)."""
    until: datetime | None = None
    """Rows strictly before this instant (timezone-aware)."""


async def read_audit(
    db: AsyncSession,
    *,
    filters: AuditFilters,
    limit: int,
    before_id: int | None = None,
    offset: int = 0,
) -> list[AuditEntry]:
    """Up to ``limit`` (1 to ``MAX_LIMIT``) audit rows matching ``filters``, newest first
    (by id, the order they were written in); ``before_id`` pages by key (rows with a lower
    id only), ``offset`` skips rows. ``InvalidInput`` for a limit or offset out of range,
    or a naive ``since``/``until``."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if offset < 0:
        raise InvalidInput(f"offset must not be negative, got {offset}")
    statement = _filtered(select(AuditEntry), filters)
    if before_id is not None:
        statement = statement.where(AuditEntry.id < before_id)
    statement = statement.order_by(AuditEntry.id.desc()).limit(limit).offset(offset)
    return list((await db.execute(statement)).scalars())


Selected = TypeVar("Selected", bound=tuple[Any, ...])


def _filtered(statement: Select[Selected], f: AuditFilters) -> Select[Selected]:
    """``statement`` narrowed to the rows ``f`` matches; ``InvalidInput`` for a naive time."""
    for moment in (f.since, f.until):
        if moment is not None and moment.tzinfo is None:
            raise InvalidInput(f"audit times must carry a timezone, got {moment.isoformat()}")
    if f.subject is not None:
        statement = statement.where(AuditEntry.subject == f.subject)
    if f.org_id is not None:
        statement = statement.where(AuditEntry.org_id == f.org_id)
    if f.session_id is not None:
        statement = statement.where(AuditEntry.session_id == f.session_id)
    if f.route is not None:
        statement = statement.where(
            AuditEntry.route == f.route
            if f.route_exact
            else AuditEntry.route.contains(f.route, autoescape=True)
        )
    if f.status_min is not None:
        statement = statement.where(AuditEntry.status >= f.status_min)
    if f.status_max is not None:
        statement = statement.where(AuditEntry.status <= f.status_max)
    if f.since is not None:
        statement = statement.where(AuditEntry.at >= f.since)
    if f.until is not None:
        statement = statement.where(AuditEntry.at < f.until)
    return statement


EXPORT_COLUMNS = (
    "id",
    "at",
    "subject",
    "org_id",
    "session_id",
    "method",
    "route",
    "status",
    "client",
    "repeats",
    "reason",
)
"""The columns ``export_audit`` gives, in order."""


async def export_audit(
    db: AsyncSession, *, filters: AuditFilters, limit: int, batch: int = 5_000
) -> AsyncIterator[tuple[Any, ...]]:
    """Up to ``limit`` (1 to ``MAX_LIMIT``) audit rows matching ``filters``, newest first,
    as plain tuples of ``EXPORT_COLUMNS`` (no ORM objects are kept, so a large export
    stays small in memory), read ``batch`` rows at a time by key. ``InvalidInput`` as for
    ``read_audit``."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    columns = [getattr(AuditEntry, name) for name in EXPORT_COLUMNS]
    before_id: int | None = None
    left = limit
    while left > 0:
        statement = _filtered(select(*columns), filters)
        if before_id is not None:
            statement = statement.where(AuditEntry.id < before_id)
        size = min(batch, left)
        rows = (await db.execute(statement.order_by(AuditEntry.id.desc()).limit(size))).all()
        for row in rows:
            yield tuple(row)
        if len(rows) < size:
            return
        left -= size
        before_id = rows[-1][0]
