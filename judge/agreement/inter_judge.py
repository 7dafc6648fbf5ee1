"""Item-level agreement of several judges that scored the same answers.

ReLE ("ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability
Anisotropy in Chinese LLMs", §3.2, step 4) checks its main judge against secondary judges
on a shared subset of answers by the inter-judge Pearson correlation; a panel of judges
(:mod:`judge.panel`) needs the same check, and the answers on which the judges differ
most are the ones a person should look at.

* :func:`inter_judge_agreement`: per pair of judges the Pearson r of their scores and
  their exact agreement rate over the answers both scored, and the mean over pairs
  (:class:`InterJudgeAgreement`);
* :func:`disagreements`: the answers whose judges' scores differ by at least ``min_gap``
  points (:class:`Disagreement`).

Scores are the rubric's integers 0-3 (LLMEval-Fair (Zhang et al.) §2.3, fig. 11). A judge
that has not scored an answer is missing from that answer's scores (or maps to None); it
is skipped pairwise, so every pair uses the answers both of its judges scored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.agreement.kappa import exact_agreement
from judge.agreement.ratings import Rating, RatingTable
from judge.agreement.scores import NAN, SCORE_LABELS, json_record
from judge.numbers import json_float

__all__ = [
    "Disagreement",
    "InterJudgeAgreement",
    "JudgePairAgreement",
    "JudgeScores",
    "disagreements",
    "inter_judge_agreement",
    "pearson_r",
    "scores_by_answer",
]

JudgeScores = Mapping[str, Mapping[str, int | None]]
"""Answer id -> judge -> its score 0-3 (a judge absent or None has not scored it)."""


@dataclass(frozen=True, slots=True)
class JudgePairAgreement:
    """Two judges over the ``n`` answers both scored.

    ``pearson_r`` is NaN with fewer than two answers or when either judge gave all of
    them one score; ``exact`` (the share scored the same) is NaN when ``n`` is 0.
    """

    first: str
    second: str
    pearson_r: float
    exact: float
    n: int

    def to_json(self) -> dict[str, Any]:
        """``{"first", "second", "pearson_r", "exact", "n"}``, NaN as ``None``."""
        return json_record(self)


@dataclass(frozen=True, slots=True)
class InterJudgeAgreement:
    """Agreement of every pair of judges, and the mean over the pairs.

    ``pairs`` is keyed ``"A vs B"`` with A < B; ``mean_pearson_r`` and ``mean_exact`` are
    the unweighted means over the pairs where the statistic is defined (NaN if none).
    """

    judges: tuple[str, ...]
    pairs: dict[str, JudgePairAgreement]
    mean_pearson_r: float
    mean_exact: float

    def to_json(self) -> dict[str, Any]:
        """``{"judges": [...], "pairs": {"A vs B": {...}}, "mean_pearson_r", "mean_exact"}``."""
        return {
            "judges": list(self.judges),
            "pairs": {key: pair.to_json() for key, pair in self.pairs.items()},
            "mean_pearson_r": json_float(self.mean_pearson_r),
            "mean_exact": json_float(self.mean_exact),
        }


@dataclass(frozen=True, slots=True)
class Disagreement:
    """An answer whose judges' scores span ``gap`` points (highest minus lowest)."""

    answer_id: str
    scores: dict[str, int]
    gap: int

    def to_json(self) -> dict[str, Any]:
        """``{"answer_id", "scores": {judge: score}, "gap"}``."""
        return {"answer_id": self.answer_id, "scores": dict(self.scores), "gap": self.gap}


def _valid_scores(scores: JudgeScores) -> dict[str, dict[str, int]]:
    """The scores without the missing ones, after checking each is an integer 0-3."""
    out: dict[str, dict[str, int]] = {}
    for answer, by_judge in scores.items():
        kept: dict[str, int] = {}
        for judge, score in by_judge.items():
            if score is None:
                continue
            if isinstance(score, bool) or not isinstance(score, int | np.integer):
                raise ValueError(f"{judge!r} on answer {answer!r}: {score!r} is not a score 0-3")
            if score not in SCORE_LABELS:
                raise ValueError(f"{judge!r} on answer {answer!r}: score {score} is not 0-3")
            kept[judge] = int(score)
        out[answer] = kept
    return out


def pearson_r(x: Sequence[int], y: Sequence[int]) -> float:
    """Pearson's r of two aligned score sequences (``scipy.stats.pearsonr``'s statistic);
    NaN with fewer than two pairs or a constant sequence, without a warning."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 2:
        return NAN
    da, db = a - a.mean(), b - b.mean()
    scale = math.sqrt(float(da @ da) * float(db @ db))
    if scale == 0:
        return NAN
    return float(np.clip(float(da @ db) / scale, -1.0, 1.0))


def _pair(scores: Mapping[str, Mapping[str, int]], first: str, second: str) -> JudgePairAgreement:
    both = [(s[first], s[second]) for s in scores.values() if first in s and second in s]
    x, y = [a for a, _ in both], [b for _, b in both]
    exact = exact_agreement(x, y) if both else NAN
    return JudgePairAgreement(first, second, pearson_r(x, y), exact, len(both))


def _mean_defined(values: Iterable[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return math.fsum(defined) / len(defined) if defined else NAN


def inter_judge_agreement(
    scores: JudgeScores, *, judges: Sequence[str] | None = None
) -> InterJudgeAgreement:
    """Pairwise Pearson r and exact agreement of the judges, and their means over pairs.

    ReLE §3.2 (step 4) reports the inter-judge Pearson r of its judges on a shared subset;
    exact agreement is the "Exact" column of LLMEval-Fair (Zhang et al.) app. L, table 13.

    Parameters
    ----------
    scores : mapping
        Answer id -> judge -> score 0-3; a judge absent or None has not scored it.
    judges : sequence of str, optional
        The judges to compare (default: every judge that scored something), so that a
        judge that scored nothing still appears with ``n == 0``.

    Returns
    -------
    InterJudgeAgreement
        Judges sorted; one pair per two judges (``"A vs B"``, A < B).

    Raises
    ------
    ValueError
        A score that is not an integer 0-3.
    """
    valid = _valid_scores(scores)
    names = sorted(set(judges) if judges is not None else {j for s in valid.values() for j in s})
    pairs = {
        f"{first} vs {second}": _pair(valid, first, second)
        for i, first in enumerate(names)
        for second in names[i + 1 :]
    }
    return InterJudgeAgreement(
        judges=tuple(names),
        pairs=pairs,
        mean_pearson_r=_mean_defined(p.pearson_r for p in pairs.values()),
        mean_exact=_mean_defined(p.exact for p in pairs.values()),
    )


def disagreements(scores: JudgeScores, min_gap: int = 2) -> list[Disagreement]:
    """The answers whose judges differ by at least ``min_gap`` points.

    The gap of an answer is its highest score minus its lowest, over the judges that
    scored it (at least two). With the default 2, an answer one judge calls right and
    another wrong (fig. 11: 2-3 against 0-1) is one; 1 lists every answer they do not
    score identically.

    Parameters
    ----------
    scores : mapping
        Answer id -> judge -> score 0-3 (absent or None: not scored).
    min_gap : int, default 2
        At least 1.

    Returns
    -------
    list of Disagreement
        Largest gap first, then by answer id.

    Raises
    ------
    ValueError
        A score that is not an integer 0-3, or ``min_gap`` < 1.
    """
    if isinstance(min_gap, bool) or not isinstance(min_gap, int) or min_gap < 1:
        raise ValueError(f"min_gap must be a positive integer, got {min_gap!r}")
    found = []
    for answer, by_judge in _valid_scores(scores).items():
        if len(by_judge) < 2:
            continue
        gap = max(by_judge.values()) - min(by_judge.values())
        if gap >= min_gap:
            found.append(Disagreement(answer, dict(sorted(by_judge.items())), gap))
    return sorted(found, key=lambda d: (-d.gap, d.answer_id))


def scores_by_answer(
    ratings: Iterable[Rating], *, judges: Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """Ratings regrouped as answer id -> judge -> score (the input of this module).

    ``judges`` keeps only those raters (e.g. to leave out the human reference). Ratings
    are validated as in :func:`judge.agreement.agreement_report` (scores 0-3, one score
    per rater and answer).
    """
    table = RatingTable.build(ratings)
    keep = set(judges) if judges is not None else set(table.scores)
    out: dict[str, dict[str, int]] = {}
    for judge in sorted(keep & table.scores.keys()):
        for answer, score in table.scores[judge].items():
            out.setdefault(answer, {})[judge] = score
    return dict(sorted(out.items()))
