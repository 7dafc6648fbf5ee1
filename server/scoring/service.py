"""Database work of the scoring pipeline: enqueue, claim, record, defer, finish, progress.

Every function takes an open ``AsyncSession`` and only flushes; the caller's unit of work
commits. The worker (``server.scoring.worker``) commits each job's verdict on its own, so a
crash loses at most the jobs in flight, and those come back when their lease runs out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import String, and_, delete, exists, func, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Item
from server.ledger import results
from server.review.sampling import ReviewPolicy
from server.review.service import open_review_tasks
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.scoring.models import ScoringJob, Verdict
from server.sessions.models import Answer, EvalSession
from server.sessions.states import SessionState, require_session_transition


def _insert(db: AsyncSession, table: Any) -> Any:
    """An INSERT that supports ``on_conflict_do_nothing`` on the session's dialect."""
    dialect = db.bind.dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


async def enqueue_answer(
    db: AsyncSession, *, session_id: uuid.UUID, position: int, judge: str, prompt_version: str
) -> None:
    """Put one answer in the outbox (a no-op if it is there for this judge and version)."""
    stmt = _insert(db, ScoringJob).values(
        session_id=session_id, position=position, judge=judge, prompt_version=prompt_version
    )
    await db.execute(stmt.on_conflict_do_nothing())


async def enqueue_session(
    db: AsyncSession,
    *,
    session_id: uuid.UUID,
    judge: str,
    prompt_version: str,
    review_again: bool,
    now: datetime,
) -> int:
    """Queue every answer of a session that has no job for this judge and version.

    With ``review_again``, answers left ``needs_review`` lose that verdict and are queued
    again. Returns how many jobs were queued.
    """
    queued = 0
    if review_again:
        keys = and_(
            Verdict.session_id == session_id,
            Verdict.judge == judge,
            Verdict.prompt_version == prompt_version,
            Verdict.needs_review.is_(True),
        )
        withdrawn = (
            await db.execute(delete(Verdict).where(keys).returning(*results.VERDICT_COLUMNS))
        ).all()
        positions = [row.position for row in withdrawn]
        if positions:
            await results.record(db, withdrawn, withdrawn=True)
            result = await db.execute(
                update(ScoringJob)
                .where(
                    ScoringJob.session_id == session_id,
                    ScoringJob.judge == judge,
                    ScoringJob.prompt_version == prompt_version,
                    ScoringJob.position.in_(positions),
                )
                .values(state="queued", not_before=now, attempts=0, lease_owner=None)
            )
            queued += result.rowcount  # type: ignore[attr-defined]
    missing = select(
        Answer.session_id,
        Answer.position,
        literal(judge, String(100)),
        literal(prompt_version, String(40)),
    ).where(Answer.session_id == session_id)
    stmt = _insert(db, ScoringJob).from_select(
        ["session_id", "position", "judge", "prompt_version"], missing
    )
    result = await db.execute(stmt.on_conflict_do_nothing())
    queued += int(result.rowcount)  # type: ignore[attr-defined]
    await db.flush()
    return queued


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: int
    session_id: uuid.UUID
    position: int
    judge: str
    prompt_version: str
    attempts: int


