"""Overview: the bank, open sessions, scoring queue, judges, review queue, and alerts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from bank.models import ItemStatus
from bank.stats import bank_stats
from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.calibration.gate import GateReport, GateStatus, gate_report
from server.console.dependencies import page
from server.console.nav import NavEntry
from server.console.templating import render
from server.health.service import latest_bank_figures
from server.review.service import list_queue
from server.scoring.service import queue_status
from server.sessions.service import count_by_state
from server.sessions.states import OPEN_STATE_VALUES, SessionState

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console", "Overview", Permission.SESSIONS_READ)
"""This page's entry in the console's menu (and its main route and permission)."""
REVIEW_SHOWN = 100
"""The review figure counts up to this many open tasks ("100+" beyond)."""


@dataclass(frozen=True, slots=True)
class Alert:
    level: str
    """``bad`` or ``warn`` (the badge colour)."""
    text: str
    link: str


STALLED_AFTER_S = 600.0
"""An answer waiting this long for its judge means no worker is taking jobs."""


def alerts(
    *,
    gates: GateReport | None,
    failing_jobs: int,
    last_error: str | None,
    oldest_wait_s: float | None,
    flagged: int,
) -> list[Alert]:
    """What needs a person: drifting or gated-out judges, failing scoring jobs, a scoring
    queue nobody works (no worker running), flagged items."""
    found = []
    for gate in gates.judges if gates else ():
        if gate.status is GateStatus.DRIFTING:
            found.append(Alert("bad", f"judge {gate.judge} is drifting", "/console/judges"))
        elif not gate.eligible:
            found.append(
                Alert("warn", f"judge {gate.judge} may not score: {gate.reason}", "/console/judges")
            )
    if failing_jobs:
        why = f" (last error: {last_error})" if last_error else ""
        found.append(Alert("bad", f"{failing_jobs} scoring jobs keep failing{why}", "/console"))
    if oldest_wait_s is not None and oldest_wait_s > STALLED_AFTER_S:
        found.append(
            Alert(
                "bad",
                f"scoring is stalled: an answer has waited {oldest_wait_s / 60:.0f} min for its "
                "judge (is a judge worker running?)",
                "/console",
            )
        )
    if flagged:
        found.append(Alert("warn", f"{flagged} flagged items await review", "/console/bank"))
    return found


@router.get(NAV.path, response_class=HTMLResponse)
async def overview(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    principal = user.principal
    states = await count_by_state(db, principal=principal)
    sees_bank = principal.can(Permission.BANK_HEALTH_READ)
    stats = await bank_stats(db) if sees_bank else None
    health = await latest_bank_figures(db) if sees_bank else None
    queue = await queue_status(db) if principal.can(Permission.ANY_ORG) else None
    gates = (
        await gate_report(db, runtime.settings) if principal.can(Permission.JUDGE_READ) else None
    )
    review = None
    if principal.can(Permission.REVIEW_ANSWERS):
        page_of_tasks = await list_queue(
            db, principal=principal, reason=None, discipline=None, limit=REVIEW_SHOWN, after=None
        )
        review = len(page_of_tasks.tasks)
    flagged = (stats or {}).get("by_status", {}).get(ItemStatus.FLAGGED.value, 0)
    now = datetime.now(UTC)
    oldest_wait_s = (
        (now - queue.oldest_queued_at).total_seconds() if queue and queue.oldest_queued_at else None
    )
    return render(
        request,
        "overview.html",
        user=user,
        title="Overview",
        states=states,
        open_sessions=sum(n for s, n in states.items() if s.value in OPEN_STATE_VALUES),
        stats=stats,
        health=health,
        queue=queue,
        oldest_age_s=oldest_wait_s,
        gates=gates,
        default_judge=runtime.default_judge,
        review=review,
        review_cap=REVIEW_SHOWN,
        alerts=alerts(
            gates=gates,
            failing_jobs=queue.failing if queue else 0,
            last_error=queue.last_error if queue else None,
            oldest_wait_s=oldest_wait_s,
            flagged=flagged,
        ),
        SessionState=SessionState,
    )
