"""The score each answer counts with, from the verdicts of its judges and reviewers.

Several raters may have scored one answer: the judges of its panel (one verdict each per
prompt version) and human reviewers (rater ``human:<reviewer>``). ``judge.panel``
decides (people first, then the panel's rule); this module selects the verdicts that take
part and groups them by answer, for the leaderboard and the scoring progress alike.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, and_, or_

from judge.panel import answer_verdict
from server.review.raters import HUMAN_PREFIX, HUMAN_PROMPT_VERSION
from server.scoring.assignment import JudgeAssignment
from server.scoring.models import Verdict

__all__ = ["AnswerRatings", "counting_verdicts", "group_ratings"]


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

    def score(self, assignment: JudgeAssignment) -> int | None:
        """The answer's score (None: it waits for review); see ``judge.panel``."""
        panel = assignment.judges_for(self.discipline)
        scores = [self.judges[name] for name in panel if name in self.judges]
        return answer_verdict(scores, self.humans, assignment.rule)

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
