"""Bank: the bank's composition, importing a file, the item browser with an item's page
and its review, and the health figures of the newest snapshot with its flagged items.

Admins and auditors read every page (``BANK_HEALTH_READ``); only admins import
(``BANK_IMPORT``), review (``BANK_REVIEW``) and see reference answers. Everything goes
through the services the JSON API and ``proctor bank import`` use.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import FormData, UploadFile

from bank.disciplines import list_disciplines
from bank.formats import FORMATS
from bank.importer import ImportRefused, ImportReport
from bank.item_status import MAX_NOTE, ReviewAction
from bank.models import ITEM_STATUSES, ItemStatus
from bank.records import QTYPES
from bank.stats import bank_stats
from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.bank_items.schemas import BankItemOut, ReviewIn
from server.bank_items.service import (
    get_item,
    history,
    import_upload,
    items_by_id,
    list_items,
    review,
    sees_answers,
    upload_name,
)
from server.console import plots
from server.console.dependencies import CheckedForm, page
from server.console.nav import NavEntry
from server.console.pagination import Pager
from server.console.templating import render
from server.errors import Conflict, InvalidInput
from server.health.service import CAS_BINS, HealthSummary, latest_health_summary

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/bank", "Bank", Permission.BANK_HEALTH_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

Reader = Annotated[ConsoleUser, page(NAV.permission)]
Importer = Annotated[ConsoleUser, page(Permission.BANK_IMPORT)]
Reviewer = Annotated[ConsoleUser, page(Permission.BANK_REVIEW)]

NOTICES = {
    "kept": "Item kept: it is active again and sampled as before.",
    "retired": "Item retired: it is never sampled again.",
    "edited": "Item edited: the old version is retired and this corrected one is active.",
}
ACTION_NOTICE = {ReviewAction.KEEP: "kept", ReviewAction.RETIRE: "retired"}
MAX_SEARCH = 200
MAX_SHOWN_ERRORS = 1000
"""Refusal lines an import page lists (the count says how many more there are)."""
HEALTH_FIGURES = (
    ("bhi", "Bank health index (BHI)"),
    ("ds", "Discriminability (DS)"),
    ("edr", "Effective differentiation (EDR)"),
    ("rcv", "Robust spread (RCV)"),
    ("cad", "Capability alignment (CAD)"),
    ("cas", "Capability alignment score (CAS)"),
    ("stability", "Rank stability"),
    ("s_sta", "Static resistance (S_Sta)"),
    ("s_dyn", "Dynamic resistance (S_Dyn)"),
    ("s_as", "Resistance to saturation (S_AS)"),
    ("ovl", "Ability/difficulty overlap (OVL)"),
    ("cbrc", "Cross-benchmark consistency (CBRC)"),
    ("bqs", "Benchmark quality (BQS)"),
)


def _notice(request: Request) -> str | None:
    return NOTICES.get(request.query_params.get("notice", ""))


def _field(form: FormData, name: str) -> str:
    """A text field of ``form`` ("" when absent or a file)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


# -- the bank's composition ---------------------------------------------------------------


@router.get(NAV.path, response_class=HTMLResponse)
async def bank_page(request: Request, db: DbSession, user: Reader) -> HTMLResponse:
    """The bank's items, families, originals and variants; counts by status, discipline
    (with its display name) and question type, each linking to the item browser; links to
    the import, the browser and the health figures. Admins and auditors."""
    disciplines = {row.key: row.display_name for row in await list_disciplines(db)}
    return render(
        request,
        "bank.html",
        user=user,
        title="Bank",
        stats=await bank_stats(db),
        disciplines=disciplines,
    )


# -- import -------------------------------------------------------------------------------


def _render_import(
    request: Request,
    user: ConsoleUser,
    max_bytes: int,
    *,
    status_code: int = 200,
    errors: list[str] | None = None,
    report: ImportReport | None = None,
    name: str | None = None,
) -> HTMLResponse:
    shown = (errors or [])[:MAX_SHOWN_ERRORS]
    return render(
        request,
        "bank_import.html",
        user=user,
        title="Import items",
        status_code=status_code,
        formats=FORMATS,
        max_bytes=max_bytes,
        max_mib=max_bytes / 1024 / 1024,
        errors=shown,
        more_errors=len(errors or []) - len(shown),
        report=report,
        name=name,
    )


@router.get("/console/bank/import", response_class=HTMLResponse)
async def import_page(request: Request, runtime: RuntimeDep, user: Reader) -> HTMLResponse:
    """The upload form (admins only; auditors read what it accepts) with the formats and
    the size limit."""
    return _render_import(request, user, runtime.settings.max_body_bytes)


