"""Agreement of human reviewers with each other and with the judges (pure, no I/O).

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4, app. F.2, table 10) rates its judge by
Cohen's kappa against human experts and used two annotators per answer; app. L, table 13
adds exact agreement and the quadratic-weighted kappa. Every kappa here comes with its 95%
bootstrap interval, resampling whole item families (``judge.agreement.intervals``: answers
to variants of one item are not independent).

The reference of an answer is its first reviewer's score (the earliest human verdict); a
second reviewer's score is compared with it for reviewer-vs-reviewer agreement, and every
judge's score of the answer (current prompt version) for judge-vs-human agreement, overall
per judge, per (judge, discipline) and per (judge, model family).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from judge.agreement.intervals import (
    KappaInterval,
    KappaIntervals,
    ScorePair,
    grouped_kappa_intervals,
    kappa_intervals,
)
from server.review.schemas import AgreementOut, AgreementRow, IntervalOut

__all__ = ["UNKNOWN_FAMILY", "HumanRating", "JudgeRating", "agreement_report"]

UNKNOWN_FAMILY = "unknown"
"""The model family of a model registered without one."""

AnswerKey = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class HumanRating:
    """One reviewer's score of one answer, with what groups and clusters it."""

    answer: AnswerKey
    reviewer: str
    score: int
    discipline: str
    item_family: Hashable
    """The bootstrap's cluster."""
    model_family: str | None


@dataclass(frozen=True, slots=True)
class JudgeRating:
    """One judge's score of an answer people scored."""

    answer: AnswerKey
    judge: str
    score: int


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _interval(found: KappaInterval) -> IntervalOut:
    return IntervalOut(
        estimate=_finite(found.estimate), low=_finite(found.low), high=_finite(found.high)
    )


def _row(
    pairs: Sequence[ScorePair], found: KappaIntervals, *, judge: str | None, group: str | None
) -> AgreementRow:
    same = sum(p.reference == p.rater for p in pairs)
    return AgreementRow(
        judge=judge,
        group=group,
        n=len(pairs),
        n_clusters=found.plain.n_clusters,
        exact=same / len(pairs) if pairs else None,
        kappa=_interval(found.plain),
        weighted_kappa=_interval(found.weighted),
    )


def _first_by_answer(humans: Sequence[HumanRating]) -> dict[AnswerKey, list[HumanRating]]:
    by_answer: dict[AnswerKey, list[HumanRating]] = {}
    for rating in humans:
        by_answer.setdefault(rating.answer, []).append(rating)
    return by_answer


def agreement_report(
    humans: Sequence[HumanRating],
    judged: Sequence[JudgeRating],
    *,
    n_resamples: int,
    confidence_level: float = 0.95,
    rng: int = 0,
) -> AgreementOut:
    """Agreement of reviewers with each other and of judges with reviewers.

    Parameters
    ----------
    humans : sequence of HumanRating
        Every human score, earliest first (an answer's first one is its reference).
    judged : sequence of JudgeRating
        Judges' scores; those of answers no person scored are ignored.
    n_resamples, confidence_level, rng
        The bootstrap's (``judge.agreement.intervals``); the fixed seed makes a report
        reproducible.
    """
    by_answer = _first_by_answer(humans)
    dual = [
        ScorePair(ratings[0].score, ratings[1].score, ratings[0].item_family)
        for ratings in by_answer.values()
        if len(ratings) >= 2
    ]
    reviewers = kappa_intervals(
        [p.reference for p in dual],
        [p.rater for p in dual],
        clusters=[p.cluster for p in dual],
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        rng=rng,
    )
    pairs: list[tuple[JudgeRating, HumanRating, ScorePair]] = []
    for rating in judged:
        if rating.answer in by_answer:
            first = by_answer[rating.answer][0]
            pairs.append((rating, first, ScorePair(first.score, rating.score, first.item_family)))
    records = [pair for _, _, pair in pairs]
    breakdowns: dict[str, list[tuple[str, str]]] = {
        "judge": [(j.judge, "") for j, _, _ in pairs],
        "discipline": [(j.judge, h.discipline) for j, h, _ in pairs],
        "model_family": [(j.judge, h.model_family or UNKNOWN_FAMILY) for j, h, _ in pairs],
    }
    rows: dict[str, list[AgreementRow]] = {}
    for name, keys in breakdowns.items():
        found = grouped_kappa_intervals(
            records, keys, n_resamples=n_resamples, confidence_level=confidence_level, rng=rng
        )
        members: dict[tuple[str, str], list[ScorePair]] = {}
        for key, record in zip(keys, records, strict=True):
            members.setdefault(key, []).append(record)
        rows[name] = [
            _row(members[key], intervals, judge=key[0], group=key[1] or None)
            for key, intervals in found.items()
        ]
    return AgreementOut(
        reviewers=_row(dual, reviewers, judge=None, group=None),
        by_judge=rows["judge"],
        by_discipline=rows["discipline"],
        by_model_family=rows["model_family"],
        confidence_level=confidence_level,
        n_resamples=n_resamples,
    )
