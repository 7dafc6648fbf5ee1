"""Organisations and keys: the organisations with their quotas and keys; admins create
organisations, set quotas, create keys (shown once) and revoke them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.models import ApiKey
from server.auth.permissions import PLATFORM_ROLES, Permission, Role
from server.auth.service import create_api_key, key_counts, list_api_keys, revoke_api_key
from server.config import Settings
from server.console.dependencies import CheckedForm, page
from server.console.nav import NavEntry
from server.console.templating import render
from server.errors import Conflict, InvalidInput, NotFound
from server.orgs.models import Organisation
from server.orgs.service import (
    MAX_NAME,
    MAX_QUOTA,
    create_org,
    get_org_by_id,
    list_orgs,
    set_quotas,
)

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/orgs", "Organisations", Permission.ORGS_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

NOTICES = {
    "org-created": "Organisation created.",
    "quotas-saved": "Quotas saved; they apply from the next session opened.",
    "key-revoked": "Key revoked: its tokens and console logins have ended.",
}
QUOTA_FIELDS = ("max_concurrent_sessions", "max_sessions_per_period")


@dataclass(frozen=True, slots=True)
class Quota:
    """One quota as the page shows it: the value in force, and whether it is the
    settings' default (the organisation has none of its own)."""

    value: int
    default: bool


@dataclass(frozen=True, slots=True)
class OrgRow:
    org: Organisation
    concurrent: Quota
    per_period: Quota
    live_keys: int
    keys: int


def quotas_of(org: Organisation, settings: Settings) -> tuple[Quota, Quota]:
    """``org``'s open-session and per-period quotas in force (as ``org_limits`` reads them)."""
    own_concurrent, own_period = org.max_concurrent_sessions, org.max_sessions_per_period
    return (
        Quota(own_concurrent or settings.max_concurrent_sessions, own_concurrent is None),
        Quota(own_period or settings.max_sessions_per_period, own_period is None),
    )


def notice_text(request: Request) -> str | None:
    return NOTICES.get(request.query_params.get("notice", ""))


async def render_orgs(
    request: Request,
    db: AsyncSession,
    settings: Settings,
    user: ConsoleUser,
    *,
    error: str | None = None,
    status_code: int = 200,
    name: str = "",
) -> HTMLResponse:
    rows = []
    counts = await key_counts(db)
    for org in await list_orgs(db):
        concurrent, per_period = quotas_of(org, settings)
        live, total = counts.get(org.id, (0, 0))
        rows.append(OrgRow(org, concurrent, per_period, live, total))
    return render(
        request,
        "orgs.html",
        user=user,
        title="Organisations",
        status_code=status_code,
        rows=rows,
        period_s=settings.session_period_s,
        notice=notice_text(request),
        error=error,
        name=name,
        max_name=MAX_NAME,
    )


async def render_org(
    request: Request,
    db: AsyncSession,
    settings: Settings,
    user: ConsoleUser,
    org: Organisation,
    *,
    error: str | None = None,
    status_code: int = 200,
    new_key: tuple[ApiKey, str] | None = None,
    form: dict[str, Any] | None = None,
) -> HTMLResponse:
    concurrent, per_period = quotas_of(org, settings)
    roles = [role for role in Role if org.is_operator or role not in PLATFORM_ROLES]
    return render(
        request,
        "org.html",
        user=user,
        title=f"Organisation {org.name}",
        status_code=status_code,
        org=org,
        keys=await list_api_keys(db, org_id=org.id),
        concurrent=concurrent,
        per_period=per_period,
        settings=settings,
        roles=roles,
        notice=notice_text(request) if new_key is None else None,
        error=error,
        new_key=new_key,
        form=form or {},
        max_quota=MAX_QUOTA,
    )


@router.get(NAV.path, response_class=HTMLResponse)
async def orgs_page(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """Every organisation (operator first) with its quotas in force (and whether they are
    the settings' defaults) and its number of keys; admins and auditors. Admins also get
    the form creating an organisation."""
    return await render_orgs(request, db, runtime.settings, user)


@router.post("/console/orgs", response_model=None)
async def create_org_action(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.ORGS_MANAGE)],
    form: CheckedForm,
) -> Response:
    """Create an organisation (never the operator's: that stays with the CLI); admins only.
    303 to its page; the list again with the reason (422, 409 for a taken name) if refused."""
    name = str(form.get("name") or "")
    try:
        org = await create_org(db, name=name, operator=False)
    except (InvalidInput, Conflict) as error:
        return await render_orgs(
            request,
            db,
            runtime.settings,
            user,
            error=error.detail,
            status_code=error.status,
            name=name,
        )
    return RedirectResponse(f"/console/orgs/{org.id}?notice=org-created", status_code=303)


