"""Capability inconsistency of every model (ReLE §3.5, §6.2, eq. 4-5).

The coefficient of variation of a model's difficulty-adjusted dimension scores, with a
smoothing floor under the mean (formula in docs/methods.md). The paper is "ReLE: A
Scalable System and Structured Benchmark for Diagnosing Capability Anisotropy in Chinese
LLMs"; its equations could not be recovered from its text, so
:func:`capability_inconsistency` follows the paper's prose and documents every choice it
leaves open. The difficulty rules (:func:`difficulty_parameters`,
:func:`unusable_difficulties`) serve :func:`~judge.ranking.diagnostics.combined.diagnose`
too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from judge.ranking.diagnostics.matrix import FloatArray, ScoreMatrix

DEFAULT_DIFFICULTY_ANCHORS = 10
"""ReLE §6.2: a dimension's difficulty comes from "the average performance of top-10
anchor models"."""

DEFAULT_CI_FLOOR = 0.1
"""The smoothing floor under the mean difficulty-adjusted score (see
:func:`capability_inconsistency`)."""


@dataclass(frozen=True, slots=True, eq=False)
class CapabilityInconsistency:
    """Capability inconsistency of every model (see :func:`capability_inconsistency`).

    Attributes
    ----------
    values : dict of str to float
        Model -> ``CI = std(adjusted) / max(mean(adjusted), floor)``.
    difficulty : dict of str to float
        Dimension -> the difficulty parameter ``b_j`` its scores were divided by.
    anchors : tuple of str
        The models whose mean scores gave ``difficulty`` (empty when it was given).
    floor : float
        The smoothing floor ``epsilon``.
    floored : tuple of str
        Models whose mean adjusted score was below the floor (their CI used the floor).
    dimensions : tuple of str
        Column order of ``adjusted``.
    adjusted : ndarray, shape (n_models, n_dimensions)
        The difficulty-adjusted scores ``x_mj / b_j``.
    """

    values: dict[str, float]
    difficulty: dict[str, float]
    anchors: tuple[str, ...]
    floor: float
    floored: tuple[str, ...]
    dimensions: tuple[str, ...]
    adjusted: FloatArray = field(repr=False)


def difficulty_anchors(matrix: ScoreMatrix, count: int = DEFAULT_DIFFICULTY_ANCHORS) -> list[int]:
    """Row indices of the ``count`` models with the highest mean dimension score.

    Fewer when the matrix has fewer models; ties at the cut go to the earlier row.
    """
    if count < 1:
        raise ValueError(f"the number of difficulty anchors must be at least 1, got {count}")
    means = matrix.scores.mean(axis=1)
    order = sorted(range(len(means)), key=lambda i: (-means[i], i))
    return order[:count]


