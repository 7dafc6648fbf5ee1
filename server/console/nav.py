"""The console's pages, who may open each, and where a user lands after logging in."""

from __future__ import annotations

from dataclasses import dataclass

from server.auth.permissions import Permission, Principal


@dataclass(frozen=True, slots=True)
class NavEntry:
    path: str
    label: str
    permission: Permission


PAGES: tuple[NavEntry, ...] = (
    NavEntry("/console", "Overview", Permission.SESSIONS_READ),
    NavEntry("/console/leaderboard", "Leaderboard", Permission.LEADERBOARD_READ),
    NavEntry("/console/models", "Models", Permission.MODELS_READ),
    NavEntry("/console/sessions", "Sessions", Permission.SESSIONS_READ),
    NavEntry("/console/bank", "Bank", Permission.BANK_HEALTH_READ),
    NavEntry("/console/judges", "Judges", Permission.JUDGE_READ),
    NavEntry("/console/review", "Review", Permission.REVIEW_ANSWERS),
    NavEntry("/console/orgs", "Organisations", Permission.ORGS_READ),
    NavEntry("/console/audit", "Audit log", Permission.AUDIT_READ),
)


def visible_pages(principal: Principal) -> list[NavEntry]:
    """The pages ``principal`` may open, in menu order."""
    return [page for page in PAGES if principal.can(page.permission)]


def landing_page(principal: Principal) -> str:
    """Where ``principal`` goes after logging in: the first page it may open."""
    pages = visible_pages(principal)
    return pages[0].path if pages else "/console/login"
