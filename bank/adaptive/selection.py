"""Content-balanced, randomised item selection for the model-assisted policy.

Two steps per item:

1. **Which stratum** (:func:`next_stratum`): every stratum (discipline x type) first gets
   ``pilot`` items, then the one furthest behind its proportional quota, (n_h + 1) / W_h
   smallest: every evaluated discipline is covered in proportion to its share of the pool,
   whatever the model's answers are (content balancing in the manner of Kingsbury & Zara,
   "Procedures for selecting items for computerized adaptive tests", Applied Measurement
   in Education 2(4), 1989).
2. **Which item of it** (:func:`selection_probabilities`): at random, with probability
   proportional to ``sqrt(p (1 - p)) + floor`` for the item's predicted score p at the
   current ability estimate. sqrt(p (1 - p)) is the predicted standard deviation of the
   item's prediction error, and drawing in proportion to it minimises the variance of the
   difference estimator (:mod:`bank.adaptive.difference`; the PPS optimum of Särndal,
   Swensson & Wretman, "Model Assisted Survey Sampling", §3.6): the items the model is
   sure to pass or fail say little and are drawn less. The floor is the exposure control:
   no unseen item's probability is below ``floor / (0.5 + floor)`` times the largest, so
   the most informative items are not served to every organisation (a randomised
   selection in the spirit of Sympson-Hetter, without its calibration runs), and every
   item has a positive probability, which the estimator's unbiasedness needs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

DEFAULT_FLOOR = 0.05
"""Measured against 0.2 and 1.0 on MMLU-Pro's recorded responses (docs/methods.md): under the
stopping rule it reaches the same accuracy with fewer items."""


def next_stratum(
    *,
    drawn: Mapping[Hashable, int],
    sizes: Mapping[Hashable, int],
    pilot: int,
) -> Hashable | None:
    """The stratum the next item comes from: one below its pilot first, else the one with
    the smallest (n_h + 1) / W_h among those with unseen items; None when all are spent.
    Ties go to the first stratum in ``sizes`` order."""
    total = sum(sizes.values())
    best: Hashable | None = None
    best_key = (math.inf, math.inf)
    for key, size in sizes.items():
        n = drawn.get(key, 0)
        if n >= size:
            continue
        rank = (0.0 if n < pilot else 1.0, (n + 1) * total / size)
        if rank < best_key:
            best, best_key = key, rank
    return best


def selection_probabilities(
    predicted: Sequence[float] | NDArray[np.float64], *, floor: float = DEFAULT_FLOOR
) -> NDArray[np.float64]:
    """q over the unseen items of a stratum: proportional to sqrt(p (1 - p)) + ``floor``."""
    if floor <= 0:
        raise ValueError("floor must be positive")
    p = np.clip(np.asarray(predicted, dtype=np.float64), 0.0, 1.0)
    if p.size == 0:
        raise ValueError("no unseen item to select from")
    size = np.sqrt(p * (1.0 - p)) + floor
    return np.asarray(size / size.sum(), dtype=np.float64)
