"""Scalar statistics of a stratum (or of a set of strata) from per-model score vectors.

Every function is pure and takes plain arrays: one score per model (NaN where a model has no
score, which is dropped, never read as 0), or a strata × models matrix. A figure that is not
defined by its formula is NaN, never a guess. Conventions shared by all of them:

- "standard deviation" is the population SD (ddof = 0) unless a formula says otherwise;
- Kendall's tau is tau-b (ties handled);
- a threshold comparison is strict and tolerant of rounding: a pair counts iff
  ``|a - b| > threshold + 1e-9``, so an exact tie at the threshold never counts.

Sources: Benchmark² (Qian et al.) for DS, CAD, CBRC and BQS; Benchmark Health Index
(Zhu et al.) for EDR, RCV, S_Disc, the LOBO ability, S_Sta, S_Dyn, S_AS, CRITIC and BHI;
Capability Alignment for the overlap coefficient and the difficulty bins.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from bank.health.responses import FloatArray, IntArray

TOLERANCE = 1e-9
"""Added to every strict threshold so that floating-point noise cannot flip an exact tie."""

CAD_LAMBDA = 12.0
"""lambda of Benchmark² (Qian et al.) eq. 6, chosen in their App. B (Table 9)."""

PUBLISHED_SDM_WEIGHTS = (0.5250, 0.4750)
"""(w_EDR, w_RCV) that the SDM rule (Benchmark Health Index (Zhu et al.), App. B eqs. 16-18)
gives on their 106 benchmarks. With about ten strata the SDM weights computed from the data
are unstable; these fixed weights are the alternative."""

PUBLISHED_BHI_WEIGHTS = (0.3298, 0.3574, 0.3128)
"""(w_Disc, w_AS, w_Imp): the CRITIC weights of Benchmark Health Index (Zhu et al.), §5.1
(eq. 15), applied to the dimension scores as they stand."""

PRIVATE_BANK_BHI_WEIGHTS = (
    PUBLISHED_BHI_WEIGHTS[0] / (PUBLISHED_BHI_WEIGHTS[0] + PUBLISHED_BHI_WEIGHTS[1]),
    PUBLISHED_BHI_WEIGHTS[1] / (PUBLISHED_BHI_WEIGHTS[0] + PUBLISHED_BHI_WEIGHTS[1]),
)
"""(w_Disc, w_AS) ≈ (0.4799, 0.5201) for a two-dimension index of a private question bank.