@router.post("/console/bank/import", response_class=HTMLResponse)
async def import_file(
    request: Request, db: DbSession, runtime: RuntimeDep, user: Importer, form: CheckedForm
) -> HTMLResponse:
    """Import the uploaded ``file`` as ``proctor bank import`` does, all or nothing; admins.
    A refused file imports nothing and answers 422 with every problem as
    ``file:line: field: what``; an imported one shows the import's report."""
    limit = runtime.settings.max_body_bytes
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        return _render_import(request, user, limit, status_code=422, errors=["choose a file"])
    name = upload_name(upload.filename)
    data = await upload.read()
    if not data.strip():
        errors = [f"{name}: file: empty; nothing was imported"]
        return _render_import(request, user, limit, status_code=422, errors=errors, name=name)
    fmt = _field(form, "format") or None
    try:
        async with db.begin_nested():  # whatever fails, nothing of it is committed
            report = await import_upload(
                db,
                client_name=upload.filename,
                data=data,
                fmt=fmt,
                augment=_field(form, "augment") == "on",
                add_disciplines=_field(form, "add_disciplines") == "on",
            )
    except ImportRefused as refused:
        errors = [str(error) for error in refused.errors]
        return _render_import(request, user, limit, status_code=422, errors=errors, name=name)
    except InvalidInput as invalid:
        return _render_import(
            request, user, limit, status_code=422, errors=[invalid.detail], name=name
        )
    return _render_import(request, user, limit, report=report, name=name)


# -- the item browser ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ItemFilters:
    """The browser's filters as the request gives them (unknown values are no filter)."""

    search: str
    discipline: str
    qtype: str
    status: str

    @classmethod
    def of(cls, request: Request, disciplines: dict[str, str]) -> ItemFilters:
        query = request.query_params
        discipline = query.get("discipline", "")
        qtype = query.get("qtype", "")
        status = query.get("status", "")
        return cls(
            search=query.get("q", "").strip()[:MAX_SEARCH],
            discipline=discipline if discipline in disciplines else "",
            qtype=qtype if qtype in QTYPES else "",
            status=status if status in ITEM_STATUSES else "",
        )


@router.get("/console/bank/items", response_class=HTMLResponse)
async def items_page(request: Request, db: DbSession, user: Reader) -> HTMLResponse:
    """Items newest id first, a page at a time: searched by a substring of the question
    and filtered by discipline, question type and status. Admins and auditors (answers
    are on an item's page, for admins)."""
    disciplines = {row.key: row.display_name for row in await list_disciplines(db)}
    filters = ItemFilters.of(request, disciplines)
    pager = Pager.of(request.query_params)
    items = await list_items(
        db,
        principal=user.principal,
        status=ItemStatus(filters.status) if filters.status else None,
        discipline=filters.discipline or None,
        qtype=filters.qtype or None,
        search=filters.search or None,
        limit=pager.per_page,
        offset=pager.offset,
        before=None,
    )
    return render(
        request,
        "bank_items.html",
        user=user,
        title="Bank items",
        items=items,
        pager=pager,
        filters=filters,
        disciplines=disciplines,
        qtypes=sorted(QTYPES),
        statuses=[status.value for status in ItemStatus],
        max_search=MAX_SEARCH,
    )


