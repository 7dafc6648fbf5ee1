"""The human review queue: open tasks when sessions are scored, list and show them, record
reviewers' scores and skips, and move a session to ``reviewed`` when its queue is empty.

A human score is a ``Verdict`` of rater ``human:<API key id>`` (``server.review.models``),
so judges' and people's scores of an answer sit side by side. Who sees which task:
admins and reviewers every organisation's, evaluators their own organisation's sessions';
nothing here is reachable by vendors (``Permission.REVIEW_ANSWERS``). A task that does not
exist and one the caller may not see are the same 404.

A session moves ``scored`` -> ``reviewed`` when its last open task is done. A session whose
scoring opened no task stays ``scored``: nothing was reviewed, and ``reviewed`` says that
people looked at it. Services flush; the caller's unit of work commits.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, exists, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bank.models import Item
from clients.sdk.types import Role
from judge.prompts import PROMPT_VERSION
from server.auth.permissions import Permission, Principal
from server.errors import Conflict, NotFound
from server.ledger import results
from server.registry.models import RegisteredModel
from server.review.agreement import HumanRating, JudgeRating, agreement_report
from server.review.models import AuditStratum, ReviewSkip, ReviewTask
from server.review.raters import HUMAN_METHOD, HUMAN_PREFIX, HUMAN_PROMPT_VERSION, human_rater
from server.review.sampling import (
    AnswerKey,
    AnswerVerdicts,
    ReviewPolicy,
    drawn_for_dual,
    group_verdicts,
    systematic_draws,
)
from server.review.schemas import (
    AgreementOut,
    JudgeVerdictOut,
    ReviewQueueOut,
    ReviewScoreOut,
    ReviewSkipOut,
    ReviewTaskOut,
    ReviewTaskSummary,
)
from server.review.states import ReviewReason, ReviewTaskState
from server.scoring.effective import verdict_rows
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import modes_where
from server.sessions.states import SessionState, require_session_transition

_audit_rng = random.SystemRandom()


def _insert(db: AsyncSession, table: Any) -> Any:
    """An INSERT that supports ``on_conflict_do_nothing`` on the session's dialect."""
    dialect = db.bind.dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def _is_human() -> Any:
    return and_(
        Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
        Verdict.prompt_version == HUMAN_PROMPT_VERSION,
    )


def _is_judge() -> Any:
    return and_(
        ~Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
        Verdict.prompt_version == PROMPT_VERSION,
    )


def _same_answer(model: Any) -> Any:
    return and_(Verdict.session_id == model.session_id, Verdict.position == model.position)


# --------------------------------------------------------------------------- opening tasks


@dataclass(frozen=True, slots=True)
class _NewTask:
    key: AnswerKey
    reason: ReviewReason
    judge: str | None
    discipline: str


async def open_review_tasks(
    db: AsyncSession,
    *,
    session_ids: Sequence[uuid.UUID],
    policy: ReviewPolicy,
    now: datetime,
    rng: random.Random | None = None,
) -> int:
    """Open the review tasks of sessions that just became ``scored``; returns how many.

    One task per answer, with the first reason found (``needs_review`` > ``disagreement``
    > ``audit``; an answer that has a task keeps it): every answer a judge could not score
    under the current prompt version, every answer two judges' scores differ on by
    ``policy.disagreement_points`` or more, and the audit sample, drawn systematically at
    ``policy.audit_rate`` within each (discipline, judge) stratum of the answers a judge
    or the similarity filter decided (``server.review.sampling``). A task waits for two
    reviewers with probability ``policy.dual_rate``. Replay sessions (contamination
    checks) open none. ``rng`` draws new strata's random starts (default: the system's).
    """
    if not session_ids:
        return 0
    answers = await _session_verdicts(db, session_ids)
    tasks: dict[AnswerKey, _NewTask] = {}
    audit: defaultdict[tuple[str, str], list[AnswerKey]] = defaultdict(list)
    for key, verdicts in answers.items():
        found = verdicts.reason(policy.disagreement_points)
        if found is not None:
            tasks[key] = _NewTask(key, found[0], found[1], verdicts.discipline)
            continue
        for stratum in verdicts.audit_strata():
            audit[stratum].append(key)
    for stratum in sorted(audit):
        drawn = await _draw_audit(
            db, stratum=stratum, answers=audit[stratum], rate=policy.audit_rate, rng=rng
        )
        for key in drawn:
            tasks.setdefault(key, _NewTask(key, ReviewReason.AUDIT, stratum[1], stratum[0]))
    if tasks:
        rows = [_task_row(task, policy.dual_rate, now) for task in tasks.values()]
        await db.execute(_insert(db, ReviewTask).values(rows).on_conflict_do_nothing())
        await db.flush()
    return len(tasks)


