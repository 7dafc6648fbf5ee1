"""Logging in and out of the console, and its static files."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import close_login, open_login, resolve_login
from server.auth.throttle import client_address, failure_limit, refusals_counted
from server.console.dependencies import COOKIE, CheckedForm, ConsoleUserDep, login_limits
from server.console.nav import installed_menu, landing_page
from server.console.security import same_origin, same_token
from server.console.templating import render
from server.errors import Forbidden, NotFound

router = APIRouter(include_in_schema=False)
NAV = None
"""Not in the console's menu."""

LOGIN_COOKIE = "proctor_console_login"
"""The pre-login CSRF token (double submit: cookie and form field must match)."""
STATIC_FILES = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}


def _secure(request: Request, runtime: RuntimeDep) -> bool:
    return request.url.scheme == "https" or runtime.settings.console_secure_cookie


@router.get("/console/login", response_class=HTMLResponse)
async def login_form(request: Request, runtime: RuntimeDep) -> Response:
    """The login form, with a fresh pre-login CSRF token in a cookie and a hidden field."""
    token = secrets.token_urlsafe(32)
    response = render(request, "login.html", user=None, title="Log in", login_token=token)
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=_secure(request, runtime),
        path="/console/login",
    )
    return response


@router.post("/console/login")
async def login(
    request: Request,
    runtime: RuntimeDep,
    db: DbSession,
    api_key: Annotated[str, Form(max_length=512)],
    login_token: Annotated[str, Form(max_length=128)] = "",
) -> Response:
    """Exchange an API key for a console login: 303 to the user's landing page with the
    session cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over HTTPS); the form
    again with 401 for a bad key (counted against the address), 403 for a vendor key or a
    missing pre-login token or a missing or foreign ``Origin``."""
    origin, host = request.headers.get("origin"), request.headers.get("host")
    if not same_origin(origin, host=host, required=True):
        raise Forbidden("log in from this server's own login page")
    if not same_token(login_token, request.cookies.get(LOGIN_COOKIE, "")):
        raise Forbidden("the login form expired; reload the page and log in again")
    now = datetime.now(UTC)
    failures = failure_limit(runtime.settings, client_address(request))
    async with refusals_counted(runtime.limiter, failures):
        secret = await open_login(db, api_key=api_key.strip(), now=now)
    user = await resolve_login(db, secret=secret, now=now, limits=login_limits(runtime.settings))
    request.state.principal = user.principal
    response = RedirectResponse(
        landing_page(user.principal, installed_menu(request)), status_code=303
    )
    response.set_cookie(
        COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        secure=_secure(request, runtime),
        path="/console",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/console/login")
    return response


@router.post("/console/logout")
async def logout(user: ConsoleUserDep, form: CheckedForm, db: DbSession) -> Response:
    """End the login (its row is deleted, so the cookie is dead even if kept)."""
    await close_login(db, login=user.login_id)
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.get("/console/static/{name}")
async def static_file(name: str) -> Response:
    """Our own stylesheet and script (a fixed list: no path from the URL reaches the disk)."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        raise NotFound("no such file")
    body = resources.files("server.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=media_type, headers={"cache-control": "max-age=300"})
