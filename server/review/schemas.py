"""Bodies of the human review routes (``/v1/review``).

Response models are explicit allow-lists and blind: a task is known by its opaque id only;
no session id, model, organisation or other reviewer's score is ever part of a response
(a reviewer who knew whose answer it was, or what a colleague gave it, would not be an
independent rater: LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal
Study on Robust and Fair Evaluation of Large Language Models", §3.4) checks its judge
against independent human experts).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from judge.rubric import MAX_SCORE, MIN_SCORE
from server.api.bodies import RequestBody
from server.review.states import ReviewReason, ReviewTaskState

MAX_REVIEW_NOTE = 4_000
"""Longest reviewer's note, in characters."""


class ReviewScoreIn(RequestBody):
    """A reviewer's score of one task's answer."""

    score: int = Field(ge=MIN_SCORE, le=MAX_SCORE, strict=True)
    """0-3, the judge's scale: 3 fully right, 0 wrong (a JSON integer, not text)."""
    note: str = Field("", max_length=MAX_REVIEW_NOTE)
    """Why (kept as the verdict's detail; never shown to vendors)."""


class ReviewTaskSummary(BaseModel):
    """One task of the queue, as a list shows it."""

    task_id: int
    reason: ReviewReason
    discipline: str
    qtype: str
    required: int
    """Human scores that close the task (2: dual annotation)."""
    human_scores: int
    """Human scores given so far (by anyone)."""
    created_at: datetime


class ReviewQueueOut(BaseModel):
    """A page of the queue, oldest task first; ``next_after`` pages on (null: the end)."""

    tasks: list[ReviewTaskSummary]
    next_after: int | None


class JudgeVerdictOut(BaseModel):
    """What one judge made of the answer."""

    judge: str
    score: int | None
    """0-3, or null when the judge could not give a verdict."""
    method: str
    """``objective``, ``similarity`` or ``judge``: the cascade stage that decided."""
    reason: str | None
    """The matcher's note or the judge's stated reason."""


class ReviewTaskOut(BaseModel):
    """Everything a reviewer needs to score one answer, and nothing about whose it is."""

    task_id: int
    reason: ReviewReason
    state: ReviewTaskState
    discipline: str
    subdiscipline: str
    qtype: str
    language: str
    question: str
    options: list[str] | None
    reference: str
    """The bank's reference answer."""
    explanation: str | None
    answer: str
    """The model's answer, as submitted."""
    reasoning: str | None
    """The model's stated reasoning, when it gave one."""
    judges: list[JudgeVerdictOut]
    required: int
    human_scores: int
    your_score: int | None
    """Your own score of this answer, if you gave one (other reviewers' are not shown)."""


class ReviewScoreOut(BaseModel):
    """The score recorded, and where the task and its answer stand now."""

    task_id: int
    score: int
    state: ReviewTaskState
    human_scores: int
    required: int


class ReviewSkipOut(BaseModel):
    """A skip recorded: the task is not offered to you again."""

    task_id: int
    skipped: bool = True


class IntervalOut(BaseModel):
    """A kappa and its 95% bootstrap interval (null when undefined)."""

    estimate: float | None
    low: float | None
    high: float | None


class AgreementRow(BaseModel):
    """Agreement of two raters over ``n`` answers: exact agreement, Cohen's kappa and the
    quadratic-weighted kappa, each kappa with its interval clustered by item family."""

    judge: str | None
    """The judge compared with people (null for reviewer vs reviewer)."""
    group: str | None
    """The discipline or model family (null: every answer of the judge)."""
    n: int
    n_clusters: int
    """Item families the bootstrap resampled."""
    exact: float | None
    kappa: IntervalOut
    weighted_kappa: IntervalOut


class AgreementOut(BaseModel):
    """Reviewer-vs-reviewer agreement on dual-reviewed answers, and judge-vs-human
    agreement per judge, per (judge, discipline) and per (judge, model family)."""

    reviewers: AgreementRow
    by_judge: list[AgreementRow]
    by_discipline: list[AgreementRow]
    by_model_family: list[AgreementRow]
    confidence_level: float
    n_resamples: int
