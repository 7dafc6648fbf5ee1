"""``/v1/leaderboard``: the ranking with intervals and tie groups, and its anchor.

Vendors see the fields listed in ``PROCTOR_LEADERBOARD_PUBLIC_FIELDS``; admins, evaluators
and auditors see all of them (latency, cost, contamination, organisations).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from server.api.dependencies import AnchorDesignator, DbSession, LeaderboardReader, RuntimeDep
from server.api.openapi import answers
from server.errors import NotFound
from server.leaderboard import anchors, cache
from server.leaderboard.fields import LeaderboardView, Visibility
from server.leaderboard.schemas import (
    AnchorIn,
    AnchorOut,
    DisciplinesOut,
    LeaderboardOut,
    disciplines_out,
    leaderboard_out,
)
from server.scoring.assignment import JudgeAssignment

router = APIRouter(tags=["leaderboard"])


@router.get(
    "/v1/leaderboard",
    response_model=LeaderboardOut | DisciplinesOut,
    response_model_exclude_unset=True,
    operation_id="leaderboard.get",
)
async def read_leaderboard(
    db: DbSession,
    runtime: RuntimeDep,
    principal: LeaderboardReader,
    view: Annotated[
        LeaderboardView,
        Query(description="`models`: one row per model; `disciplines`: models per discipline."),
    ] = LeaderboardView.MODELS,
    judge: Annotated[
        str | None,
        Query(max_length=100, description="One judge's view (default: the configured judges)."),
    ] = None,
    baselines: Annotated[
        bool, Query(description="Add Elo and Bradley-Terry ratings from per-item comparisons.")
    ] = False,
    diagnostics: Annotated[
        bool,
        Query(description="Add the anisotropy index, RSA and capability inconsistency."),
    ] = False,
) -> LeaderboardOut | DisciplinesOut:
    """Models best first with absolute and relative scores, 95% intervals, tie groups and
    rank ranges (groups are models the data cannot order); or the per-discipline view.
    Vendors see the public fields only; a view or option outside them is 403."""
    settings = runtime.settings
    visibility = Visibility.of(principal, settings.leaderboard_public_fields)
    visibility.refuse_hidden(view=view, baselines=baselines, diagnostics=diagnostics)
    judges = JudgeAssignment.single(judge) if judge else runtime.judging
    data = await cache.fresh_leaderboard(
        db,
        settings=settings,
        judges=judges,
        engine=runtime.engine,
        baselines=baselines,
        diagnostics=diagnostics,
    )
    if view is LeaderboardView.DISCIPLINES:
        return disciplines_out(data, visibility)
    return leaderboard_out(data, visibility)


@router.get(
    "/v1/leaderboard/anchors", response_model=list[AnchorOut], operation_id="leaderboard.anchors"
)
async def read_anchor_history(db: DbSession, _: LeaderboardReader) -> list[AnchorOut]:
    """Every anchor designation, newest (current) first; empty: the top model anchors."""
    return [
        AnchorOut.model_validate(a, from_attributes=True) for a in await anchors.anchor_history(db)
    ]


@router.put(
    "/v1/admin/leaderboard/anchor", response_model=AnchorOut, operation_id="leaderboard.set_anchor"
)
@answers(NotFound)
async def designate_anchor(
    body: AnchorIn,
    db: DbSession,
    principal: AnchorDesignator,
) -> AnchorOut:
    """Make ``model_id`` the anchor of relative scores (null: the top model). Every R is
    recomputed against it from then on; earlier designations stay in the history."""
    anchor = await anchors.set_anchor(
        db, model_id=body.model_id, set_by=principal.subject, now=datetime.now(UTC)
    )
    return AnchorOut.model_validate(anchor, from_attributes=True)
