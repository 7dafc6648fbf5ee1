"""The sequential model-assisted estimator of a stratum's total (Des Raj's, with predictions).

Items of a stratum are drawn one at a time without replacement; draw k picks item j of the
still unseen items U_k with probability q_k(j), which may depend on everything seen before
(the IRT ability estimate, the other strata). With predictions p_k(j) of the scores, fixed
before draw k, the draw's estimate of the stratum total T = sum_j y_j is

    t_k = sum_{i < k} y_i  +  sum_{j in U_k} p_k(j)  +  (y_k - p_k(k)) / q_k(k),

the scores already drawn, plus the predictions of the unseen, plus the drawn item's
prediction error inflated by its probability (the difference estimator of Särndal,
Swensson & Wretman, "Model Assisted Survey Sampling", 1992, §6.3, in the ordered form of
Des Raj, "Some estimators in sampling with varying probabilities without replacement",
JASA 51, 1956). Given the past, E[t_k] = T whatever the predictions are: the estimator is
unbiased when the IRT model is wrong, and good predictions only make it precise. So every
t_k - T is a martingale difference, and the plain mean That = sum_k t_k / n is unbiased
too (weights normalised by their sum would not be: a draw's share would depend on later
draws, and exact enumeration found E = 2.059 for T = 2; the replay's MAE was the same
with equal weights). Its variance is estimated, as Des Raj's, by

    v_o = sum_k (t_k - That)^2 / (n (n - 1)),

which takes in the error of the ability estimate and of the item parameters (both only
move the residuals); it is pooled with :data:`PRIOR_DRAWS` pseudo-draws of the variance the
predictions imply, v_p = sum_k 1 / (n^2 w_k), with w_k the inverse of the draw's predicted
conditional variance, sum_{U_k} s / q - sum_{U_k} s with s = max(p (1 - p),
:data:`MIN_ITEM_VARIANCE`), so that a stratum whose few draws happen to agree does not
claim a tiny variance.

Pure logic: :class:`StratumDraw` is one draw's record (what the server stores),
:func:`stratum_estimate` one stratum's total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_DRAW_VARIANCE = 1e-9
"""Floor of a draw's predicted variance (a draw of the last unseen item has none)."""
MIN_ITEM_VARIANCE = 0.1
"""Floor of an item's predicted score variance p (1 - p) in a draw's weight: a confident
prediction that is wrong (p near 1 for a model that fails every item) would otherwise give
its draw nearly all the weight."""
PRIOR_DRAWS = 2.0
"""Pseudo-draws of the predicted variance pooled into the estimated one."""


@dataclass(frozen=True, slots=True)
class StratumDraw:
    """One draw of a stratum, as fixed when it was made; ``score`` arrives later.

    Attributes
    ----------
    probability : float
        q_k of the drawn item, in (0, 1].
    predicted : float
        p_k of the drawn item, in [0, 1].
    unseen_predicted : float
        sum of p_k over the stratum's unseen items at the draw (the drawn one included).
    weight : float
        w_k > 0, the inverse of the draw's predicted conditional variance (fixed before
        the draw; it enters the predicted part of the variance).
    score : float or None
        y_k in [0, 1] once scored.
    """

    probability: float
    predicted: float
    unseen_predicted: float
    weight: float
    score: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"probability must be in (0, 1], got {self.probability}")
        if not self.weight > 0.0:
            raise ValueError(f"weight must be positive, got {self.weight}")

    def scored(self, score: float) -> StratumDraw:
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"scores must be in [0, 1], got {score}")
        return StratumDraw(
            self.probability, self.predicted, self.unseen_predicted, self.weight, score
        )


@dataclass(frozen=True, slots=True)
class TotalEstimate:
    """A stratum's estimated total, its estimated variance and the draws behind it."""

    total: float
    variance: float
    n: int


def draw_weight(predicted: Sequence[float], probabilities: Sequence[float]) -> float:
    """1 / the predicted conditional variance of a draw over the unseen items (see the
    module docstring; each p (1 - p) at least :data:`MIN_ITEM_VARIANCE`), floored at
    :data:`MIN_DRAW_VARIANCE`."""
    spreads = [max(p * (1.0 - p), MIN_ITEM_VARIANCE) for p in predicted]
    spread = math.fsum(v / q for v, q in zip(spreads, probabilities, strict=True))
    spread -= math.fsum(spreads)
    return 1.0 / max(spread, MIN_DRAW_VARIANCE)


def stratum_estimate(draws: Sequence[StratumDraw], *, size: int) -> TotalEstimate | None:
    """Des Raj's estimate (the mean of the t_k) of the total of a stratum of ``size``
    items from its draws in draw order; only the leading run of scored draws counts (t_k needs every
    earlier score). None without a scored draw.

    With a single usable draw the variance is the largest a total of ``size`` scores in
    [0, 1] can have around it, (size / 2)^2; with every item drawn and scored the total is
    exact (variance 0)."""
    usable: list[StratumDraw] = []
    for draw in draws:
        if draw.score is None:
            break
        usable.append(draw)
    if not usable:
        return None
    if len(usable) == size:
        return TotalEstimate(math.fsum(d.score or 0.0 for d in usable), 0.0, size)
    estimates: list[float] = []
    seen = 0.0
    for draw in usable:
        score = draw.score or 0.0
        estimates.append(seen + draw.unseen_predicted + (score - draw.predicted) / draw.probability)
        seen += score
    n = len(usable)
    total = math.fsum(estimates) / n
    if n == 1:
        return TotalEstimate(total, (size / 2.0) ** 2, 1)
    observed = math.fsum((t - total) ** 2 for t in estimates) / (n * (n - 1))
    predicted = math.fsum(1.0 / d.weight for d in usable) / (n * n)
    variance = (n * observed + PRIOR_DRAWS * predicted) / (n + PRIOR_DRAWS)
    return TotalEstimate(total, variance, n)
