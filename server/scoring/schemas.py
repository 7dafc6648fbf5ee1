"""Bodies of the scoring routes: counts only, never per-item verdicts."""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from server.sessions.states import SessionState


class ScoringOut(BaseModel):
    session_id: uuid.UUID
    state: SessionState
    judge: str
    """The default judge (or the one asked for)."""
    judges: list[str]
    """Every judge whose verdicts count (several: a panel)."""
    prompt_version: str
    answers: int
    judged: int
    """Answers the scoring is done with: scored, or left to a human reviewer."""
    waiting: int
    """Answers queued or being scored."""
    scored: int | None
    """Answers with a score; null until the session is scored (except for platform roles):
    with ``judged`` it would give the review count, which moves with single verdicts."""
    needs_review: int | None
    """Answers left to a human reviewer; null as ``scored``."""
    points: int | None
    """Sum of the 0-3 scores; null until the session is scored (except for platform roles),
    since its change after one answer would say whether that answer was right."""