async def _render_item(
    request: Request,
    db: AsyncSession,
    user: ConsoleUser,
    item_id: uuid.UUID,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    item = await get_item(db, principal=user.principal, item_id=item_id)
    return render(
        request,
        "bank_item.html",
        user=user,
        title=f"Item {item.id}",
        status_code=status_code,
        item=item,
        options=_lettered(item),
        options_editable=_options_editable(item),
        changes=await history(db, principal=user.principal, item_id=item_id),
        sees_answers=sees_answers(user.principal),
        notice=_notice(request),
        error=error,
        max_note=MAX_NOTE,
    )


def _lettered(item: BankItemOut) -> list[tuple[str, str]]:
    return [(chr(ord("A") + i), text) for i, text in enumerate(item.options or [])]


def _options_editable(item: BankItemOut) -> bool:
    """Whether the edit form offers the options, one a line (not when one holds a line
    break: it would come back as two)."""
    return item.options is not None and not any("\n" in option for option in item.options)


@router.get("/console/bank/items/{item_id}", response_class=HTMLResponse)
async def item_page(
    request: Request, item_id: uuid.UUID, db: DbSession, user: Reader
) -> HTMLResponse:
    """One item: its question, options, status and history (who changed it, when, why);
    the reference answer and explanation, the reviewers' notes and the review forms (keep,
    retire, edit and restore) for admins only."""
    return await _render_item(request, db, user, item_id)


def _review_body(form: FormData, item: BankItemOut) -> ReviewIn:
    """The review the form asks for; for an edit, only the fields that differ from the
    item (options one a line; a blank field is left as it is). ``ValidationError`` or
    ``ValueError`` if it is not one."""
    actions = {action.value: action for action in ReviewAction}
    action = actions.get(_field(form, "action"))
    if action is None:
        raise ValueError("choose keep, retire or edit")
    edits: dict[str, Any] = {}
    if action is ReviewAction.EDIT:
        for name in ("question", "answer", "explanation"):
            value = _field(form, name).replace("\r\n", "\n").strip()
            if value and value != (getattr(item, name) or ""):
                edits[name] = value
        if _options_editable(item):
            lines = _field(form, "options").replace("\r\n", "\n").split("\n")
            options = [line.strip() for line in lines if line.strip()]
            if options and options != item.options:
                edits["options"] = options
        if not edits:
            raise ValueError("change the question, an option, the answer or the explanation")
    return ReviewIn(action=action, note=_field(form, "note").strip(), **edits)


def _validation_text(error: ValidationError) -> str:
    fields = sorted({".".join(str(p) for p in e["loc"]) or "form" for e in error.errors()})
    return "check these fields: " + ", ".join(fields)


@router.post("/console/bank/items/{item_id}/review", response_model=None)
async def review_item(
    request: Request, item_id: uuid.UUID, db: DbSession, user: Reviewer, form: CheckedForm
) -> Response:
    """Keep, retire, or edit and restore the item through the review service of
    ``POST /v1/admin/bank/items/{id}/review``; admins. A refused review changes nothing
    and shows the item again with why (422, or 409 for a move its status does not
    allow)."""
    item = await get_item(db, principal=user.principal, item_id=item_id)
    try:
        body = _review_body(form, item)
    except ValidationError as invalid:
        error = _validation_text(invalid)
        return await _render_item(request, db, user, item_id, error=error, status_code=422)
    except ValueError as invalid:
        return await _render_item(request, db, user, item_id, error=str(invalid), status_code=422)
    try:
        async with db.begin_nested():
            done = await review(db, principal=user.principal, item_id=item_id, body=body)
    except (InvalidInput, Conflict) as refused:
        return await _render_item(
            request, db, user, item_id, error=refused.detail, status_code=refused.status
        )
    if _field(form, "back") == "health":
        return RedirectResponse(
            f"/console/bank/health?notice={ACTION_NOTICE.get(body.action, 'edited')}",
            status_code=303,
        )
    if done.revision is not None:
        return RedirectResponse(
            f"/console/bank/items/{done.revision.id}?notice=edited", status_code=303
        )
    return RedirectResponse(
        f"/console/bank/items/{item_id}?notice={ACTION_NOTICE[body.action]}", status_code=303
    )


# -- health ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: float | None
    n: int | None
    missing: str | None


def _figures(bank: dict[str, Any]) -> list[Figure]:
    counts = bank.get("n") or {}
    missing = bank.get("missing") or {}
    return [
        Figure(label, _number(bank.get(key)), counts.get(key), missing.get(key))
        for key, label in HEALTH_FIGURES
    ]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _difficulty_label(row: dict[str, Any]) -> str:
    bounds = row.get("difficulty")
    low, high = (
        (_number(bounds[0]), _number(bounds[1]))
        if isinstance(bounds, list) and len(bounds) == 2
        else (None, None)
    )
    if low is None or high is None:
        return "?"
    return f"{low:.2f}–{high:.2f}"


def _plots(summary: HealthSummary) -> dict[str, Any]:
    bins = [row for row in summary.bank.get("by_difficulty") or [] if isinstance(row, dict)]
    width = 1 / CAS_BINS
    return {
        "ds_by_difficulty": plots.bar_chart(
            [(_difficulty_label(row), _number(row.get("ds"))) for row in bins],
            title="DS by difficulty (1 − p) bin",
        ),
        "cas_histogram": plots.bar_chart(
            [
                (f"{i * width:.1f}–{(i + 1) * width:.1f}", float(n))
                for i, n in enumerate(summary.items.cas_bins)
            ],
            title="Items by CAS",
        ),
        "flag_chart": plots.bar_chart(
            [(rule, float(n)) for rule, n in summary.items.flag_counts.items()],
            title="Items per flag rule",
        ),
        "bins": [
            (
                _difficulty_label(row),
                row.get("n_items"),
                _number(row.get("ds")),
                _number(row.get("cas")),
            )
            for row in bins
        ],
    }


@router.get("/console/bank/health", response_class=HTMLResponse)
async def health_page(request: Request, db: DbSession, user: Reader) -> HTMLResponse:
    """The newest health snapshot: the bank's figures with the count each rests on (or
    why it is missing), DS by difficulty bin, the CAS distribution over items, how often
    each flag rule fired, the strata, and the flagged items a page at a time with their
    flags and current status. Admins and auditors; admins also keep or retire a flagged
    item from here."""
    pager = Pager.of(request.query_params)
    summary = await latest_health_summary(
        db, flagged_limit=pager.per_page, flagged_offset=pager.offset
    )
    context: dict[str, Any] = {"summary": summary, "pager": pager, "notice": _notice(request)}
    if summary is not None:
        ids = [_uuid(row.item_id) for row in summary.flagged]
        context.update(
            _plots(summary),
            figures=_figures(summary.bank),
            items=await items_by_id(
                db, principal=user.principal, item_ids=[i for i in ids if i is not None]
            ),
            flagged=list(zip(summary.flagged, ids, strict=True)),
            strata=sorted(summary.items.strata.items()),
        )
    return render(request, "bank_health.html", user=user, title="Bank health", **context)


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