def _task_row(task: _NewTask, dual_rate: float, now: datetime) -> dict[str, Any]:
    session_id, position = task.key
    return {
        "session_id": session_id,
        "position": position,
        "reason": task.reason.value,
        "judge": task.judge,
        "discipline": task.discipline,
        "required": 2 if drawn_for_dual(session_id, position, dual_rate) else 1,
        "state": ReviewTaskState.OPEN.value,
        "created_at": now,
    }


async def _session_verdicts(
    db: AsyncSession, session_ids: Sequence[uuid.UUID]
) -> dict[AnswerKey, AnswerVerdicts]:
    """The judges' verdicts (current prompt version) of the sessions' answers, by answer,
    in (session, position, judge) order; replay sessions left out."""
    rows = await db.execute(
        verdict_rows(Verdict.judge, Verdict.score, Verdict.method, Verdict.needs_review)
        .where(
            Verdict.session_id.in_(session_ids),
            EvalSession.mode.in_(modes_where(lambda traits: traits.scored)),
            _is_judge(),
        )
        .order_by(Verdict.session_id, Verdict.position, Verdict.judge)
    )
    return group_verdicts(rows.tuples())


async def _draw_audit(
    db: AsyncSession,
    *,
    stratum: tuple[str, str],
    answers: list[AnswerKey],
    rate: float,
    rng: random.Random | None,
) -> list[AnswerKey]:
    """The answers of one stratum the systematic sample draws; the stratum's counters
    move on under its row lock (so concurrent workers continue one sequence)."""
    discipline, judge = stratum
    start = (rng or _audit_rng).random()
    await db.execute(
        _insert(db, AuditStratum)
        .values(discipline=discipline, judge=judge, start=start, seen=0, drawn=0)
        .on_conflict_do_nothing()
    )
    row = (
        await db.execute(
            select(AuditStratum)
            .where(AuditStratum.discipline == discipline, AuditStratum.judge == judge)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    draws = systematic_draws(rate=rate, start=row.start, seen=row.seen, n=len(answers))
    drawn = [key for key, draw in zip(answers, draws, strict=True) if draw]
    row.seen += len(answers)
    row.drawn += len(drawn)
    return drawn


# --------------------------------------------------------------------------- visibility


def sees_every_organisation(principal: Principal) -> bool:
    """Admins and outside reviewers work every organisation's queue; evaluators only
    their own organisation's sessions."""
    return principal.can(Permission.ANY_ORG) or principal.role is Role.REVIEWER


def _visible(statement: Select[Any], principal: Principal) -> Select[Any]:
    """``statement`` (over ``ReviewTask``) limited to the tasks ``principal`` may see."""
    if sees_every_organisation(principal):
        return statement
    owned = select(EvalSession.id).where(
        EvalSession.id == ReviewTask.session_id, EvalSession.org_id == principal.org_id
    )
    return statement.where(owned.exists())


def _human_count() -> Any:
    return (
        select(func.count())
        .where(_same_answer(ReviewTask), _is_human())
        .correlate(ReviewTask)
        .scalar_subquery()
    )


async def _task_for(
    db: AsyncSession, principal: Principal, task_id: int, *, lock: bool = False
) -> ReviewTask:
    statement = _visible(select(ReviewTask).where(ReviewTask.id == task_id), principal)
    if lock:
        statement = statement.with_for_update(of=ReviewTask)
    task: ReviewTask | None = (
        await db.execute(statement.execution_options(populate_existing=True))
    ).scalar_one_or_none()
    if task is None:
        raise NotFound(f"no such review task: {task_id}")
    return task


# --------------------------------------------------------------------------- reading


async def list_queue(
    db: AsyncSession,
    *,
    principal: Principal,
    reason: ReviewReason | None,
    discipline: str | None,
    limit: int,
    after: int | None,
) -> ReviewQueueOut:
    """Open tasks ``principal`` may score (not already scored or skipped by them), oldest
    first from task id ``after``, at most ``limit``."""
    rater = human_rater(principal.subject)
    mine = exists().where(_same_answer(ReviewTask), Verdict.judge == rater)
    skipped = exists().where(
        ReviewSkip.task_id == ReviewTask.id, ReviewSkip.reviewer == principal.subject
    )
    statement = (
        select(ReviewTask, Item.qtype, _human_count())
        .join(
            Answer,
            and_(
                Answer.session_id == ReviewTask.session_id, Answer.position == ReviewTask.position
            ),
        )
        .join(Item, Item.id == Answer.item_id)
        .where(ReviewTask.state == ReviewTaskState.OPEN.value, ~mine, ~skipped)
        .order_by(ReviewTask.id)
        .limit(limit + 1)
    )
    if reason is not None:
        statement = statement.where(ReviewTask.reason == reason.value)
    if discipline is not None:
        statement = statement.where(ReviewTask.discipline == discipline)
    if after is not None:
        statement = statement.where(ReviewTask.id > after)
    rows = (await db.execute(_visible(statement, principal))).all()
    page = [
        ReviewTaskSummary(
            task_id=task.id,
            reason=ReviewReason(task.reason),
            discipline=task.discipline,
            qtype=qtype,
            required=task.required,
            human_scores=count,
            created_at=task.created_at,
        )
        for task, qtype, count in rows[:limit]
    ]
    return ReviewQueueOut(tasks=page, next_after=page[-1].task_id if len(rows) > limit else None)


async def show_task(db: AsyncSession, *, principal: Principal, task_id: int) -> ReviewTaskOut:
    """One task with its question, reference, the model's answer and reasoning and the
    judges' verdicts; blind (no session, model or organisation)."""
    task = await _task_for(db, principal, task_id)
    answer, item = (
        await db.execute(
            select(Answer, Item)
            .join(Item, Item.id == Answer.item_id)
            .where(Answer.session_id == task.session_id, Answer.position == task.position)
        )
    ).one()
    judges = (
        await db.execute(
            select(Verdict).where(_same_answer(task), _is_judge()).order_by(Verdict.judge)
        )
    ).scalars()
    humans = await _human_scores(db, task)
    return ReviewTaskOut(
        task_id=task.id,
        reason=ReviewReason(task.reason),
        state=ReviewTaskState(task.state),
        discipline=item.discipline,
        subdiscipline=item.subdiscipline,
        qtype=item.qtype,
        language=item.language,
        question=item.question,
        options=item.options,
        reference=item.answer,
        explanation=item.explanation,
        answer=answer.answer,
        reasoning=answer.reasoning,
        judges=[
            JudgeVerdictOut(judge=v.judge, score=v.score, method=v.method, reason=v.detail)
            for v in judges
        ],
        required=task.required,
        human_scores=len(humans),
        your_score=humans.get(human_rater(principal.subject)),
    )


async def _human_scores(db: AsyncSession, task: ReviewTask) -> dict[str, int | None]:
    rows = await db.execute(
        select(Verdict.judge, Verdict.score).where(_same_answer(task), _is_human())
    )
    return dict(rows.tuples().all())


# --------------------------------------------------------------------------- writing


async def score_task(
    db: AsyncSession,
    *,
    principal: Principal,
    task_id: int,
    score: int,
    note: str,
    now: datetime,
    signer: results.CheckpointSigner | None = None,
) -> ReviewScoreOut:
    """Record ``principal``'s score of the task's answer as a human verdict, chained in
    the results ledger (``server.ledger.results``; ``signer`` signs its due checkpoint).

    404 for a task the caller may not see; 409 if they scored this answer already (the
    first score stands) or the task is done. The task is done once it has ``required``
    human scores; the session moves ``scored`` -> ``reviewed`` when that was its last open
    task (under the session's row lock, so two reviewers closing a session's last two
    tasks at once still move it).
    """
    task = await _task_for(db, principal, task_id, lock=True)
    rater = human_rater(principal.subject)
    humans = await _human_scores(db, task)
    if rater in humans:
        raise Conflict(f"you have scored the answer of task {task_id} already")
    if task.state != ReviewTaskState.OPEN.value:
        raise Conflict(f"task {task_id} has its reviews")
    inserted = await db.execute(
        _insert(db, Verdict)
        .values(
            session_id=task.session_id,
            position=task.position,
            judge=rater,
            prompt_version=HUMAN_PROMPT_VERSION,
            score=score,
            method=HUMAN_METHOD,
            needs_review=False,
            detail=note or None,
            created_at=now,
        )
        .on_conflict_do_nothing()
        .returning(*results.VERDICT_COLUMNS)
    )
    written = inserted.all()
    if len(written) != 1:
        raise Conflict(f"you have scored the answer of task {task_id} already")
    await results.record(db, written, signer=signer)
    given = len(humans) + 1
    if given >= task.required:
        task.state = ReviewTaskState.DONE.value
        task.closed_at = now
        await db.flush()
        await _finish_session_review(db, task.session_id)
    return ReviewScoreOut(
        task_id=task.id,
        score=score,
        state=ReviewTaskState(task.state),
        human_scores=given,
        required=task.required,
    )


async def _finish_session_review(db: AsyncSession, session_id: uuid.UUID) -> bool:
    """Move a ``scored`` session with no open task left to ``reviewed``."""
    session = (
        await db.execute(
            select(EvalSession)
            .where(EvalSession.id == session_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    if session.state != SessionState.SCORED.value:
        return False
    still_open = await db.scalar(
        select(func.count())
        .select_from(ReviewTask)
        .where(
            ReviewTask.session_id == session_id,
            ReviewTask.state == ReviewTaskState.OPEN.value,
        )
    )
    if still_open:
        return False
    require_session_transition(session.state, SessionState.REVIEWED)
    session.state = SessionState.REVIEWED.value
    await db.flush()
    return True


async def skip_task(db: AsyncSession, *, principal: Principal, task_id: int) -> ReviewSkipOut:
    """Record that ``principal`` passes on the task: it is not offered to them again
    (others still see it). Skipping twice is the same as once; 404 as ``score_task``."""
    task = await _task_for(db, principal, task_id)
    await db.execute(
        _insert(db, ReviewSkip)
        .values(task_id=task.id, reviewer=principal.subject)
        .on_conflict_do_nothing()
    )
    return ReviewSkipOut(task_id=task.id)


# --------------------------------------------------------------------------- agreement


async def agreement(
    db: AsyncSession, *, n_resamples: int, confidence_level: float = 0.95
) -> AgreementOut:
    """Reviewer-vs-reviewer and judge-vs-human agreement over every human verdict
    (``server.review.agreement``)."""
    answer_of = and_(Answer.session_id == Verdict.session_id, Answer.position == Verdict.position)
    base = (
        select(
            Verdict.id,
            Verdict.session_id,
            Verdict.position,
            Verdict.judge,
            Verdict.score,
            Item.discipline,
            Item.family_id,
            RegisteredModel.family,
        )
        .join(Answer, answer_of)
        .join(Item, Item.id == Answer.item_id)
        .join(EvalSession, EvalSession.id == Verdict.session_id)
        .join(RegisteredModel, RegisteredModel.id == EvalSession.model_id)
        .where(Verdict.score.is_not(None))
        .order_by(Verdict.id)
    )
    humans = [
        HumanRating(
            (r.session_id, r.position), r.judge, r.score, r.discipline, r.family_id, r.family
        )
        for r in (await db.execute(base.where(_is_human()))).all()
    ]
    person = aliased(Verdict)
    reviewed = exists().where(
        person.session_id == Verdict.session_id,
        person.position == Verdict.position,
        person.judge.startswith(HUMAN_PREFIX, autoescape=True),
        person.prompt_version == HUMAN_PROMPT_VERSION,
        person.score.is_not(None),
    )
    judged = [
        JudgeRating((r.session_id, r.position), r.judge, r.score)
        for r in (await db.execute(base.where(_is_judge(), reviewed))).all()
    ]
    return agreement_report(
        humans, judged, n_resamples=n_resamples, confidence_level=confidence_level
    )
