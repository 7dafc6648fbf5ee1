"""``install_console``: the console's routes, headers and HTML error pages on the app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.console.dependencies import COOKIE
from server.console.nav import ConsolePage, keep_menu, menu
from server.console.pages import (
    audit,
    bank,
    judges,
    leaderboard,
    login,
    model_endpoints,
    models,
    orgs,
    overview,
    review,
    runs,
    sessions,
)
from server.console.security import CONSOLE_PREFIX, ConsoleHeaders
from server.console.templating import render
from server.errors import ProctorError, Unauthorized

Handler = Callable[[Request, Exception], Awaitable[Response]]

PAGES: tuple[ConsolePage, ...] = (
    login,
    overview,
    leaderboard,
    models,
    model_endpoints,
    sessions,
    runs,
    bank,
    judges,
    review,
    orgs,
    audit,
)
"""Every console page module, once, in menu order: a new page is added here and nowhere
else (its module declares its menu entry, ``NAV``)."""
MENU = menu(PAGES)
"""The console's menu: the entries the pages declare."""


def install_console(app: FastAPI) -> None:
    """Mount the console on ``app`` (after the API's problem handlers are installed: the
    console's error pages wrap them, answering ``/console`` paths in HTML)."""
    for page in PAGES:
        app.include_router(page.router)
    keep_menu(app, MENU)
    app.add_middleware(ConsoleHeaders)
    for error_class, handler in list(app.exception_handlers.items()):
        app.add_exception_handler(error_class, _console_or(handler))  # type: ignore[arg-type]


def _is_console(request: Request) -> bool:
    path = request.url.path
    return path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def _console_or(api_handler: Handler) -> Handler:
    async def handle(request: Request, error: Exception) -> Response:
        if not _is_console(request):
            return await api_handler(request, error)
        return await error_page(request, error, api_handler)

    return handle


async def error_page(request: Request, error: Exception, api_handler: Handler) -> Response:
    """The console's answer to ``error``: the login page for a GET without a live login, an
    HTML page with the API's status and wording otherwise (the submitted values are never
    shown back)."""
    if isinstance(error, Unauthorized) and request.method in ("GET", "HEAD"):
        response: Response = RedirectResponse("/console/login", status_code=303)
        response.delete_cookie(COOKIE, path="/console")
        return response
    status, title, detail = 500, "Internal error", "internal error"
    if isinstance(error, ProctorError):
        status, title, detail = error.status, error.title, error.detail
    elif isinstance(error, RequestValidationError):
        fields = [".".join(str(p) for p in e.get("loc", ())[1:]) for e in error.errors()]
        status, title = 422, "Invalid input"
        detail = "check these fields: " + ", ".join(sorted(set(fields)) or ["the form"])
    elif isinstance(error, StarletteHTTPException):
        status = error.status_code
        title = {404: "Not found", 405: "Method not allowed"}.get(status, "HTTP error")
        detail = str(error.detail)
    else:
        api = await api_handler(request, error)  # logs it; 503 for an unavailable database
        status = api.status_code
        if status == 503:
            title, detail = "Service unavailable", "the database is unavailable; retry shortly"
    response = render(
        request, "error.html", user=None, status_code=status, title=title, detail=detail
    )
    if isinstance(error, Unauthorized):
        response.delete_cookie(COOKIE, path="/console")
    return response
