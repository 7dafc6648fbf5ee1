"""Leaderboard: S and R with their intervals, tie groups and rank ranges, P(beats next),
the per-discipline heatmap, Elo/BT baselines, diagnostics, the population it was computed
on and the anchor's history; admins designate the anchor; CSV export.

Every figure comes from ``server.leaderboard.schemas.leaderboard_out`` under the reader's
``Visibility``, exactly as ``GET /v1/leaderboard`` answers that role: a field the API hides
from a role is absent from the page and the CSV too.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from server.api.dependencies import DbSession, RuntimeDep
from server.api.runtime import Runtime
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.config import Settings
from server.console import plots
from server.console.dependencies import CheckedForm, page
from server.console.nav import NavEntry
from server.console.templating import render
from server.csv_export import csv_text
from server.errors import InvalidInput, NotFound
from server.leaderboard import anchors, cache
from server.leaderboard.fields import RowOut, SummaryOut, Visibility, csv_columns
from server.leaderboard.models import RankingAnchor
from server.leaderboard.schemas import LeaderboardOut, csv_rows, leaderboard_out
from server.leaderboard.service import LeaderboardData

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/leaderboard", "Leaderboard", Permission.LEADERBOARD_READ)
"""This page's entry in the console's menu (and its main route and permission)."""

NOTICES = {
    "anchor-set": "Anchor designated: every R is now relative to it.",
    "anchor-top": "The top model anchors R again.",
}
TOP = "top"
"""The anchor form's value for "the top model" (no designated anchor)."""


async def board_for(
    db: AsyncSession,
    runtime: Runtime,
    visibility: Visibility,
    *,
    baselines: bool = False,
    wait: bool = False,
) -> tuple[LeaderboardData, LeaderboardOut]:
    """The leaderboard of the configured judges with its diagnostics (one computation,
    reused by every page while the data is unchanged), and what ``visibility`` shows of
    it; with Elo and Bradley-Terry if asked for (and visible). After a change of the data
    the board computed before it comes back at once (``data.stale``) while a new one is
    computed in the background, unless ``wait`` (then the new one is computed now)."""
    data = await cache.cached_leaderboard(
        db,
        settings=runtime.settings,
        judges=runtime.judging,
        baselines=baselines and visibility.shows("baselines"),
        diagnostics=True,  # cheap; leaderboard_out drops them where not visible
        refresh_on=None if wait else runtime.engine,
    )
    return data, leaderboard_out(data, visibility)


def label(row: RowOut) -> str:
    """A row's name, or its model id where names are hidden."""
    return row.name if row.name is not None else str(row.model_id)


def interval(summary: SummaryOut | None, name: str) -> plots.Interval:
    if summary is None:
        return plots.Interval(name, None)
    return plots.Interval(name, summary.mean, summary.ci_low, summary.ci_high)


