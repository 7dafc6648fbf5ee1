"""Ratings: one rater's score of one answer (:class:`Rating`), and all of them indexed.

:class:`RatingTable` holds the ratings by rater and answer, with each answer's model and
family. Building it rejects a score that is not 0-3, a rater scoring an answer twice with
different scores, and an answer given two different models or families.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from judge.agreement.kappa import RaterAgreement, rater_agreement
from judge.rubric import MAX_SCORE, MIN_SCORE


@dataclass(frozen=True, slots=True)
class Rating:
    """One rater's 0-3 score of one answer.

    ``model`` is the model that wrote the answer and ``model_family`` its family (e.g.
    ``"OpenAI"``); both are optional, and answers without a model are left out of the
    per-model, ranking and family-bias parts of the report.
    """

    answer_id: str
    rater: str
    score: int
    model: str | None = None
    model_family: str | None = None


@dataclass(slots=True)
class RatingTable:
    """Scores by rater and answer, and each answer's model and family (see :meth:`build`)."""

    scores: dict[str, dict[str, int]]  # rater -> answer -> score
    model: dict[str, str | None]  # answer -> model
    family: dict[str, str | None]  # answer -> model family

    @classmethod
    def build(cls, ratings: Iterable[Rating]) -> RatingTable:
        table = cls({}, {}, {})
        for rating in ratings:
            score: object = rating.score
            if (
                isinstance(score, bool)
                or not isinstance(score, int | np.integer)
                or not (MIN_SCORE <= score <= MAX_SCORE)
            ):
                raise ValueError(
                    f"{rating.rater!r} on answer {rating.answer_id!r}: score {rating.score!r}"
                    " is not an integer 0-3"
                )
            scores = table.scores.setdefault(rating.rater, {})
            earlier = scores.setdefault(rating.answer_id, rating.score)
            if earlier != rating.score:
                raise ValueError(
                    f"rater {rating.rater!r} scored answer {rating.answer_id!r} twice with "
                    f"different scores: {earlier} and {rating.score}"
                )
            _merge(table.model, rating.answer_id, "model", rating.model)
            _merge(table.family, rating.answer_id, "model_family", rating.model_family)
        return table

    def common(
        self, first: str, second: str, *, model: str | None = None, family: str | None = None
    ) -> list[str]:
        """Answers both raters scored (of ``model`` and of model ``family`` if given),
        sorted."""
        a, b = self.scores[first], self.scores[second]
        shared = a.keys() & b.keys()
        if model is not None:
            shared = {answer for answer in shared if self.model.get(answer) == model}
        if family is not None:
            shared = {answer for answer in shared if self.family.get(answer) == family}
        return sorted(shared)

    def paired(
        self, first: str, second: str, *, model: str | None = None, family: str | None = None
    ) -> tuple[list[int], list[int]]:
        """The two raters' scores of the answers both scored (``common``), aligned."""
        answers = self.common(first, second, model=model, family=family)
        return [self.scores[first][a] for a in answers], [self.scores[second][a] for a in answers]

    def agreement(self, first: str, second: str, *, model: str | None = None) -> RaterAgreement:
        answers = self.common(first, second, model=model)
        return rater_agreement(
            [self.scores[first][a] for a in answers], [self.scores[second][a] for a in answers]
        )

    def model_means(self, first: str, second: str) -> dict[str, tuple[float, float]]:
        """model -> (mean of first, mean of second) over answers both scored, sorted."""
        grouped: dict[str, tuple[list[int], list[int]]] = {}
        for answer in self.common(first, second):
            model = self.model.get(answer)
            if model is None:
                continue
            a, b = grouped.setdefault(model, ([], []))
            a.append(self.scores[first][answer])
            b.append(self.scores[second][answer])
        return {
            model: (math.fsum(a) / len(a), math.fsum(b) / len(b))
            for model, (a, b) in sorted(grouped.items())
        }


def _merge(known: dict[str, str | None], answer_id: str, field: str, value: str | None) -> None:
    earlier = known.get(answer_id)
    if earlier is None:
        known[answer_id] = value
    elif value is not None and value != earlier:
        raise ValueError(f"answer {answer_id!r} has {field} {earlier!r} and {value!r}")
