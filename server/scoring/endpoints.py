"""``/v1/sessions/{id}/scoring``: how far the scoring of a session has come.

Only counts leave the server, never per-item verdicts: which answers were judged wrong
would, over many sessions, leak the answer key of the private bank. Figures that move with
single verdicts (points, review counts) are shown only where
``server.scoring.visibility.shows_verdict_figures`` allows.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judge.prompts import PROMPT_VERSION
from server.api.dependencies import (
    DbSession,
    JudgeReader,
    RuntimeDep,
    SessionId,
    SessionsReader,
)
from server.scoring import service
from server.scoring.assignment import JudgeAssignment
from server.scoring.panel_agreement import panel_agreement
from server.scoring.schemas import PanelAgreementOut, ScoringOut
from server.scoring.visibility import shows_verdict_figures, visible_state
from server.sessions.service import get_session

router = APIRouter(tags=["scoring"])


@router.get(
    "/v1/sessions/{session_id}/scoring", response_model=ScoringOut, operation_id="scoring.get"
)
async def read_scoring(
    session_id: SessionId,
    db: DbSession,
    runtime: RuntimeDep,
    principal: SessionsReader,
    judge: Annotated[
        str | None,
        Query(max_length=100, description="One judge's view (default: the configured judges)."),
    ] = None,
) -> ScoringOut:
    """Scoring progress of one session for its judges and the current prompt version."""
    record = await get_session(db, principal=principal, session_id=session_id)
    judges = JudgeAssignment.single(judge) if judge else runtime.judging
    now = await service.progress(
        db, session_id=record.id, judges=judges, prompt_version=PROMPT_VERSION
    )
    shown = shows_verdict_figures(principal, record.state)
    return ScoringOut(
        session_id=record.id,
        state=visible_state(principal, record.state),
        judge=judges.default,
        judges=list(judges.every_judge),
        prompt_version=PROMPT_VERSION,
        answers=now.answers,
        judged=now.scored + now.needs_review,
        waiting=now.queued + now.leased,
        scored=now.scored if shown else None,
        needs_review=now.needs_review if shown else None,
        points=now.points if shown else None,
    )


PANEL_AGREEMENT_ANSWERS = 100_000
"""The newest answers the panel agreement reads at most."""


@router.get(
    "/v1/admin/judges/panel-agreement",
    response_model=PanelAgreementOut,
    operation_id="scoring.panel_agreement",
)
async def read_panel_agreement(
    db: DbSession, runtime: RuntimeDep, _: JudgeReader
) -> PanelAgreementOut:
    """Item-level agreement of the judges on the answers several of them scored: Pearson r
    and exact agreement per pair of judges, and how many answers they split on."""
    min_gap = runtime.settings.review_disagreement_points
    found = await panel_agreement(
        db, prompt_version=PROMPT_VERSION, min_gap=min_gap, limit=PANEL_AGREEMENT_ANSWERS
    )
    return PanelAgreementOut.of(found, prompt_version=PROMPT_VERSION, min_gap=min_gap)
