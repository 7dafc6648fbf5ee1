"""Judges: the default judge, every configured judge's calibration gate (kappa and weighted
kappa with their intervals, overall and per discipline), open drifts, the calibration
sets, reviewer and judge-vs-human agreement, and the panel's inter-judge agreement.

Admins and auditors (``Permission.JUDGE_READ``); read-only: calibration runs and sets come
from ``proctor judge`` commands, drifts are cleared by a passing full run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from judge.prompts import PROMPT_VERSION
from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.calibration.gate import GateReport, GateStatus, gate_report, open_drifts
from server.calibration.runner import grouped_figures
from server.calibration.service import answer_labels, list_sets, runs_by_id
from server.console.dependencies import page
from server.console.nav import NavEntry
from server.console.pagination import Pager
from server.console.plots import Interval, interval_chart
from server.console.templating import render
from server.leaderboard.cache import cached_on_data
from server.review.service import agreement
from server.scoring.panel_agreement import panel_agreement
from server.scoring.schemas import PanelAgreementOut

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/judges", "Judges", Permission.JUDGE_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

AGREEMENT_RESAMPLES = 2000
"""Bootstrap replicates of the reviewer agreement (as ``GET /v1/review/agreement``)."""
PANEL_ANSWERS = 10_000
"""The newest answers several judges scored that the panel agreement reads (the API reads
up to 100,000; the page keeps to a cheaper window)."""
SETS_PER_PAGE = 20

BADGES: dict[GateStatus, str] = {
    GateStatus.OPEN: "warn",
    GateStatus.PASSED: "ok",
    GateStatus.UNCALIBRATED: "warn",
    GateStatus.REFUSED: "bad",
    GateStatus.DRIFTING: "bad",
    GateStatus.NO_SET: "bad",
}
"""The badge colour of each gate status."""

ByDiscipline = dict[str, dict[str, dict[str, object]]]
"""Judge -> discipline -> ``n``, ``kappa`` and ``weighted`` (each estimate, low, high)."""


@dataclass(frozen=True, slots=True)
class Figures:
    """What the page shows of the gate, beyond ``GateReport`` itself."""

    by_discipline: ByDiscipline
    chart: Markup | None


async def discipline_kappas(db: AsyncSession, report: GateReport) -> ByDiscipline:
    """Kappa and weighted kappa with 95% intervals per discipline of each judge's run the
    gate reads, computed again from the run's stored scores (as ``proctor judge
    calibrate`` shows them); judges without a run, or whose run stored no scores, are left
    out."""
    if report.set_id is None:
        return {}
    runs = await runs_by_id(db, run_ids=[gate.run.id for gate in report.judges if gate.run])
    if not runs:
        return {}
    labels = await answer_labels(db, set_id=report.set_id)
    found: ByDiscipline = {}
    for gate in report.judges:
        row = runs.get(gate.run.id) if gate.run else None
        if row is not None and row.scores is not None and len(row.scores) == len(labels):
            found[gate.judge] = grouped_figures(labels, row.scores, "discipline")
    return found


def weighted_chart(report: GateReport) -> Markup | None:
    """Each judge's weighted kappa with its 95% interval on a 0-1 axis (-1 when a bound
    is negative); None when no judge has a run."""
    runs = [(gate.judge, gate.run.figures) for gate in report.judges if gate.run is not None]
    rows = [Interval(judge, f.weighted_kappa, f.weighted_low, f.weighted_high) for judge, f in runs]
    if not rows:
        return None
    lowest = min((v for r in rows for v in (r.value, r.low) if v is not None), default=0.0)
    return interval_chart(
        rows,
        lo=-1.0 if lowest < 0 else 0.0,
        hi=1.0,
        title="Weighted kappa of each judge with its 95% interval",
    )


@router.get(NAV.path, response_class=HTMLResponse)
async def judges_page(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The default judge; per configured judge its gate status and why, its model, the
    run the gate reads (n, kappa and weighted kappa with 95% intervals, exact and
    within-one agreement) and per-discipline kappas; open drifts; the calibration sets
    (paged); reviewer and judge-vs-human agreement; the panel's agreement. Admins and
    auditors."""
    report = await gate_report(db, runtime.settings)
    drifts = await open_drifts(db, [gate.judge for gate in report.judges])
    pager = Pager.of(request.query_params, per_page=SETS_PER_PAGE)
    sets = await list_sets(db)
    min_gap = runtime.settings.review_disagreement_points
    # both read every verdict and bootstrap: reused while no verdict or review changes
    panel = await cached_on_data(
        db,
        ("panel-agreement", PROMPT_VERSION, min_gap, PANEL_ANSWERS),
        lambda own: panel_agreement(
            own, prompt_version=PROMPT_VERSION, min_gap=min_gap, limit=PANEL_ANSWERS
        ),
    )
    human = await cached_on_data(
        db,
        ("review-agreement", AGREEMENT_RESAMPLES),
        lambda own: agreement(own, n_resamples=AGREEMENT_RESAMPLES),
    )
    shown_sets = sets[pager.offset : pager.offset + pager.per_page]
    return render(
        request,
        "judges.html",
        user=user,
        title="Judges",
        report=report,
        default_judge=runtime.default_judge,
        badges=BADGES,
        figures=Figures(await discipline_kappas(db, report), weighted_chart(report)),
        drifts=drifts,
        sets=shown_sets,
        sets_total=len(sets),
        pager=pager,
        agreement=human,
        panel=PanelAgreementOut.of(panel, prompt_version=PROMPT_VERSION, min_gap=min_gap),
        panel_window=PANEL_ANSWERS,
    )
