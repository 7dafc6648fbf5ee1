"""``/v1/sessions/{id}/scoring``: how far the scoring of a session has come.

Only counts leave the server, never per-item verdicts: which answers were judged wrong
would, over many sessions, leak the answer key of the private bank.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel

from judge.prompts import PROMPT_VERSION
from server.api.dependencies import DbSession, RuntimeDep, require
from server.auth.permissions import Permission, Principal
from server.scoring import service
from server.sessions.service import get_session

router = APIRouter(tags=["scoring"])


class ScoringOut(BaseModel):
    session_id: uuid.UUID
    state: str
    judge: str
    prompt_version: str
    answers: int
    scored: int
    needs_review: int
    waiting: int
    """Answers queued or being scored."""
    points: int
    """Sum of the 0-3 scores so far."""


@router.get("/v1/sessions/{session_id}/scoring", response_model=ScoringOut)
async def read_scoring(
    session_id: Annotated[uuid.UUID, Path(description="Session id (a UUID).")],
    db: DbSession,
    runtime: RuntimeDep,
    principal: Annotated[Principal, require(Permission.SESSIONS_READ)],
    judge: Annotated[
        str | None, Query(max_length=100, description="Judge (default: the default judge).")
    ] = None,
) -> ScoringOut:
    """Scoring progress of one session for one judge and the current prompt version."""
    record = await get_session(db, principal=principal, session_id=session_id)
    name = judge or runtime.default_judge
    now = await service.progress(
        db, session_id=record.id, judge=name, prompt_version=PROMPT_VERSION
    )
    return ScoringOut(
        session_id=record.id,
        state=record.state,
        judge=name,
        prompt_version=PROMPT_VERSION,
        answers=now.answers,
        scored=now.scored,
        needs_review=now.needs_review,
        waiting=now.queued + now.leased,
        points=now.points,
    )
