"""``/v1/review``: the human review queue (list, show, score, skip) and the agreement
report.

Working the queue needs ``Permission.REVIEW_ANSWERS`` (admins, reviewers, and evaluators
for their own organisation's sessions); the agreement report needs
``Permission.JUDGE_READ`` (admins and auditors). Vendors have neither: nothing of review
is reachable for them. Every request is written to the audit log by the audit middleware.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query

from server.api.dependencies import AnswerReviewer, DbSession, JudgeReader, RuntimeDep
from server.api.openapi import answers
from server.errors import Conflict
from server.ledger.results import CheckpointSigner
from server.review import service
from server.review.schemas import (
    AgreementOut,
    ReviewQueueOut,
    ReviewScoreIn,
    ReviewScoreOut,
    ReviewSkipOut,
    ReviewTaskOut,
)
from server.review.states import ReviewReason

router = APIRouter(tags=["review"])
TaskId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Review task id.")]
Limit = Annotated[int, Query(ge=1, le=500)]
Discipline = Annotated[str | None, Query(min_length=1, max_length=100)]
After = Annotated[int | None, Query(ge=0, le=2**63 - 1)]
AGREEMENT_RESAMPLES = 2000
"""Bootstrap replicates of the agreement report's intervals."""


@router.get("/v1/review/tasks", response_model=ReviewQueueOut, operation_id="review.list_tasks")
async def list_tasks(
    db: DbSession,
    principal: AnswerReviewer,
    reason: ReviewReason | None = None,
    discipline: Discipline = None,
    limit: Limit = 50,
    after: After = None,
) -> ReviewQueueOut:
    """Open tasks you may score (not scored or skipped by you), oldest first; page on with
    ``after`` = ``next_after``. Evaluators see their own organisation's sessions only."""
    return await service.list_queue(
        db, principal=principal, reason=reason, discipline=discipline, limit=limit, after=after
    )


@router.get(
    "/v1/review/tasks/{task_id}", response_model=ReviewTaskOut, operation_id="review.get_task"
)
async def show_task(task_id: TaskId, db: DbSession, principal: AnswerReviewer) -> ReviewTaskOut:
    """The task's question, reference answer, the model's answer and reasoning, and the
    judges' scores and reasons; blind: nothing says whose answer it is. 404 for a task you
    may not see."""
    return await service.show_task(db, principal=principal, task_id=task_id)


@router.post(
    "/v1/review/tasks/{task_id}/score",
    response_model=ReviewScoreOut,
    status_code=201,
    operation_id="review.score",
)
@answers(Conflict)
async def score_task(
    task_id: TaskId,
    body: ReviewScoreIn,
    db: DbSession,
    principal: AnswerReviewer,
    runtime: RuntimeDep,
) -> ReviewScoreOut:
    """Score the answer 0-3 with a note. 404 for a task you may not see; 409 if you scored
    it already (your first score stands) or the task has all its scores."""
    return await service.score_task(
        db,
        principal=principal,
        task_id=task_id,
        score=body.score,
        note=body.note,
        now=datetime.now(UTC),
        signer=CheckpointSigner.from_settings(runtime.settings),
    )


@router.post(
    "/v1/review/tasks/{task_id}/skip", response_model=ReviewSkipOut, operation_id="review.skip"
)
@answers(Conflict)
async def skip_task(task_id: TaskId, db: DbSession, principal: AnswerReviewer) -> ReviewSkipOut:
    """Pass on a task: it is not offered to you again (others still see it)."""
    return await service.skip_task(db, principal=principal, task_id=task_id)


@router.get("/v1/review/agreement", response_model=AgreementOut, operation_id="review.agreement")
async def agreement(db: DbSession, principal: JudgeReader) -> AgreementOut:
    """Reviewer-vs-reviewer agreement on dual-reviewed answers, and judge-vs-human agreement
    per judge, per (judge, discipline) and per (judge, model family): n, exact agreement,
    Cohen's kappa and the quadratic-weighted kappa with 95% bootstrap intervals clustered
    by item family."""
    return await service.agreement(db, n_resamples=AGREEMENT_RESAMPLES)
