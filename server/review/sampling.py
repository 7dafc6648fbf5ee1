"""Which answers go to human review: the reasons of one answer's verdicts, the systematic
audit draw within a stratum, and the dual-annotation draw. Pure functions, no I/O.

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4, app. F) checks its judge against human
experts on a sample of answers, with two annotators on part of it; ReLE (its §3.2) scores
with several judges and looks at where they disagree. The queue here holds (in this order
of priority) answers the judge could not score, answers a panel's judges disagree on, and
a systematic sample of the answers the judge or the similarity filter decided (so the judge
is checked where it did not complain).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from server.review.states import ReviewReason

if TYPE_CHECKING:  # only from_settings reads them
    from server.config import Settings

__all__ = [
    "AUDITED_METHODS",
    "AnswerKey",
    "AnswerVerdicts",
    "JudgeScore",
    "drawn_for_dual",
    "group_verdicts",
    "systematic_draws",
]

AUDITED_METHODS = frozenset({"judge", "similarity"})
"""Cascade stages whose decisions the audit sample checks (objective matching is exact)."""

AnswerKey = tuple[uuid.UUID, int]
"""(session id, position): one answer."""


@dataclass(frozen=True, slots=True)
class ReviewPolicy:
    """What opens review tasks: the audit sample's rate, the share of tasks that wait for
    two reviewers, and the panel spread that counts as a disagreement (the ``review_*``
    settings)."""

    audit_rate: float = 0.02
    dual_rate: float = 0.1
    disagreement_points: int = 2

    @classmethod
    def from_settings(cls, settings: Settings) -> ReviewPolicy:
        return cls(
            audit_rate=settings.review_audit_rate,
            dual_rate=settings.review_dual_rate,
            disagreement_points=settings.review_disagreement_points,
        )


@dataclass(frozen=True, slots=True)
class JudgeScore:
    """One non-human verdict of an answer under the current prompt version."""

    judge: str
    score: int | None
    method: str
    needs_review: bool


@dataclass(slots=True)
class AnswerVerdicts:
    """Every judge's verdict of one answer."""

    discipline: str
    verdicts: list[JudgeScore] = field(default_factory=list)

    def reason(self, disagreement_points: int) -> tuple[ReviewReason, str | None] | None:
        """The answer's review reason and the judge it checks, before the audit sample:
        ``needs_review`` if a judge could not score it, ``disagreement`` if two judges'
        scores differ by ``disagreement_points`` or more (judge None: several), else None.
        """
        for verdict in self.verdicts:
            if verdict.needs_review or verdict.score is None:
                return ReviewReason.NEEDS_REVIEW, verdict.judge
        scores = [v.score for v in self.verdicts if v.score is not None]
        if len(scores) >= 2 and max(scores) - min(scores) >= disagreement_points:
            return ReviewReason.DISAGREEMENT, None
        return None

    def audit_strata(self) -> list[tuple[str, str]]:
        """The (discipline, judge) audit strata this answer counts in: one per judge that
        decided it by an audited method."""
        return sorted(
            {(self.discipline, v.judge) for v in self.verdicts if v.method in AUDITED_METHODS}
        )


def group_verdicts(
    rows: Iterable[tuple[uuid.UUID, int, str, str, int | None, str, bool]],
) -> dict[AnswerKey, AnswerVerdicts]:
    """Group ``(session_id, position, discipline, judge, score, method, needs_review)``
    rows by answer, keeping the rows' order within an answer."""
    grouped: dict[AnswerKey, AnswerVerdicts] = {}
    for session_id, position, discipline, judge, score, method, needs_review in rows:
        key = (session_id, position)
        if key not in grouped:
            grouped[key] = AnswerVerdicts(discipline)
        grouped[key].verdicts.append(JudgeScore(judge, score, method, needs_review))
    return grouped


def systematic_draws(*, rate: float, start: float, seen: int, n: int) -> list[bool]:
    """Which of the next ``n`` answers of a stratum the systematic sample draws.

    Answer number ``k`` (counting from 1 over the stratum's life) is drawn when
    ``floor(rate k + start) > floor(rate (k - 1) + start)``: with a random ``start`` in
    [0, 1) every answer has probability ``rate`` of being drawn, and after ``m`` answers
    the stratum has drawn ``floor(rate m + start) - floor(start)`` of them, its share to
    within one answer (systematic sampling: Cochran, "Sampling Techniques", ch. 8).

    Parameters
    ----------
    rate : float
        The sampling rate, in [0, 1].
    start : float
        The stratum's random start, in [0, 1).
    seen : int
        Answers of the stratum already considered.
    n : int
        Answers to consider now.
    """
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1], not {rate}")
    if not 0 <= start < 1:
        raise ValueError(f"start must be in [0, 1), not {start}")

    def level(k: int) -> int:
        return math.floor(rate * k + start)

    return [level(k) > level(k - 1) for k in range(seen + 1, seen + n + 1)]


def drawn_for_dual(session_id: uuid.UUID, position: int, rate: float) -> bool:
    """Whether the task of this answer waits for two reviewers (dual annotation).

    A hash of the answer's key, read as a number in [0, 1), below ``rate``: each task is
    drawn with probability ``rate``, independently of the others, and the same answer is
    always drawn the same way (no random state to keep, reproducible in tests)."""
    digest = hashlib.sha256(f"{session_id}:{position}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate
