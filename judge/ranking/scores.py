"""Absolute, per-discipline and relative scores (papers/004 §2.3.2, eq. 1-2).

* :func:`absolute_score`: ``S = sum(s_i) / (N * s_max) * 100`` over a session's item scores
  (eq. 1; the rubric's ``s_max`` is 3).
* :func:`discipline_scores`: the same ratio on a 10-point scale per discipline, as in
  papers/004 tables 1 and 8 (``mean(s_i) / s_max * 10``).
* :func:`relative_scores`: ``R = S / S_anchor * 100`` (eq. 2), the anchor ("SOTA") being
  designated or, by default, the top model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral

MAX_SCORE = 3
"""The rubric's maximum item score ``s_max`` (papers/004 §2.3.1, eq. 1)."""

DISCIPLINE_SCALE = 10.0
"""Per-discipline scores are reported on a 10-point scale (papers/004 tables 1 and 8)."""


def _check_item_score(score: object, max_score: int, where: str) -> int:
    if isinstance(score, bool) or not isinstance(score, Integral):
        raise ValueError(f"{where}: {score!r} is not an integer score")
    value = int(score)
    if not 0 <= value <= max_score:
        raise ValueError(f"{where}: {value} is outside 0-{max_score}")
    return value


def _check_max_score(max_score: int) -> None:
    if isinstance(max_score, bool) or not isinstance(max_score, Integral) or max_score < 1:
        raise ValueError(f"max_score must be a positive integer, got {max_score!r}")


def absolute_score(scores: Sequence[int], *, max_score: int = MAX_SCORE) -> float:
    """Absolute score of a set of item scores on a 0-100 scale (papers/004 eq. 1).

    .. math:: S = \\frac{\\sum_{i=1}^{N} s_i}{N \\times s_{max}} \\times 100

    Parameters
    ----------
    scores : sequence of int
        The ``N`` item scores ``s_i``, each an integer in ``0..max_score`` (numpy integers
        are accepted, booleans are not).
    max_score : int, default 3
        ``s_max``, the rubric's top score.

    Returns
    -------
    float
        ``S`` in ``[0, 100]``.

    Raises
    ------
    ValueError
        No scores, a score that is not an integer or lies outside ``0..max_score``, or a
        ``max_score`` below 1.

    Examples
    --------
    >>> absolute_score([3, 3, 0, 2])
    66.66666666666666
    """
    _check_max_score(max_score)
    if len(scores) == 0:
        raise ValueError("an absolute score needs at least one item score")
    total = sum(_check_item_score(s, max_score, f"score {i}") for i, s in enumerate(scores))
    return total / (len(scores) * max_score) * 100


def discipline_scores(
    scores: Iterable[tuple[str, int]], *, max_score: int = MAX_SCORE
) -> dict[str, float]:
    """Per-discipline scores on a 10-point scale (papers/004 tables 1 and 8).

    For each discipline ``d`` with item scores ``s_i``:
    ``score_d = mean(s_i) / s_max * 10``, i.e. eq. 1 restricted to the discipline's items
    and divided by 10. When every discipline holds the same number of items (papers/004
    samples about 100 per discipline) the absolute score ``S`` is ten times the mean of the
    discipline scores.

    Parameters
    ----------
    scores : iterable of (str, int)
        ``(discipline, item score)`` pairs; scores are integers in ``0..max_score``.
    max_score : int, default 3
        ``s_max``.

    Returns
    -------
    dict of str to float
        Discipline -> score in ``[0, 10]``, in order of each discipline's first item.

    Raises
    ------
    ValueError
        A score that is not an integer in ``0..max_score``, or a ``max_score`` below 1.
    """
    _check_max_score(max_score)
    totals: dict[str, list[int]] = {}
    for i, (discipline, score) in enumerate(scores):
        value = _check_item_score(score, max_score, f"item {i} ({discipline})")
        counts = totals.setdefault(discipline, [0, 0])
        counts[0] += value
        counts[1] += 1
    return {
        discipline: total / (n * max_score) * DISCIPLINE_SCALE
        for discipline, (total, n) in totals.items()
    }


@dataclass(frozen=True, slots=True)
class RelativeScores:
    """Scores relative to an anchor model (papers/004 eq. 2).

    Attributes
    ----------
    anchor : str
        The anchor ("SOTA") model; its relative score is 100.
    anchor_score : float
        The anchor's absolute score ``S_anchor``.
    relative : dict of str to float
        Model -> ``R = S / S_anchor * 100``, in the order of the input mapping.
    designated : bool
        True if the anchor was named by the caller, False if it is the top model.
    """

    anchor: str
    anchor_score: float
    relative: dict[str, float]
    designated: bool


def relative_scores(overall: Mapping[str, float], anchor: str | None = None) -> RelativeScores:
    """Relative scores ``R = S / S_anchor * 100`` (papers/004 eq. 2).

    Parameters
    ----------
    overall : mapping of str to float
        Model -> absolute (overall) score ``S``; finite values.
    anchor : str or None
        The anchor model. ``None`` picks the top model (the highest ``S``; among equal
        top scores the first in the mapping's order, which gives the same ``R`` values).

    Returns
    -------
    RelativeScores

    Raises
    ------
    ValueError
        No models, a non-finite score, an anchor that is not among the models (named in
        the message), or an anchor whose score is 0 (``R`` would be undefined) or
        negative.
    """
    if not overall:
        raise ValueError("relative scores need at least one model")
    for model, score in overall.items():
        if not math.isfinite(score):
            raise ValueError(f"model {model!r}: score {score!r} is not a finite number")
    designated = anchor is not None
    if anchor is None:
        anchor = max(overall, key=lambda m: overall[m])
    elif anchor not in overall:
        raise ValueError(f"anchor model {anchor!r} is not among the {len(overall)} models")
    base = float(overall[anchor])
    if base <= 0:
        raise ValueError(
            f"anchor model {anchor!r} has score {base:g}; relative scores need a positive "
            "anchor score"
        )
    # x / x is exactly 1.0 in IEEE arithmetic, so the anchor's R is exactly 100.
    relative = {model: float(score) / base * 100 for model, score in overall.items()}
    return RelativeScores(
        anchor=anchor, anchor_score=base, relative=relative, designated=designated
    )
