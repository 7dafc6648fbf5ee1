"""Audit log: every request (console pages included), filtered, newest first, and its CSV
export."""

from __future__ import annotations

import csv
import io
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import QueryParams

from server.api.dependencies import DbSession
from server.audit.models import AuditEntry
from server.audit.service import EXPORT_COLUMNS, AuditFilters, export_audit, read_audit
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.console.dependencies import page
from server.console.nav import NavEntry
from server.console.templating import render
from server.csv_export import safe_row
from server.errors import InvalidInput
from server.orgs.models import Organisation
from server.orgs.service import list_orgs

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/audit", "Audit log", Permission.AUDIT_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

PER_PAGE = 50
CSV_MAX_ROWS = 100_000
"""The CSV export holds at most this many rows (the newest matching ones)."""
FILTER_FIELDS = ("subject", "org", "session", "route", "exact", "status", "from", "to")
MAX_FILTER = 200
STATUS = re.compile(r"^([1-5])(?:xx|\d\d)$", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True, slots=True)
class Parsed:
    """A request's filters: what was entered (shown back in the form) and what it means."""

    entered: dict[str, str]
    filters: AuditFilters
    before_id: int | None


def _uuid(raw: str, label: str) -> uuid.UUID | None:
    if not raw:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidInput(f"{label} must be a UUID") from None


def _status(raw: str) -> tuple[int | None, int | None]:
    """``404`` is exactly 404, ``4xx`` is 400 to 499."""
    if not raw:
        return None, None
    match = STATUS.match(raw)
    if match is None:
        raise InvalidInput("status must be a code such as 404 or a class such as 4xx")
    if raw[1:].lower() == "xx":
        low = int(match.group(1)) * 100
        return low, low + 99
    return int(raw), int(raw)


def _moment(raw: str, label: str, *, end: bool) -> datetime | None:
    """A date (``2025-01-31``: its start, or for ``end`` the next day's start) or a date
    and time (``2025-01-31T14:30``), in UTC unless it names its offset."""
    if not raw:
        return None
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            return datetime.combine(day + timedelta(days=1 if end else 0), time(), UTC)
        moment = datetime.fromisoformat(raw)
    except (ValueError, OverflowError):
        raise InvalidInput(f"{label} must be a date (2025-01-31) or a date and time") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_filters(query: QueryParams) -> Parsed:
    """The filters of ``query`` (and ``before``, the page's row-id bound); ``InvalidInput``
    naming the first value that is not understood."""
    entered = {name: query.get(name, "").strip()[:MAX_FILTER] for name in FILTER_FIELDS}
    for name, value in entered.items():
        if not value.isprintable():
            raise InvalidInput(f"{name} may not hold control characters")
    status_min, status_max = _status(entered["status"])
    before = query.get("before", "")
    if before and (not before.isdecimal() or len(before) > 19 or not 1 <= int(before) <= 2**62):
        raise InvalidInput("before must be a row id")
    filters = AuditFilters(
        subject=entered["subject"] or None,
        org_id=_uuid(entered["org"], "organisation"),
        session_id=_uuid(entered["session"], "session"),
        route=entered["route"] or None,
        route_exact=bool(entered["exact"]),
        status_min=status_min,
        status_max=status_max,
        since=_moment(entered["from"], "from", end=False),
        until=_moment(entered["to"], "to", end=True),
    )
    return Parsed(entered, filters, int(before) if before else None)


def _link(entered: dict[str, str], **extra: str) -> str:
    params = [(k, v) for k, v in entered.items() if v]
    return "?" + urlencode([*params, *extra.items()])


@router.get(NAV.path, response_class=HTMLResponse)
async def audit_page(
    request: Request,
    db: DbSession,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The audit log, newest first, 50 rows a page (``?before=ID`` for older rows),
    filtered by subject, organisation, session, route, status and time; admins and
    auditors. Values that are not understood give the page with the reason (422)."""
    orgs = await list_orgs(db)
    entered = {name: request.query_params.get(name, "")[:MAX_FILTER] for name in FILTER_FIELDS}
    try:
        parsed = parse_filters(request.query_params)
    except InvalidInput as error:
        return _render(request, user, orgs, entered, [], error=error.detail, status_code=422)
    rows = await read_audit(db, filters=parsed.filters, limit=PER_PAGE, before_id=parsed.before_id)
    return _render(request, user, orgs, parsed.entered, rows, paged=parsed.before_id is not None)


def _render(
    request: Request,
    user: ConsoleUser,
    orgs: list[Organisation],
    entered: dict[str, str],
    rows: list[AuditEntry],
    *,
    paged: bool = False,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return render(
        request,
        "audit.html",
        user=user,
        title="Audit log",
        status_code=status_code,
        orgs=orgs,
        org_names={org.id: org.name for org in orgs},
        entered=entered,
        rows=rows,
        error=error,
        newest=_link(entered) if paged else None,
        older=_link(entered, before=str(rows[-1].id)) if len(rows) >= PER_PAGE else None,
        csv_link="/console/audit.csv" + _link(entered),
        csv_max=CSV_MAX_ROWS,
    )


@router.get("/console/audit.csv")
async def audit_csv(
    request: Request,
    db: DbSession,
    user: Annotated[ConsoleUser, page(Permission.AUDIT_READ)],
) -> Response:
    """The audit rows under the page's filters as a CSV attachment, newest first, at most
    ``CSV_MAX_ROWS`` (the ``X-Rows-Capped`` header says ``true`` when more matched);
    admins and auditors. Cells a spreadsheet would read as a formula are prefixed with a
    quote. 422 for filter values that are not understood."""
    parsed = parse_filters(request.query_params)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(safe_row(EXPORT_COLUMNS))
    written, capped = 0, False
    async for row in export_audit(db, filters=parsed.filters, limit=CSV_MAX_ROWS + 1):
        if written == CSV_MAX_ROWS:  # one row past the cap: more matched
            capped = True
            break
        writer.writerow(safe_row(row))
        written += 1
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={
            "content-disposition": f'attachment; filename="proctor-audit-{stamp}.csv"',
            "x-rows-capped": "true" if capped else "false",
        },
    )