The Impact dimension of Benchmark Health Index (Zhu et al.) (§3.4: industry adoption and
GitHub / Hugging Face community signals) does not exist for a private bank, so the index
keeps Discriminability and Anti-Saturation. Their published CRITIC weights 0.3298 and 0.3574
are renormalised to sum to 1, which keeps the paper's ratio between the two (this is our
variant, not a weighting the paper publishes). ``critic_weights`` on the bank's own strata is
the data-driven alternative; with few strata its weights are unstable."""


def _finite(values: ArrayLike) -> FloatArray:
    """The finite entries of a 1-d vector, as float64."""
    array = np.asarray(values, dtype=np.float64).ravel()
    return array[np.isfinite(array)]


def separated_pairs(values: ArrayLike, threshold: float) -> int:
    """Number of pairs i < j with ``|x_i - x_j| > threshold + 1e-9`` (NaN entries dropped).

    O(m log m): after sorting, each entry counts the later entries above it by more than the
    threshold.
    """
    ordered = np.sort(_finite(values))
    above = np.searchsorted(ordered, ordered + threshold + TOLERANCE, side="right")
    return int(np.sum(ordered.size - above))


# --- Benchmark² (Qian et al.) ---------------------------------------------------------------


def discriminability(scores: ArrayLike, eps: float = 0.02) -> float:
    """DS of a stratum: Benchmark² (Qian et al.), §3.2 eq. 2.

    ``DS = (sigma / mean) * sqrt(#{j < k : |s_j - s_k| > eps} / (m (m - 1) / 2))`` over the m
    model scores given as fractions in [0, 1] (eps = 0.02 is 2 points); sigma is the
    population SD. NaN entries (models without a score) are dropped. NaN when m < 2 or the
    mean is 0; 0 when all scores are equal. DS is not bounded above.
    """
    values = _finite(scores)
    m = values.size
    mean = float(np.mean(values)) if m else 0.0
    if m < 2 or mean == 0.0:
        return float("nan")
    share = separated_pairs(values, eps) / (m * (m - 1) / 2)
    return float(np.std(values) / mean * np.sqrt(share))


def cad_of_rate(rate: float, lam: float = CAD_LAMBDA) -> float:
    """CAD = exp(-lambda * inv_rate): Benchmark² (Qian et al.), §3.3 eq. 6 (lambda = 12).

    In (0, 1], higher is better; NaN for a NaN rate.
    """
    return float(np.exp(-lam * rate))


def pooled_cad(inversions: ArrayLike, pairs: ArrayLike, lam: float = CAD_LAMBDA) -> float:
    """CAD of a stratum pooled over items and families: Benchmark² (Qian et al.), eqs. 4, 6.

    ``inv_rate = sum inversions / sum pairs`` (eq. 4: a pooled rate, not a mean of per-family
    or per-item rates), then ``exp(-12 * inv_rate)``. ``inversions`` and ``pairs`` are the
    per-item (or per-family) counts of within-family inversions and of within-family pairs
    that both answered. NaN when there is no pair at all.
    """
    total_pairs = float(np.sum(np.asarray(pairs, dtype=np.float64)))
    if total_pairs <= 0:
        return float("nan")
    return cad_of_rate(float(np.sum(np.asarray(inversions, dtype=np.float64))) / total_pairs, lam)


def peer_taus(scores: ArrayLike, peers: Sequence[ArrayLike]) -> FloatArray:
    """Kendall tau-b between a stratum's model scores and each peer's, over the models both
    score; NaN for a peer where tau is undefined (a constant vector, fewer than 2 models)."""
    from scipy import stats  # scipy.stats takes ~1 s to import: not at every CLI start

    target = np.asarray(scores, dtype=np.float64)
    taus = np.full(len(peers), np.nan)
    for index, peer in enumerate(peers):
        other = np.asarray(peer, dtype=np.float64)
        if other.shape != target.shape:
            raise ValueError("a peer must score the same models as the stratum")
        both = np.isfinite(target) & np.isfinite(other)
        a, b = target[both], other[both]
        if a.size >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
            taus[index] = stats.kendalltau(a, b).statistic
    return taus


def ranking_consistency(scores: ArrayLike, peers: Sequence[ArrayLike]) -> float:
    """CBRC: Benchmark² (Qian et al.), §3.1 eq. 1.

    The mean Kendall tau-b between this stratum's model scores and each peer benchmark's (same
    models, same order; Kendall on scores equals Kendall on rankings). A peer on which tau is
    undefined (constant scores, fewer than 2 common models) is dropped; NaN without any peer
    left. In [-1, 1]; the paper's sigma is the population SD of ``peer_taus``.
    """
    taus = peer_taus(scores, peers)
    taus = taus[np.isfinite(taus)]
    return float(np.mean(taus)) if taus.size else float("nan")


def quality_score(cbrc: float, ds: float, cad: float) -> float:
    """BQS: Benchmark² (Qian et al.), §3.5 eq. 8 with App. C eqs. 9-10.

    ``BQS = 0.3 * (CBRC + 1) / 2 + 0.3 * DS + 0.4 * CAD``. DS is not clipped, so BQS can
    exceed 1; NaN if any component is NaN.
    """
    return 0.3 * (cbrc + 1.0) / 2.0 + 0.3 * ds + 0.4 * cad


# --- Benchmark Health Index (Zhu et al.): one stratum ---------------------------------------


def effective_differentiation_ratio(scores_100: ArrayLike) -> float:
    """EDR: Benchmark Health Index (Zhu et al.), §3.1.1 eq. 1.

    The share of model pairs whose scores (0-100 scale) differ by more than
    ``delta = 0.02 * (max - min)``, an adaptive 2% of the observed range. NaN entries are
    dropped; NaN with fewer than 2 scores; 0 when all scores are equal.
    """
    values = _finite(scores_100)
    n = values.size
    if n < 2:
        return float("nan")
    delta = 0.02 * float(np.ptp(values))
    return separated_pairs(values, delta) / (n * (n - 1) / 2)


def robust_spread(scores_100: ArrayLike) -> float:
    """RCV: Benchmark Health Index (Zhu et al.), §3.1.2 eq. 2.

    ``(P90 - P10) / 100`` over the model scores on the 0-100 scale (despite its name nothing
    is divided by the mean). The percentile method is not given in the paper: numpy's default
    ``linear`` (Hyndman-Fan type 7) is used. NaN entries dropped; NaN with fewer than 2 scores.
    """
    values = _finite(scores_100)
    if values.size < 2:
        return float("nan")
    p10, p90 = np.percentile(values, [10.0, 90.0])
    return float((p90 - p10) / 100.0)


def lobo_ability(scores: ArrayLike) -> FloatArray:
    """theta_i^(-b): Benchmark Health Index (Zhu et al.), §3.2 eqs. 4-5.

    ``scores`` is strata × models, NaN where a model has no score. For every held-out stratum
    b and model i: the LOBO win rate (eq. 4)
    ``W = sum_{b' != b} (wins + 0.5 ties) / sum_{b' != b} (N_b' - 1)``
    over the other strata b' model i appears on (wins and ties against the other models on b';
    scores within 1e-9 tie), times the fourth-root log-balance factor (eq. 5)
    ``(ln(1 + n_i) / ln(1 + N_B)) ** 0.25`` with n_i the number of those strata and
    N_B = number of strata - 1. W = 0 (so theta = 0) when no battle is left. Returned for
    every (stratum, model) pair, also where the model has no score on the held-out stratum.
    """
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError("scores must be strata × models")
    present = np.isfinite(matrix)
    points = np.zeros(matrix.shape)
    for stratum, row in enumerate(matrix):
        on = present[stratum]
        values = row[on]
        gap = values[:, None] - values[None, :]
        wins = np.sum(gap > TOLERANCE, axis=1)
        ties = np.sum(np.abs(gap) <= TOLERANCE, axis=1) - 1
        points[stratum, on] = wins + 0.5 * ties
    battles = np.where(present, np.sum(present, axis=1, keepdims=True) - 1, 0).astype(float)
    left_points = points.sum(axis=0) - points
    left_battles = battles.sum(axis=0) - battles
    win_rate = np.where(left_battles > 0, left_points / np.maximum(left_battles, 1), 0.0)
    others = matrix.shape[0] - 1
    if others < 1:
        return np.zeros(matrix.shape)
    left_strata = present.sum(axis=0) - present
    balance = (np.log1p(left_strata) / np.log1p(others)) ** 0.25
    return np.asarray(win_rate * balance, dtype=np.float64)


def static_resistance(scores01: ArrayLike, theta: ArrayLike) -> float:
    """S_Sta: Benchmark Health Index (Zhu et al.), §3.3.1 eq. 6.

    ``1 - sum_i s_i theta_i / sum_i theta_i`` over the models with a score in [0, 1] on the
    stratum, theta_i being their ``lobo_ability`` for this stratum (the formula gives strong
    models more weight, whatever the paper's prose says). When sum theta = 0 the unweighted
    mean is used. NaN without any model.
    """
    values = np.asarray(scores01, dtype=np.float64)
    weights = np.asarray(theta, dtype=np.float64)
    if values.shape != weights.shape:
        raise ValueError("scores01 and theta must have one entry per model")
    keep = np.isfinite(values) & np.isfinite(weights)
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return float("nan")
    total = float(np.sum(weights))
    mean = float(np.sum(values * weights) / total) if total > 0 else float(np.mean(values))
    return 1.0 - mean


def dynamic_saturation(scores01: ArrayLike, days: ArrayLike, s_sta: float) -> float:
    """S_Dyn, the 30-day "conquest rate": Benchmark Health Index (Zhu et al.), §3.3.2 eq. 7.

    Fit ``y = k t + d`` by ordinary least squares (y = score in [0, 1], t = the model's date
    in days, e.g. release or first evaluation as a day number), then
    ``S_Dyn = max(0, 1 - (mean(y) + 30 k))`` with the unweighted mean over the models. When
    k < 0, or k is undefined (fewer than 2 distinct dates), S_Dyn = ``s_sta``. Models with a
    NaN score or date are dropped; NaN without any model.
    """
    y = np.asarray(scores01, dtype=np.float64)
    t = np.asarray(days, dtype=np.float64)
    if y.shape != t.shape:
        raise ValueError("scores01 and days must have one entry per model")
    keep = np.isfinite(y) & np.isfinite(t)
    y, t = y[keep], t[keep]
    if y.size == 0:
        return float("nan")
    if np.unique(t).size < 2:
        return s_sta
    centred = t - t.mean()
    slope = float(np.sum(centred * (y - y.mean())) / np.sum(centred**2))
    if slope < 0:
        return s_sta
    return max(0.0, 1.0 - (float(np.mean(y)) + 30.0 * slope))


def anti_saturation(s_sta: float, s_dyn: float) -> float:
    """S_AS = 0.8 S_Sta + 0.2 S_Dyn: Benchmark Health Index (Zhu et al.), eq. 8."""
    return 0.8 * s_sta + 0.2 * s_dyn


# --- Capability Alignment -------------------------------------------------------------------


def overlap(abilities: ArrayLike, difficulties: ArrayLike, bins: int = 20) -> float:
    """OVL of the model abilities and the item difficulties: Capability Alignment, §3.1.

    ``OVL = integral of min(f, g)``. The paper does not name its density estimator; this is
    a common histogram of ``bins`` equal bins on [0, 1] (the last bin closed; an edge is
    reached within 1e-9), each histogram
    normalised to sum to 1, and ``OVL = sum_b min(f_b, g_b)`` in [0, 1]. NaN entries are
    dropped; NaN when either side is empty. Raises ``ValueError`` for a value outside [0, 1].
    """
    left, right = _finite(abilities), _finite(difficulties)
    if left.size == 0 or right.size == 0:
        return float("nan")
    both = np.concatenate([left, right])
    if np.any((both < 0) | (both > 1)):
        raise ValueError("abilities and difficulties must lie in [0, 1]")
    f = np.bincount(_bin_index(left, bins), minlength=bins) / left.size
    g = np.bincount(_bin_index(right, bins), minlength=bins) / right.size
    return float(np.sum(np.minimum(f, g)))


def _bin_index(values: FloatArray, bins: int) -> IntArray:
    """Equal-width bin of each value in [0, 1] (the last bin closed); an edge is reached
    within 1e-9, so that 0.3 falls in [0.3, 0.35) whatever its float rounding."""
    return np.clip(np.floor(values * bins + TOLERANCE), 0, bins - 1).astype(np.int64)


def difficulty_bins(p: ArrayLike) -> IntArray:
    """Difficulty bin of each item: Capability Alignment, §3.1 (Fig. 2) and App. A.

    Four fixed equal-width bins of the difficulty ``1 - p``: 0 = easy [0, .25), 1 = medium
    [.25, .5), 2 = hard [.5, .75), 3 = very hard [.75, 1] (the paper does not give its edges;
    "fixed difficulty bins" argues against quantiles). An edge is reached within 1e-9.
    -1 where p is NaN. The caller computes each bin's figures (DS of the per-model bin
    scores, mean CAS).
    """
    values = np.asarray(p, dtype=np.float64)
    known = np.isfinite(values)
    index = _bin_index(1.0 - np.where(known, values, 0.0), 4)
    return np.where(known, index, -1).astype(np.int64)


# --- Benchmark Health Index (Zhu et al.): across units (strata as "benchmarks") -------------


def min_max(x: ArrayLike) -> FloatArray:
    """``(x - min) / (max - min)`` across units: Benchmark Health Index (Zhu et al.), eq. 16.

    NaN entries stay NaN. All NaN when fewer than 2 finite values or all equal (a constant
    column cannot be normalised).
    """
    values = np.asarray(x, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size < 2 or np.ptp(finite) == 0:
        return np.full(values.shape, np.nan)
    return np.asarray((values - finite.min()) / np.ptp(finite), dtype=np.float64)


def sdm_weights(edr: ArrayLike, rcv: ArrayLike) -> tuple[float, float]:
    """(w_EDR, w_RCV) by the SDM rule: Benchmark Health Index (Zhu et al.), App. B eqs. 16-18.

    Each indicator is min-max normalised across the units (eq. 16); sigma_k is the population
    SD of the normalised values (eq. 17); ``w_k = sigma_k / (sigma_EDR + sigma_RCV)``
    (eq. 18). Units missing either indicator are left out. NaN weights when undefined.
    """
    e, r = np.asarray(edr, dtype=np.float64), np.asarray(rcv, dtype=np.float64)
    if e.shape != r.shape:
        raise ValueError("edr and rcv must have one entry per unit")
    keep = np.isfinite(e) & np.isfinite(r)
    sigma_e = float(np.std(min_max(e[keep]))) if keep.sum() else float("nan")
    sigma_r = float(np.std(min_max(r[keep]))) if keep.sum() else float("nan")
    total = sigma_e + sigma_r
    if not total > 0:
        return float("nan"), float("nan")
    return sigma_e / total, sigma_r / total


def discrimination_dimension(
    edr: ArrayLike, rcv: ArrayLike, weights: tuple[float, float] | None = None
) -> FloatArray:
    """S_Disc per unit: Benchmark Health Index (Zhu et al.), §3.1.3 eq. 3.

    ``S_Disc = w_EDR * Norm(EDR) + w_RCV * Norm(RCV)`` with min-max normalisation across the
    units. ``weights`` (w_EDR, w_RCV): None computes them by ``sdm_weights`` from the same
    units; ``PUBLISHED_SDM_WEIGHTS`` fixes them at the paper's values.
    """
    w_edr, w_rcv = sdm_weights(edr, rcv) if weights is None else weights
    return np.asarray(w_edr * min_max(edr) + w_rcv * min_max(rcv), dtype=np.float64)


def critic_weights(dimensions: ArrayLike) -> FloatArray:
    """CRITIC weights of k dimensions: Benchmark Health Index (Zhu et al.), App. D eqs. 22-25.

    ``dimensions`` is units × k. ``sigma_j`` is the SD with 1/(M-1) (eq. 22),
    ``R_j = sum_k (1 - r_jk)`` with r the Pearson correlation between dimensions (eq. 23),
    ``C_j = sigma_j R_j`` (eq. 24), ``w_j = C_j / sum C`` (eq. 25). The dimension scores are
    used as they stand, WITHOUT the min-max step App. D's text describes: only that
    reproduces the published 0.3298 / 0.3574 / 0.3128 from their Table 7. Units with a NaN
    are left out; NaN weights with fewer than 3 units, a constant dimension, or perfectly
    correlated dimensions (no information at all).
    """
    matrix = np.asarray(dimensions, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError("dimensions must be units × k")
    matrix = matrix[np.all(np.isfinite(matrix), axis=1)]
    k = matrix.shape[1]
    if matrix.shape[0] < 3 or np.any(np.ptp(matrix, axis=0) == 0):
        return np.full(k, np.nan)
    sigma = np.std(matrix, axis=0, ddof=1)
    correlation = np.atleast_2d(np.corrcoef(matrix, rowvar=False))
    information = sigma * np.sum(1.0 - correlation, axis=1)
    total = float(np.sum(information))
    if not total > 1e-12:  # perfectly correlated dimensions: no conflict to weigh
        return np.full(k, np.nan)
    return np.asarray(information / total, dtype=np.float64)


def health_index(dimensions: ArrayLike, weights: ArrayLike) -> FloatArray:
    """BHI per unit: Benchmark Health Index (Zhu et al.), §5.1 eq. 15.

    ``BHI = sum_j w_j * S_j`` over the dimension scores as they stand (units × k), e.g.
    (S_Disc, S_AS, S_Imp) with ``PUBLISHED_BHI_WEIGHTS``, or (S_Disc, S_AS) with
    ``PRIVATE_BANK_BHI_WEIGHTS``. NaN where a unit misses a dimension.
    """
    matrix = np.asarray(dimensions, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != w.size:
        raise ValueError("dimensions must be units × k with one weight per dimension")
    return np.asarray(matrix @ w, dtype=np.float64)
