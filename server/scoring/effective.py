"""The score each answer counts with, from the verdicts of its judges and reviewers: the
one rule every reader of scores uses.

Several raters may have scored one answer: the judges of its panel (one verdict each per
prompt version) and human reviewers (rater ``human:<reviewer>``). ``judge.panel``
decides (people first, then the panel's rule over the board's judges under its prompt
version); this module selects the verdicts that take part (``counting_verdicts``), reads
them with the answer's discipline and whatever else the reader needs
(``counted_answers``), and groups them by answer. Scoring progress, the leaderboard, a
model's per-session scores and adaptive sessions (their stopping rule, item histories and
neighbours) all read scores here, so a live adaptive session stops on the score the
leaderboard later gives it. ``server.leaderboard.aggregates`` decides the same rule in
SQL for a single judge, tested equal to this reader.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Select, Subquery, and_, case, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bank.models import Item
from judge.panel import answer_verdict
from server.review.raters import HUMAN_PREFIX, HUMAN_PROMPT_VERSION
from server.scoring.assignment import JudgeAssignment
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession

__all__ = [
    "AnswerRatings",
    "CountedAnswer",
    "OneJudgeScore",
    "counted_answers",
    "counting_verdicts",
    "group_ratings",
    "verdict_rows",
]


def counting_verdicts(assignment: JudgeAssignment, prompt_version: str) -> ColumnElement[bool]:
    """Verdicts that can count: of a judge of the assignment under ``prompt_version``, or
    of a person."""
    return or_(
        and_(
            Verdict.judge.in_(assignment.every_judge),
            Verdict.prompt_version == prompt_version,
        ),
        and_(
            Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
            Verdict.prompt_version == HUMAN_PROMPT_VERSION,
        ),
    )


@dataclass(slots=True)
class AnswerRatings:
    """Every counting verdict of one answer."""

    discipline: str | None
    judges: dict[str, int | None] = field(default_factory=dict)
    """Judge -> score (None: the judge left it for review)."""
    humans: list[int] = field(default_factory=list)

    def add(self, rater: str, score: int | None) -> None:
        if rater.startswith(HUMAN_PREFIX):
            if score is not None:
                self.humans.append(score)
        else:
            self.judges[rater] = score

    def panel_scores(self, assignment: JudgeAssignment) -> list[int | None]:
        """The scores of the answer's panel judges that rated it (None: left for review)."""
        panel = assignment.judges_for(self.discipline)
        return [self.judges[name] for name in panel if name in self.judges]

    def score(self, assignment: JudgeAssignment) -> int | None:
        """The answer's score (None: it waits for review); see ``judge.panel``."""
        return answer_verdict(self.panel_scores(assignment), self.humans, assignment.rule)

    def judge_columns(self, assignment: JudgeAssignment) -> list[float]:
        """One score per judge of ``assignment.every_judge`` for the judge-variance
        bootstrap: NaN for a judge outside the answer's panel or without a score; a
        reviewed answer has the reviewers' score in every column (no judge varies it)."""
        if self.humans:
            fixed = float(answer_verdict([], self.humans, assignment.rule) or 0)
            return [fixed] * len(assignment.every_judge)
        panel = set(assignment.judges_for(self.discipline))
        return [
            float(score)
            if name in panel and (score := self.judges.get(name)) is not None
            else math.nan
            for name in assignment.every_judge
        ]


def group_ratings(
    rows: Iterable[tuple[uuid.UUID, int, str | None, str, int | None]],
) -> dict[tuple[uuid.UUID, int], AnswerRatings]:
    """Group ``(session_id, position, discipline, rater, score)`` rows by answer."""
    grouped: dict[tuple[uuid.UUID, int], AnswerRatings] = {}
    for session_id, position, discipline, rater, score in rows:
        key = (session_id, position)
        if key not in grouped:
            grouped[key] = AnswerRatings(discipline)
        grouped[key].add(rater, score)
    return grouped


def verdict_rows(*columns: Any) -> Select[Any]:
    """Verdicts with their answer, item and session joined: ``session_id``,
    ``position``, the item's ``discipline``, then ``columns`` (of ``Verdict``, ``Answer``,
    ``Item`` or ``EvalSession``)."""
    return (
        select(Verdict.session_id, Verdict.position, Item.discipline, *columns)
        .join(
            Answer,
            and_(Answer.session_id == Verdict.session_id, Answer.position == Verdict.position),
        )
        .join(Item, Item.id == Answer.item_id)
        .join(EvalSession, EvalSession.id == Verdict.session_id)
    )


