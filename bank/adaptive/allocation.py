"""Neyman allocation under a cost budget (Cochran 1977, §5.5).

For strata h with weights W_h = N_h / N, score standard deviations S_h and per-item costs
c_h, the allocation minimising the variance of the stratified mean for a total cost C is

    n_h = C * (W_h S_h / sqrt(c_h)) / sum_k (W_k S_k sqrt(c_k)).

The pilot's S_h is noisy (a pilot of five 0/1 scores that are all 1 says S_h = 0), so it
is pulled toward a prior and floored before it is used: :func:`shrunk_sd` pools the
variance with a prior variance; :func:`bounded_sd`, which the policy uses for scores in
[0, 1], shrinks the stratum's *mean* toward a prior mean and takes the largest sd a
population of [0, 1] scores with that mean can have, sqrt(mu (1 - mu)) (attained by 0/1
scores, so exact for objective items and an upper bound for judged ones).
"""

from __future__ import annotations

import math


def shrunk_sd(
    sample_sd: float, n: int, *, prior_sd: float, prior_weight: float, floor: float
) -> float:
    """The pilot's standard deviation shrunk toward ``prior_sd`` and floored.

    The variances are pooled as if the prior were ``prior_weight`` pseudo-observations:
    ``S^2 = (n s^2 + k S0^2) / (n + k)``; the result is at least ``floor``. With ``n = 0``
    the prior (floored) is returned.
    """
    if n < 0 or prior_weight < 0 or floor < 0:
        raise ValueError("n, prior_weight and floor must be non-negative")
    if n + prior_weight == 0:
        return max(prior_sd, floor)
    pooled = (n * sample_sd**2 + prior_weight * prior_sd**2) / (n + prior_weight)
    return max(math.sqrt(pooled), floor)


def bounded_sd(
    sample_mean: float, n: int, *, prior_mean: float, prior_weight: float, floor: float
) -> float:
    """``max(floor, sqrt(mu (1 - mu)))`` for the shrunk mean
    ``mu = (n ybar + k mu0) / (n + k)`` of scores in [0, 1]."""
    if n < 0 or prior_weight < 0 or floor < 0:
        raise ValueError("n, prior_weight and floor must be non-negative")
    if not (0.0 <= sample_mean <= 1.0 and 0.0 <= prior_mean <= 1.0):
        raise ValueError("means of [0, 1] scores must lie in [0, 1]")
    if n + prior_weight == 0:
        mu = prior_mean
    else:
        mu = (n * sample_mean + prior_weight * prior_mean) / (n + prior_weight)
    return max(math.sqrt(mu * (1.0 - mu)), floor)


def marginal_gain(weight: float, sd: float, n: int, cost: float) -> float:
    """Variance removed per unit cost by one more item in a stratum holding ``n`` items.

    The stratum's term of the stratified variance is ``W^2 S^2 (1/n - 1/N)``; one more item
    removes ``W^2 S^2 (1/n - 1/(n+1))`` whatever N is, so choosing the stratum with the
    largest gain item after item converges to the Neyman shares (the greedy form of the
    allocation, exact for integer budgets; Cochran 1977, §5.5). A stratum with no item
    yet has infinite gain.
    """
    if n == 0:
        return math.inf
    return weight**2 * sd**2 * (1.0 / n - 1.0 / (n + 1)) / cost
