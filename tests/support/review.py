"""Human review helpers for tests: a reviewer's API key, review tasks and verdicts written
straight to the database (for tests that need a task without waiting for scoring)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select

from server.auth.service import create_api_key
from server.review.models import ReviewTask
from server.review.raters import human_rater
from server.scoring.models import Verdict
from server.sessions.models import EvalSession
from tests.support.database import database_session

REVIEW = "/v1/review"
TASKS = f"{REVIEW}/tasks"


async def reviewer_key(db_url: str, org_id: uuid.UUID) -> str:
    """A new API key of role ``reviewer`` in ``org_id`` (the operator's organisation)."""
    async with database_session(db_url) as db:
        _, key = await create_api_key(db, org_id=org_id, role="reviewer")
    return key


async def add_task(
    db_url: str,
    session_id: uuid.UUID | str,
    position: int,
    *,
    reason: str = "needs_review",
    required: int = 1,
    discipline: str = "math",
    judge: str | None = "judge-v1",
) -> int:
    """An open review task of an answered position; its id."""
    async with database_session(db_url) as db:
        task = ReviewTask(
            session_id=uuid.UUID(str(session_id)),
            position=position,
            reason=reason,
            judge=judge,
            discipline=discipline,
            required=required,
            state="open",
        )
        db.add(task)
        await db.flush()
        return task.id


async def add_verdict(
    db_url: str,
    session_id: uuid.UUID | str,
    position: int,
    *,
    judge: str,
    score: int | None,
    prompt_version: str,
    method: str = "judge",
) -> None:
    """A verdict of ``judge`` (a human one if ``prompt_version`` is ``human``)."""
    async with database_session(db_url) as db:
        db.add(
            Verdict(
                session_id=uuid.UUID(str(session_id)),
                position=position,
                judge=judge,
                prompt_version=prompt_version,
                score=score,
                method=method,
                needs_review=score is None,
                created_at=datetime.now(UTC),
            )
        )


async def session_state(db_url: str, session_id: uuid.UUID | str) -> str:
    async with database_session(db_url) as db:
        state = await db.scalar(
            select(EvalSession.state).where(EvalSession.id == uuid.UUID(str(session_id)))
        )
    assert state is not None
    return str(state)


async def human_verdicts(db_url: str, session_id: uuid.UUID | str) -> list[Verdict]:
    async with database_session(db_url) as db:
        rows = await db.execute(
            select(Verdict)
            .where(
                Verdict.session_id == uuid.UUID(str(session_id)),
                Verdict.prompt_version == "human",
            )
            .order_by(Verdict.id)
        )
        return list(rows.scalars())


__all__ = [
    "REVIEW",
    "TASKS",
    "add_task",
    "add_verdict",
    "human_rater",
    "human_verdicts",
    "reviewer_key",
    "session_state",
]
