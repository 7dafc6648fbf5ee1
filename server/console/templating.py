"""The console's Jinja2 environment and ``render``.

Autoescaping is on for every template and cannot be turned off by a page: item text,
answers and model names are hostile input. Pages pass data, never markup; the only markup
that is not escaped comes from ``server.console.plots``, which escapes what it draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.console.nav import installed_menu, visible_pages

ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("server.console", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: datetime | None) -> str:
    """A timestamp as the console shows it (UTC, to the second)."""
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "—"


def number(value: float | int | None, digits: int = 1) -> str:
    """A figure as the console shows it: thousands separated, ``digits`` after the point for
    a float, "—" for none or NaN (the templates' ``number`` filter)."""
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "—"
    return f"{value:,.{digits}f}"


ENVIRONMENT.filters["when"] = _when
ENVIRONMENT.filters["number"] = number
ENVIRONMENT.globals["Permission"] = Permission


def render(
    request: Request,
    template: str,
    *,
    user: ConsoleUser | None,
    status_code: int = 200,
    title: str,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered with ``context`` and what every page's frame needs: the
    user, the menu of pages it may open, the current path and the CSRF token."""
    frame: Mapping[str, Any] = {
        "request_path": request.url.path,
        "user": user,
        "can": (lambda permission: user is not None and user.principal.can(permission)),
        "nav": visible_pages(user.principal, installed_menu(request)) if user is not None else [],
        "csrf_token": user.csrf_token if user is not None else "",
        "title": title,
    }
    html = ENVIRONMENT.get_template(template).render({**frame, **context})
    return HTMLResponse(html, status_code=status_code)
