"""Console request dependencies: the logged-in user, page permissions, checked forms.

Use the ``Annotated`` aliases: ``user: ConsoleUserDep`` for any logged-in user,
``user: Annotated[ConsoleUser, page(Permission.X)]`` for a page that needs ``X``, and
``form: CheckedForm`` on every state-changing route (the CSRF token and the ``Origin``
header checked before the route runs).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import FormData

from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser, LoginLimits, resolve_login
from server.auth.permissions import Permission
from server.auth.throttle import client_address, failure_limit, refusals_counted, request_limits
from server.config import Settings
from server.console.security import same_origin, same_token
from server.errors import Forbidden

COOKIE = "proctor_console"
"""The cookie holding a login's secret (``server.auth.console_logins``)."""
MAX_FORM_FIELDS = 200
MAX_FILES = 4


def login_limits(settings: Settings) -> LoginLimits:
    return LoginLimits(
        idle=timedelta(seconds=settings.console_idle_s),
        max_age=timedelta(seconds=settings.console_max_age_s),
    )


async def console_user(request: Request, runtime: RuntimeDep, db: DbSession) -> ConsoleUser:
    """The user of the request's console cookie; ``Unauthorized`` (the console answers with
    the login page) without a live login, counted against the address like a refused API
    token; 429 past the key's or organisation's rate limit, as on the API."""
    failures = failure_limit(runtime.settings, client_address(request))
    async with refusals_counted(runtime.limiter, failures):
        user = await resolve_login(
            db,
            secret=request.cookies.get(COOKIE, ""),
            now=datetime.now(UTC),
            limits=login_limits(runtime.settings),
        )
    request.state.principal = user.principal  # audited like an API request
    await runtime.limiter.hit(*request_limits(runtime.settings, user.principal))
    return user


ConsoleUserDep = Annotated[ConsoleUser, Depends(console_user)]


def page(permission: Permission) -> Any:
    """A dependency giving the console user if its role has ``permission``."""

    async def check(user: ConsoleUserDep) -> ConsoleUser:
        if not user.principal.can(permission):
            raise Forbidden(f"role {user.principal.role.value} may not open this page")
        return user

    check.__name__ = f"console_{permission.name.lower()}"
    return Depends(check)


async def checked_form(request: Request, user: ConsoleUserDep, runtime: RuntimeDep) -> FormData:
    """The request's form, if it carries the login's CSRF token and (when the browser
    sends one) an ``Origin`` of this server; ``Forbidden`` otherwise."""
    if not same_origin(request.headers.get("origin"), host=request.headers.get("host")):
        raise Forbidden("cross-site form refused")
    form = await request.form(
        max_files=MAX_FILES,
        max_fields=MAX_FORM_FIELDS,
        max_part_size=runtime.settings.max_body_bytes,
    )
    if not same_token(form.get("csrf_token"), user.csrf_token):
        raise Forbidden("the form's CSRF token is missing or wrong; reload the page")
    return form


CheckedForm = Annotated[FormData, Depends(checked_form)]