async def claim(
    db: AsyncSession, *, owner: str, limit: int, lease_s: float, now: datetime
) -> list[ClaimedJob]:
    """Lease up to ``limit`` claimable jobs to ``owner``: queued ones that are due, and
    leased ones whose lease ran out (their worker died). Rows other workers are claiming
    right now are skipped (``FOR UPDATE SKIP LOCKED``), never waited for."""
    claimable = (
        select(ScoringJob.id)
        .where(
            or_(
                and_(ScoringJob.state == "queued", ScoringJob.not_before <= now),
                and_(ScoringJob.state == "leased", ScoringJob.lease_expires_at < now),
            )
        )
        .order_by(ScoringJob.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    stmt = (
        update(ScoringJob)
        .where(ScoringJob.id.in_(claimable.scalar_subquery()))
        .values(
            state="leased",
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_s),
            attempts=ScoringJob.attempts + 1,
        )
        .returning(
            ScoringJob.id,
            ScoringJob.session_id,
            ScoringJob.position,
            ScoringJob.judge,
            ScoringJob.prompt_version,
            ScoringJob.attempts,
        )
        .execution_options(synchronize_session=False)
    )
    rows = (await db.execute(stmt)).all()
    return sorted((ClaimedJob(*row) for row in rows), key=lambda job: job.id)


@dataclass(frozen=True, slots=True)
class JobInput:
    """What scoring one answer needs: the stored answer and its item."""

    job_id: int
    answer: str
    reasoning: str | None
    qtype: str
    question: str
    reference: str
    options: list[str] | None
    language: str
    mode: str
    """The session's mode: a replay session's answers are completions of a masked question."""


async def load_inputs(db: AsyncSession, job_ids: list[int]) -> dict[int, JobInput]:
    """The answers and items of the given jobs, keyed by job id."""
    rows = (
        await db.execute(
            select(
                ScoringJob.id,
                Answer.answer,
                Answer.reasoning,
                Item.qtype,
                Item.question,
                Item.answer,
                Item.options,
                Item.language,
                EvalSession.mode,
            )
            .join(EvalSession, EvalSession.id == ScoringJob.session_id)
            .join(
                Answer,
                and_(
                    Answer.session_id == ScoringJob.session_id,
                    Answer.position == ScoringJob.position,
                ),
            )
            .join(Item, Item.id == Answer.item_id)
            .where(ScoringJob.id.in_(job_ids))
        )
    ).all()
    return {row[0]: JobInput(*row) for row in rows}


async def record_verdict(
    db: AsyncSession,
    *,
    job: ClaimedJob,
    values: dict[str, Any],
    signer: results.CheckpointSigner | None = None,
) -> bool:
    """Insert the job's verdict unless one exists (and chain it in the results ledger,
    ``server.ledger.results``, checkpointed by ``signer``), and mark the job done. Returns
    whether this call inserted the verdict (False: another worker got there first)."""
    stmt = _insert(db, Verdict).values(
        session_id=job.session_id,
        position=job.position,
        judge=job.judge,
        prompt_version=job.prompt_version,
        **values,
    )
    written = (
        await db.execute(stmt.on_conflict_do_nothing().returning(*results.VERDICT_COLUMNS))
    ).all()
    await results.record(db, written, signer=signer)
    await db.execute(
        update(ScoringJob)
        .where(ScoringJob.id == job.id)
        .values(state="done", lease_owner=None, lease_expires_at=None, last_error=None)
    )
    return len(written) == 1


async def defer(
    db: AsyncSession, *, job: ClaimedJob, owner: str, until: datetime, error: str
) -> None:
    """Give a job back to the queue, not to be claimed before ``until`` (only if ``owner``
    still holds it; a job another worker took over is theirs)."""
    await db.execute(
        update(ScoringJob)
        .where(ScoringJob.id == job.id, ScoringJob.lease_owner == owner)
        .values(
            state="queued",
            not_before=until,
            lease_owner=None,
            lease_expires_at=None,
            last_error=error[:2000],
        )
    )


async def release(db: AsyncSession, *, jobs: list[ClaimedJob], owner: str) -> None:
    """Give claimed jobs back to the queue, claimable at once, their claim not counted as
    an attempt (only those ``owner`` still holds)."""
    await db.execute(
        update(ScoringJob)
        .where(ScoringJob.id.in_([job.id for job in jobs]), ScoringJob.lease_owner == owner)
        .values(
            state="queued",
            lease_owner=None,
            lease_expires_at=None,
            attempts=ScoringJob.attempts - 1,
        )
        .execution_options(synchronize_session=False)
    )


async def finish_sessions(
    db: AsyncSession,
    *,
    session_ids: set[uuid.UUID],
    now: datetime,
    review: ReviewPolicy,
) -> list[uuid.UUID]:
    """Move answered sessions whose every job is done to ``scored`` and open their human
    review tasks under ``review`` (``server.review.service.open_review_tasks``); returns
    those moved."""
    require_session_transition(SessionState.ANSWERED.value, SessionState.SCORED)
    if not session_ids:
        return []
    open_jobs = exists().where(ScoringJob.session_id == EvalSession.id, ScoringJob.state != "done")
    result = await db.execute(
        update(EvalSession)
        .where(
            EvalSession.id.in_(session_ids),
            EvalSession.state == SessionState.ANSWERED.value,
            ~open_jobs,
        )
        .values(state=SessionState.SCORED.value)
        .returning(EvalSession.id)
        .execution_options(synchronize_session=False)
    )
    moved = list(result.scalars())
    await open_review_tasks(db, session_ids=moved, policy=review, now=now)
    return moved


@dataclass(frozen=True, slots=True)
class ScoringProgress:
    """How far the scoring of one session has come, for its judges and prompt version."""

    answers: int
    queued: int
    leased: int
    done: int
    scored: int
    """Answers with a score (``server.scoring.effective``: reviewers first, then the panel)."""
    needs_review: int
    """Answers with verdicts but no score yet: they wait for a person."""
    points: int
    """Sum of the 0-3 scores of the scored answers."""


async def progress(
    db: AsyncSession, *, session_id: uuid.UUID, judges: JudgeAssignment, prompt_version: str
) -> ScoringProgress:
    """Counts of the session's answers, of its judges' jobs, and of its answers' scores."""
    answers = await db.scalar(
        select(func.count()).select_from(Answer).where(Answer.session_id == session_id)
    )
    rows = await db.execute(
        select(ScoringJob.state, func.count())
        .where(
            ScoringJob.session_id == session_id,
            ScoringJob.prompt_version == prompt_version,
            ScoringJob.judge.in_(judges.every_judge),
        )
        .group_by(ScoringJob.state)
    )
    jobs: dict[str, int] = {state: count for state, count in rows.tuples()}
    counted = await counted_answers(
        db, judges=judges, prompt_version=prompt_version, where=[Verdict.session_id == session_id]
    )
    scores = [answer.score for answer in counted]
    given = [score for score in scores if score is not None]
    return ScoringProgress(
        answers=answers or 0,
        queued=jobs.get("queued", 0),
        leased=jobs.get("leased", 0),
        done=jobs.get("done", 0),
        scored=len(given),
        needs_review=len(scores) - len(given),
        points=sum(given),
    )


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """The scoring outbox as a whole: what waits, how long the oldest has waited, and the
    jobs that keep failing (a failing judge or worker)."""

    queued: int
    leased: int
    oldest_queued_at: datetime | None
    failing: int
    """Jobs not done after ``FAILING_ATTEMPTS`` attempts or more."""
    last_error: str | None
    """The error of the most recently failed job that is not done (first line)."""


FAILING_ATTEMPTS = 3


async def queue_status(db: AsyncSession) -> QueueStatus:
    """Counts over the scoring outbox (``QueueStatus``) in two statements."""
    pending = ScoringJob.state != "done"
    queued, leased, oldest, failing = (
        await db.execute(
            select(
                func.count().filter(ScoringJob.state == "queued"),
                func.count().filter(ScoringJob.state == "leased"),
                func.min(ScoringJob.created_at).filter(ScoringJob.state == "queued"),
                func.count().filter(pending, ScoringJob.attempts >= FAILING_ATTEMPTS),
            ).where(pending)
        )
    ).one()
    error = await db.scalar(
        select(ScoringJob.last_error)
        .where(pending, ScoringJob.last_error.is_not(None))
        .order_by(ScoringJob.id.desc())
        .limit(1)
    )
    return QueueStatus(
        queued=queued,
        leased=leased,
        oldest_queued_at=oldest,
        failing=failing,
        last_error=error.splitlines()[0][:300] if error else None,
    )