@router.get("/console/orgs/{org_id}", response_class=HTMLResponse)
async def org_page(
    request: Request,
    org_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.ORGS_READ)],
) -> HTMLResponse:
    """One organisation: its quotas and keys (role, created, revoked; the key's prefix for
    admins only, never the key); admins and auditors. Admins also get the quota form, the
    key-creation form and a revoke button per live key."""
    org = await get_org_by_id(db, org_id=org_id)
    return await render_org(request, db, runtime.settings, user, org)


def parse_quota(raw: object, field: str) -> int | None:
    """A quota field: blank is None (the settings' default); ``InvalidInput`` if it is not
    a whole number."""
    text = str(raw or "").strip()
    if not text:
        return None
    if not text.isdecimal() or len(text) > 9:
        raise InvalidInput(f"{field} must be a whole number between 1 and {MAX_QUOTA}")
    return int(text)


@router.post("/console/orgs/{org_id}/quotas", response_model=None)
async def set_quotas_action(
    request: Request,
    org_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.ORGS_MANAGE)],
    form: CheckedForm,
) -> Response:
    """Set the organisation's session quotas (a blank field: the settings' default);
    admins only. Checked at the next session creation. 303 to the page; the page with the
    reason (422) for a value out of range."""
    org = await get_org_by_id(db, org_id=org_id)
    entered = {field: str(form.get(field) or "") for field in QUOTA_FIELDS}
    try:
        await set_quotas(
            db,
            org_id=org.id,
            max_concurrent_sessions=parse_quota(
                entered["max_concurrent_sessions"], "open sessions"
            ),
            max_sessions_per_period=parse_quota(
                entered["max_sessions_per_period"], "sessions per period"
            ),
        )
    except InvalidInput as error:
        return await render_org(
            request,
            db,
            runtime.settings,
            user,
            org,
            error=error.detail,
            status_code=error.status,
            form=entered,
        )
    return RedirectResponse(f"/console/orgs/{org.id}?notice=quotas-saved", status_code=303)


@router.post("/console/orgs/{org_id}/keys", response_model=None)
async def create_key_action(
    request: Request,
    org_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.ORGS_MANAGE)],
    form: CheckedForm,
) -> Response:
    """Create an API key of the chosen role for the organisation; admins only. The answer
    (200, not stored by the browser: ``Cache-Control: no-store``) is the organisation's
    page showing the key this once; afterwards only its prefix. A platform role for an
    organisation that is not the operator's is refused with the reason (422)."""
    org = await get_org_by_id(db, org_id=org_id)
    try:
        new_key = await create_api_key(db, org_id=org.id, role=str(form.get("role") or ""))
    except InvalidInput as error:
        return await render_org(
            request, db, runtime.settings, user, org, error=error.detail, status_code=error.status
        )
    return await render_org(request, db, runtime.settings, user, org, new_key=new_key)


@router.post("/console/orgs/{org_id}/keys/{key_id}/revoke", response_model=None)
async def revoke_key_action(
    org_id: uuid.UUID,
    key_id: uuid.UUID,
    db: DbSession,
    user: Annotated[ConsoleUser, page(Permission.ORGS_MANAGE)],
    form: CheckedForm,
) -> Response:
    """Revoke one of the organisation's keys, with its tokens and console logins; admins
    only. 303 to the organisation's page (to the login page if it was the admin's own)."""
    org = await get_org_by_id(db, org_id=org_id)
    if key_id not in {key.id for key in await list_api_keys(db, org_id=org.id)}:
        raise NotFound(f"no API key {key_id} in organisation {org.name!r}")
    await revoke_api_key(db, key_id=key_id)
    return RedirectResponse(f"/console/orgs/{org.id}?notice=key-revoked", status_code=303)
