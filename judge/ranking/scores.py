"""The score scales and relative scores (LLMEval-Fair (Zhang et al.) §2.3.2, eq. 1-2).

The absolute score of a session is ``S = sum(s_i) / (N * s_max) * 100`` over its item
scores (eq. 1; the rubric's ``s_max`` is :data:`MAX_SCORE`), computed for whole sets of
sessions at once by :class:`judge.ranking.stability.RunScores`; per discipline the same
ratio is reported on a :data:`DISCIPLINE_SCALE`-point scale (LLMEval-Fair tables 1 and 8),
by :mod:`judge.ranking.leaderboard`.

* :func:`relative_scores`: ``R = S / S_anchor * 100`` (eq. 2), the anchor ("SOTA") being
  designated or, by default, the top model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from judge.rubric import MAX_SCORE

__all__ = ["DISCIPLINE_SCALE", "MAX_SCORE", "RelativeScores", "relative_scores"]


DISCIPLINE_SCALE = 10.0
"""Per-discipline scores are reported on a 10-point scale (LLMEval-Fair tables 1 and 8)."""


@dataclass(frozen=True, slots=True)
class RelativeScores:
    """Scores relative to an anchor model (LLMEval-Fair eq. 2).

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
    """Relative scores ``R = S / S_anchor * 100`` (LLMEval-Fair eq. 2).

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