def capability_inconsistency(
    matrix: ScoreMatrix,
    *,
    difficulty: Mapping[str, float] | None = None,
    anchors: int = DEFAULT_DIFFICULTY_ANCHORS,
    floor: float = DEFAULT_CI_FLOOR,
) -> CapabilityInconsistency:
    """Capability inconsistency: the regularised coefficient of variation of a model's
    difficulty-adjusted dimension scores (ReLE §3.5, §6.2 eq. 4-5;
    docs/methods.md).

    1. Difficulty (ReLE §6.2): each dimension ``j`` has a difficulty parameter
       ``b_j``, by default the mean score on ``j`` of the ``anchors`` top models (the
       "top-10 anchor models"; the top models are those with the highest unweighted mean
       dimension score). With ``anchors`` at least the number of models, ``b_j`` is the
       dimension's mean across all models.
    2. Adjusted scores: ``x~_mj = x_mj / b_j``, 1 meaning "as good as the anchors".
    3. With ``mu_m`` and ``sigma_m`` the mean and the population standard deviation
       (``ddof=0``) of ``x~_m1 .. x~_mD``:

       .. math:: CI_m = \\frac{\\sigma_m}{\\max(\\mu_m, \\varepsilon)}

    The floor ``epsilon`` keeps CI bounded for models that score near zero everywhere
    (where the plain ratio explodes). Eq. 5 itself was lost in extraction; the paper calls
    ``epsilon`` a smoothing constant "derived from the theoretical minimum score of random
    guessing"; here it is a floor. A floor (rather than ``mu + epsilon``) leaves CI
    the exact coefficient of variation for every model above it. LLMEval-Fair items are
    open-ended and judged 0-3 (multiple-choice items are turned into fill-in-the-blank
    variants), so a random guesser scores about 0 and gives no usable constant; the
    default 0.1 means "a tenth of the anchors' level", below every model of LLMEval-Fair's
    table 8 (the weakest is at about 0.26).

    Parameters
    ----------
    matrix : ScoreMatrix
    difficulty : mapping of str to float, optional
        ``b_j`` per dimension, overriding the anchors' means; must cover every dimension.
    anchors : int, default 10
        How many top models define ``b_j`` when ``difficulty`` is not given.
    floor : float, default 0.1
        ``epsilon``, positive, in units of the adjusted scores.

    Returns
    -------
    CapabilityInconsistency

    Raises
    ------
    ValueError
        A non-positive or non-finite floor, fewer than one anchor, a ``difficulty`` that
        misses a dimension or names an unknown one, or a difficulty ``b_j`` that is not
        positive (named).
    """
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"the smoothing floor must be a positive number, got {floor!r}")
    b, anchor_names = difficulty_parameters(matrix, difficulty, anchors)
    unusable = unusable_difficulties(b)
    if unusable:
        j = unusable[0]
        raise ValueError(
            f"dimension {matrix.dimensions[j]!r}: difficulty {float(b[j]):g} is not positive; "
            "difficulty-adjusted scores need a positive difficulty"
        )
    adjusted = matrix.scores / b
    adjusted.setflags(write=False)
    mu = adjusted.mean(axis=1)
    sigma = adjusted.std(axis=1, ddof=0)
    ci = sigma / np.maximum(mu, floor)
    return CapabilityInconsistency(
        values=dict(zip(matrix.models, (float(v) for v in ci), strict=True)),
        difficulty=dict(zip(matrix.dimensions, (float(v) for v in b), strict=True)),
        anchors=anchor_names,
        floor=float(floor),
        floored=tuple(m for m, v in zip(matrix.models, mu, strict=True) if v < floor),
        dimensions=matrix.dimensions,
        adjusted=adjusted,
    )


def difficulty_parameters(
    matrix: ScoreMatrix, difficulty: Mapping[str, float] | None, anchors: int
) -> tuple[FloatArray, tuple[str, ...]]:
    """``b_j`` per dimension (given, or the anchors' mean scores) and the anchors' names.

    Raises ValueError for fewer than one anchor or a ``difficulty`` that misses a dimension
    or names an unknown one; ``b_j`` itself is not checked."""
    if difficulty is None:
        rows = difficulty_anchors(matrix, anchors)
        b = np.asarray(matrix.scores[rows].mean(axis=0), dtype=np.float64)
        return b, tuple(matrix.models[i] for i in rows)
    unknown = [d for d in difficulty if d not in matrix.dimensions]
    missing = [d for d in matrix.dimensions if d not in difficulty]
    if unknown:
        raise ValueError(f"difficulty names unknown dimension {unknown[0]!r}")
    if missing:
        raise ValueError(f"difficulty misses dimension {missing[0]!r}")
    return np.array([float(difficulty[d]) for d in matrix.dimensions], dtype=np.float64), ()


def unusable_difficulties(b: FloatArray) -> list[int]:
    """Indices ``j`` of the difficulties ``b_j`` that cannot divide scores: those that are not
    finite and positive."""
    return [j for j, value in enumerate(b.tolist()) if not (math.isfinite(value) and value > 0)]


__all__ = [
    "DEFAULT_CI_FLOOR",
    "DEFAULT_DIFFICULTY_ANCHORS",
    "CapabilityInconsistency",
    "capability_inconsistency",
    "difficulty_anchors",
    "difficulty_parameters",
    "unusable_difficulties",
]