def _ceiling(values: Iterable[float | None], floor: float) -> float:
    """The axis end: ``floor`` or the largest value rounded up to tens."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return max(floor, math.ceil(max(finite, default=floor) / 10) * 10)


@dataclass(frozen=True, slots=True)
class Charts:
    absolute: Markup | None
    relative: Markup | None
    heatmap: Markup | None


def charts(board: LeaderboardOut, disciplines: Sequence[str]) -> Charts:
    """S and R with their 95% intervals, and models × disciplines (where visible)."""
    rows = board.models
    absolute = [interval(r.absolute, label(r)) for r in rows if r.absolute is not None]
    relative = [interval(r.relative, label(r)) for r in rows if r.relative is not None]
    with_disciplines = [r for r in rows if r.disciplines is not None]
    heat = None
    if with_disciplines and disciplines:
        values = [
            [
                s.score if (s := (r.disciplines or {}).get(d)) is not None else None
                for d in disciplines
            ]
            for r in with_disciplines
        ]
        heat = plots.heatmap(
            [label(r) for r in with_disciplines],
            disciplines,
            values,
            lo=0,
            hi=10,
            title="Per-discipline scores (10-point scale)",
        )
    return Charts(
        absolute=plots.interval_chart(absolute, lo=0, hi=100, title="S with 95% intervals")
        if absolute
        else None,
        relative=plots.interval_chart(
            relative,
            lo=0,
            hi=_ceiling((p.high for p in relative), 100),
            title="R with 95% intervals",
        )
        if relative
        else None,
        heatmap=heat,
    )


@dataclass(frozen=True, slots=True)
class Population:
    """What the board was computed from."""

    models: int
    sessions: int | None
    answers: int | None
    resamples: int


def population(board: LeaderboardOut, settings: Settings) -> Population:
    rows = board.models
    sessions = [r.sessions for r in rows if r.sessions is not None]
    answers = [
        sum(d.items for d in r.disciplines.values()) for r in rows if r.disciplines is not None
    ]
    return Population(
        models=len(rows),
        sessions=sum(sessions) if len(sessions) == len(rows) and rows else None,
        answers=sum(answers) if len(answers) == len(rows) and rows else None,
        resamples=settings.leaderboard_resamples,
    )


@dataclass(frozen=True, slots=True)
class AnchorEntry:
    set_at: datetime
    model: str
    """The model's name (its id where it is not on the board or names are hidden); empty:
    the top model."""
    set_by: str


def anchor_entries(history: Sequence[RankingAnchor], board: LeaderboardOut) -> list[AnchorEntry]:
    names = {r.model_id: label(r) for r in board.models}
    return [
        AnchorEntry(
            a.set_at,
            "" if a.model_id is None else names.get(str(a.model_id), str(a.model_id)),
            a.set_by,
        )
        for a in history
    ]


async def render_board(
    request: Request,
    db: AsyncSession,
    runtime: Runtime,
    user: ConsoleUser,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    visibility = Visibility.of(user.principal, runtime.settings.leaderboard_public_fields)
    baselines = request.query_params.get("baselines") == "1"
    data, board = await board_for(db, runtime, visibility, baselines=baselines)
    disciplines = list(data.board.disciplines) if visibility.shows("disciplines") else []
    history = await anchors.anchor_history(db)
    return render(
        request,
        "leaderboard.html",
        user=user,
        title="Leaderboard",
        status_code=status_code,
        board=board,
        shows=visibility.shows,
        disciplines=disciplines,
        charts=charts(board, disciplines),
        population=population(board, runtime.settings),
        tied=[group for group in board.groups if len(group) > 1],
        history=anchor_entries(history, board),
        label=label,
        top=TOP,
        offer_baselines=not baselines and visibility.shows("baselines"),
        notice=NOTICES.get(request.query_params.get("notice", "")),
        error=error,
        stale=data.stale,
    )


@router.get(NAV.path, response_class=HTMLResponse)
async def leaderboard_page(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(NAV.permission)],
) -> HTMLResponse:
    """The leaderboard as ``GET /v1/leaderboard`` shows the user's role (with diagnostics,
    and with ``?baselines=1`` Elo and Bradley-Terry, where the role sees them): charts of
    S and R with intervals, the table with tie groups, rank ranges and P(beats next), the
    per-discipline heatmap, the population and judges it was computed with, and the
    anchor's history. Admins also get the form designating the anchor."""
    return await render_board(request, db, runtime, user)


@router.post("/console/leaderboard/anchor", response_model=None)
async def designate_anchor(
    request: Request,
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.LEADERBOARD_ANCHOR)],
    form: CheckedForm,
) -> Response:
    """Designate the anchor of R (a model id, or ``top`` for the top model) through the
    service behind ``PUT /v1/admin/leaderboard/anchor``; admins only. 303 back to the
    leaderboard; the page again with the reason (422) for an unknown model."""
    raw = str(form.get("model") or "").strip()
    try:
        model_id = None if raw == TOP else _model_id(raw)
        await anchors.set_anchor(
            db, model_id=model_id, set_by=user.principal.subject, now=datetime.now(UTC)
        )
    except (InvalidInput, NotFound) as refused:
        return await render_board(request, db, runtime, user, error=refused.detail, status_code=422)
    # every R changes: compute the board now, so the page the admin lands on shows it
    await board_for(
        db,
        runtime,
        Visibility.of(user.principal, runtime.settings.leaderboard_public_fields),
        wait=True,
    )
    notice = "anchor-top" if model_id is None else "anchor-set"
    return RedirectResponse(f"/console/leaderboard?notice={notice}", status_code=303)


def _model_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidInput("choose a model or the top model") from None


@router.get("/console/leaderboard.csv")
async def leaderboard_csv(
    db: DbSession,
    runtime: RuntimeDep,
    user: Annotated[ConsoleUser, page(Permission.LEADERBOARD_READ)],
) -> Response:
    """The leaderboard as CSV (the columns of ``proctor leaderboard --csv``), only the
    columns of the fields the user's role sees; text cells that a spreadsheet would take
    for a formula start with a quote."""
    visibility = Visibility.of(user.principal, runtime.settings.leaderboard_public_fields)
    data, _ = await board_for(db, runtime, visibility, wait=True)  # a download: current data
    text = csv_text(csv_columns(visibility, data.board.disciplines), csv_rows(data))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Response(
        text.encode("utf-8", "replace"),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="proctor-leaderboard-{stamp}.csv"'},
    )
