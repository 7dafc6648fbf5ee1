"""Review: the human review queue. List the open tasks you may score, open one (shown
blind: question, reference, the model's answer and reasoning, the judges' verdicts), score
its answer 0-3 with a note, or skip it.

Admins and reviewers work every organisation's queue, evaluators their own organisation's
sessions (``Permission.REVIEW_ANSWERS``; ``server.review.service`` decides what each sees:
a task you may not see is a 404). Auditors and vendors have no access.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import FormData, QueryParams

from judge.rubric import MAX_SCORE, MIN_SCORE
from server.api.dependencies import DbSession, RuntimeDep
from server.api.guard import text_problem
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission, Principal
from server.console.dependencies import CheckedForm, page
from server.console.nav import NavEntry
from server.console.templating import render
from server.errors import InvalidInput
from server.ledger.results import CheckpointSigner
from server.review.schemas import MAX_REVIEW_NOTE
from server.review.service import list_queue, score_task, show_task, skip_task
from server.review.states import ReviewReason, ReviewTaskState

router = APIRouter(include_in_schema=False)
NAV = NavEntry("/console/review", "Review", Permission.REVIEW_ANSWERS)
"""This page's entry in the console's menu (and its main route and permission)."""
Reviewer = Annotated[ConsoleUser, page(NAV.permission)]
TaskId = Annotated[int, Path(ge=1, le=2**63 - 1)]
PER_PAGE = 50
MAX_ID = 2**63 - 1
MAX_DISCIPLINE = 100
SCORES = tuple(range(MIN_SCORE, MAX_SCORE + 1))
SCORE_LABELS = {0: "wrong", 1: "mostly wrong", 2: "mostly right", 3: "fully right"}
"""The judge's 0-3 scale, as the score buttons name it."""

NOTICES = {
    "scored": "Score recorded. Here is the next task.",
    "scored-end": "Score recorded. No other task waits for you.",
    "skipped": "Task skipped: it will not be offered to you again. Here is the next task.",
    "skipped-end": "Task skipped: it will not be offered to you again. No other task waits.",
}
"""``?notice=`` codes and the fixed messages they show (query text is never echoed)."""


def _filters(query: QueryParams) -> tuple[ReviewReason | None, str | None, int | None]:
    """The queue's filters (``reason``, ``discipline``) and keyset (``after``) of a request;
    ``InvalidInput`` for a value the API would refuse too."""
    raw_reason = query.get("reason", "")
    try:
        reason = ReviewReason(raw_reason) if raw_reason else None
    except ValueError:
        raise InvalidInput("reason must be one of: " + ", ".join(ReviewReason)) from None
    discipline = query.get("discipline", "").strip() or None
    if discipline is not None and len(discipline) > MAX_DISCIPLINE:
        raise InvalidInput(f"discipline is longer than {MAX_DISCIPLINE} characters")
    raw_after = query.get("after", "")
    if raw_after and not (raw_after.isascii() and raw_after.isdigit() and int(raw_after) <= MAX_ID):
        raise InvalidInput("after must be a task id")
    return reason, discipline, int(raw_after) if raw_after else None


def _link(reason: ReviewReason | None, discipline: str | None, after: int | None) -> str:
    params = [("reason", reason.value if reason else None), ("discipline", discipline)]
    params.append(("after", str(after) if after is not None else None))
    return "?" + urlencode([(k, v) for k, v in params if v is not None])


@router.get(NAV.path, response_class=HTMLResponse)
async def review_queue(request: Request, db: DbSession, user: Reviewer) -> HTMLResponse:
    """The open tasks you may score (not scored or skipped by you), oldest first, filtered
    by reason and discipline, 50 a page (``?after=`` the last task id of the page before).
    Admins, reviewers, and evaluators (their own organisation's sessions)."""
    reason, discipline, after = _filters(request.query_params)
    queue = await list_queue(
        db,
        principal=user.principal,
        reason=reason,
        discipline=discipline,
        limit=PER_PAGE,
        after=after,
    )
    return render(
        request,
        "review.html",
        user=user,
        title="Review",
        queue=queue,
        reasons=list(ReviewReason),
        reason=reason,
        discipline=discipline or "",
        first_page=_link(reason, discipline, None) if after is not None else None,
        next_page=_link(reason, discipline, queue.next_after) if queue.next_after else None,
        notice=NOTICES.get(request.query_params.get("notice", "")),
    )