@dataclass(frozen=True, slots=True)
class CountedAnswer:
    """One answer with every counting verdict of it and the score it counts with (None:
    it waits for review, and is left out of every score, never counted as 0). ``row`` is
    its first verdict row, with the reader's extra columns."""

    ratings: AnswerRatings
    score: int | None
    row: Any


async def counted_answers(
    db: AsyncSession,
    *,
    judges: JudgeAssignment,
    prompt_version: str,
    where: Sequence[ColumnElement[bool]] = (),
    columns: Sequence[Any] = (),
    ordered: bool = True,
    in_thread: bool = False,
) -> list[CountedAnswer]:
    """Every answer that has a counting verdict and satisfies ``where`` (conditions on
    ``Verdict``, ``Answer``, ``Item`` and ``EvalSession``), once each, with its score
    under ``judges`` and ``prompt_version``: oldest session first and in position order,
    or in no promised order without ``ordered``. Each row has ``session_id``,
    ``position``, ``discipline``, ``judge``, ``score`` and ``columns``. With
    ``in_thread`` the answers are grouped and scored off the event loop (readers of many
    answers: bank health, the model-assisted neighbours, item histories)."""
    statement = verdict_rows(Verdict.judge, Verdict.score, *columns).where(
        counting_verdicts(judges, prompt_version), *where
    )
    if ordered:
        statement = statement.order_by(EvalSession.created_at, EvalSession.id, Verdict.position)
    rows = (await db.execute(statement)).all()
    if in_thread:
        return await asyncio.to_thread(_counted, rows, judges)
    return _counted(rows, judges)


def _counted(rows: Sequence[Any], judges: JudgeAssignment) -> list[CountedAnswer]:
    """The verdict rows grouped by answer (``group_ratings``), each answer scored and
    kept with its first row (pure)."""
    first: dict[tuple[uuid.UUID, int], Any] = {}
    for row in rows:
        first.setdefault((row.session_id, row.position), row)
    grouped = group_ratings(
        (row.session_id, row.position, row.discipline, row.judge, row.score) for row in rows
    )
    return [CountedAnswer(r, r.score(judges), first[key]) for key, r in grouped.items()]


def _half_even(total: ColumnElement[Any], n: ColumnElement[Any]) -> ColumnElement[Any]:
    """``round(total / n)`` half to even, in integers (``round(statistics.fmean(...))``
    of a few integer scores: the mean is never within a rounding error of a half unless
    it is one)."""
    q = total // n  # integer division: scores are not negative
    twice_rest = 2 * (total - q * n)
    return case(
        (twice_rest > n, q + 1),
        (twice_rest < n, q),
        else_=q + q % 2,
    )


class OneJudgeScore:
    """The score an answer counts with when one judge scores everything, decided by the
    database exactly as ``AnswerRatings.score`` decides it for a single judge: the
    reviewers' mean rounded half to even when a person scored the answer, else the
    judge's score under ``prompt_version``, else NULL (it waits for review). A fast path
    for readers of many answers (``server.leaderboard.aggregates``, the model-assisted
    neighbours), tested equal to ``counted_answers``.

    ``sessions`` is a subquery of the sessions read (an ``id`` column); a statement over
    ``Answer`` joined to it reads ``score`` after ``join``."""

    def __init__(self, judge: str, prompt_version: str, sessions: Subquery) -> None:
        self._human = (
            select(
                Verdict.session_id,
                Verdict.position,
                func.sum(Verdict.score).label("total"),
                func.count(Verdict.score).label("n"),
            )
            .join(sessions, sessions.c.id == Verdict.session_id)
            .where(
                Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
                Verdict.prompt_version == HUMAN_PROMPT_VERSION,
                Verdict.score.is_not(None),
            )
            .group_by(Verdict.session_id, Verdict.position)
            .subquery("h")
        )
        self._judged = aliased(Verdict, name="j")
        self._judge = judge
        self._prompt_version = prompt_version
        self.score: ColumnElement[Any] = case(
            (self._human.c.n > 0, _half_even(self._human.c.total, self._human.c.n)),
            else_=self._judged.score,
        )

    def join(self, statement: Select[Any]) -> Select[Any]:
        """``statement`` (over ``Answer``) with the verdicts ``score`` reads joined."""
        return statement.outerjoin(
            self._judged,
            and_(
                self._judged.session_id == Answer.session_id,
                self._judged.position == Answer.position,
                self._judged.judge == self._judge,
                self._judged.prompt_version == self._prompt_version,
            ),
        ).outerjoin(
            self._human,
            and_(
                self._human.c.session_id == Answer.session_id,
                self._human.c.position == Answer.position,
            ),
        )
