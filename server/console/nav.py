"""The console's menu: each page module declares its own entry, and the menu is the entries
of the pages the console mounts; who may open each, and where a user lands after logging in.

A module of ``server.console.pages`` is a :class:`ConsolePage`: its ``router`` and ``NAV``,
its menu entry (None: not in the menu, as the login page). ``server.console.app.PAGES``
lists the page modules once, in menu order; ``install_console`` mounts their routers and
keeps the menu on the app (:func:`keep_menu`), where :func:`installed_menu` reads it back
for the frame of every page and for the landing page after login. The menu cannot be
imported here instead: the pages import the templating, which needs the menu.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from fastapi import APIRouter, FastAPI, Request

from server.auth.permissions import Permission, Principal

__all__ = [
    "ConsolePage",
    "Menu",
    "NavEntry",
    "installed_menu",
    "keep_menu",
    "landing_page",
    "menu",
    "visible_pages",
]


@dataclass(frozen=True, slots=True)
class NavEntry:
    """A page in the menu: where it is, what the menu calls it, who may open it."""

    path: str
    label: str
    permission: Permission


class ConsolePage(Protocol):
    """A console page module: the routes it serves and its entry in the menu."""

    @property
    def router(self) -> APIRouter: ...

    @property
    def NAV(self) -> NavEntry | None: ...


Menu = tuple[NavEntry, ...]
"""The menu's entries, in menu order."""


def menu(pages: Iterable[ConsolePage]) -> Menu:
    """The entries ``pages`` declare, in their order (pages without one left out)."""
    return tuple(page.NAV for page in pages if page.NAV is not None)


def keep_menu(app: FastAPI, entries: Menu) -> None:
    """Keep ``entries`` as the menu of the console mounted on ``app``."""
    app.state.console_menu = entries


def installed_menu(request: Request) -> Menu:
    """The menu of the console serving ``request`` (empty: no console is mounted)."""
    entries: Menu = getattr(request.app.state, "console_menu", ())
    return entries


def visible_pages(principal: Principal, entries: Menu) -> list[NavEntry]:
    """The pages of ``entries`` that ``principal`` may open, in menu order."""
    return [page for page in entries if principal.can(page.permission)]


def landing_page(principal: Principal, entries: Menu) -> str:
    """Where ``principal`` goes after logging in: the first page it may open."""
    pages = visible_pages(principal, entries)
    return pages[0].path if pages else "/console/login"