async def _task_page(
    request: Request,
    db: AsyncSession,
    user: ConsoleUser,
    task_id: int,
    *,
    notice: str | None = None,
    error: str | None = None,
    score: int | None = None,
    note: str = "",
) -> HTMLResponse:
    task = await show_task(db, principal=user.principal, task_id=task_id)
    return render(
        request,
        "review_task.html",
        user=user,
        status_code=422 if error else 200,
        title=f"Review task {task.task_id}",
        task=task,
        can_score=task.state is ReviewTaskState.OPEN and task.your_score is None,
        scores=SCORES,
        score_labels=SCORE_LABELS,
        chosen=score,
        note=note,
        max_note=MAX_REVIEW_NOTE,
        notice=notice,
        error=error,
    )


@router.get("/console/review/{task_id}", response_class=HTMLResponse)
async def review_task(
    request: Request, task_id: TaskId, db: DbSession, user: Reviewer
) -> HTMLResponse:
    """One task, blind (nothing says whose answer it is): the question, its reference
    answer and explanation, the model's answer and reasoning, the judges' scores and
    reasons, and the form to score it 0-3 with a note or skip it. 404 for a task you may
    not see."""
    notice = NOTICES.get(request.query_params.get("notice", ""))
    return await _task_page(request, db, user, task_id, notice=notice)


def _read_score(form: FormData) -> tuple[int | None, str, str | None]:
    """The form's score, note and what is wrong with them (None: nothing)."""
    raw_note = form.get("note", "")
    note = raw_note if isinstance(raw_note, str) else ""
    raw_score = form.get("score", "")
    score = int(raw_score) if raw_score in {str(s) for s in SCORES} else None
    problem = text_problem(note)
    if problem is not None:
        return score, "", f"the note {problem}"
    if len(note) > MAX_REVIEW_NOTE:
        return score, note, f"the note is longer than {MAX_REVIEW_NOTE} characters"
    if score is None:
        return None, note, f"choose a score from {MIN_SCORE} to {MAX_SCORE}"
    return score, note, None


async def _next_task(db: AsyncSession, principal: Principal, done: str) -> RedirectResponse:
    """Where to go after scoring or skipping: the oldest task left for the caller, else
    the queue, with notice ``done`` (or ``done-end``)."""
    left = await list_queue(
        db, principal=principal, reason=None, discipline=None, limit=1, after=None
    )
    if left.tasks:
        return RedirectResponse(
            f"/console/review/{left.tasks[0].task_id}?notice={done}", status_code=303
        )
    return RedirectResponse(f"/console/review?notice={done}-end", status_code=303)


@router.post("/console/review/{task_id}/score", response_model=None)
async def score(
    request: Request,
    task_id: TaskId,
    db: DbSession,
    user: Reviewer,
    form: CheckedForm,
    runtime: RuntimeDep,
) -> HTMLResponse | RedirectResponse:
    """Record your 0-3 score of the task's answer with a note, then go to the next task
    (or the queue). An invalid score or note gives the task again (422) with the note
    kept; 409 if you scored it already or it has all its scores; 404 for a task you may
    not see. Admins, reviewers, evaluators (own organisation)."""
    given, note, problem = _read_score(form)
    if problem is not None or given is None:
        return await _task_page(request, db, user, task_id, error=problem, score=given, note=note)
    await score_task(
        db,
        principal=user.principal,
        task_id=task_id,
        score=given,
        note=note,
        now=datetime.now(UTC),
        signer=CheckpointSigner.from_settings(runtime.settings),
    )
    return await _next_task(db, user.principal, "scored")


@router.post("/console/review/{task_id}/skip", response_model=None)
async def skip(
    task_id: TaskId, db: DbSession, user: Reviewer, form: CheckedForm
) -> RedirectResponse:
    """Pass on the task (it is not offered to you again; others still see it), then go to
    the next task or the queue. 404 for a task you may not see."""
    await skip_task(db, principal=user.principal, task_id=task_id)
    return await _next_task(db, user.principal, "skipped")
