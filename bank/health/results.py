"""Result objects of the health statistics (arrays per item, figures per stratum).

A figure that cannot be computed is NaN in an array and ``None`` in a ``Figure``, with the
reason it is missing; never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bank.health.responses import FloatArray, IntArray


@dataclass(frozen=True, slots=True)
class Minimums:
    """Below these counts a figure is null (BHI drops benchmarks with
    fewer than 3 models)."""

    models_per_item: int = 8
    """Responding models for p, discrimination, CAS and separation."""
    models_per_stratum: int = 3
    """Models with a score for DS, EDR, RCV, S_Sta, S_Dyn and stability."""
    items_per_model: int = 1
    """Items a model must have answered in a stratum to have a score there."""
    responses_for_irt: int = 20
    """Responding models for an item's 2PL a and b."""


@dataclass(frozen=True, slots=True)
class ItemStatistics:
    """Per-item statistics, each an array over the items of a ``Responses`` (same order).

    Which input each uses: ``p``, ``difficulty``, ``spearman`` and ``cas`` read the graded
    ``y = s / 3``; ``point_biserial``, ``inversions``, ``cad`` and ``separation`` read the
    correctness ``c = [s >= 2]``; ``cas`` takes its entropy of ``mean(c)``.
    """

    n: IntArray
    """Responding models."""
    p: FloatArray
    """Mean score (Capability Alignment, eq. 1); NaN below ``models_per_item``."""
    difficulty: FloatArray
    """``1 - p``."""
    point_biserial: FloatArray
    """Pearson correlation of ``c`` with the leave-family-out ability."""
    point_biserial_low: FloatArray
    """Lower end of its 95% interval (Fisher z); an item whose upper end is below 0
    discriminates negatively."""
    point_biserial_high: FloatArray
    spearman: FloatArray
    """Spearman correlation of ``y`` with the leave-family-out ability."""
    cas: FloatArray
    """CAS_i = H2(p) * max(0, spearman(theta, y_i)) with theta over all items (eq. 2)."""
    cas_kfold: FloatArray
    """CAS_i with theta from the folds that leave out the item's fold (App. D)."""
    inversions: IntArray
    """Within-family pairs (larger fails, smaller succeeds) on this item (Benchmark² eq. 5)."""
    pairs: IntArray
    """Within-family pairs of different size that both answered (comp_q)."""
    cad: FloatArray
    """exp(-12 * inversions / pairs); NaN without a pair."""
    separation: FloatArray
    """d_q = 2 n1 (n - n1) / (n (n - 1)): the share of model pairs the item separates."""
    irt_a: FloatArray = field(default_factory=lambda: np.empty(0))
    """2PL discrimination; NaN below ``responses_for_irt``."""
    irt_b: FloatArray = field(default_factory=lambda: np.empty(0))
    """2PL difficulty; NaN below ``responses_for_irt``."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure with the count it rests on, or None with the reason."""

    value: float | None
    n: int
    reason: str | None = None

    @classmethod
    def missing(cls, reason: str, n: int = 0) -> Figure:
        return cls(None, n, reason)

    @classmethod
    def of(cls, value: float, n: int, reason: str = "undefined") -> Figure:
        """``value`` unless it is NaN or infinite (then missing with ``reason``)."""
        if np.isfinite(value):
            return cls(float(value), n)
        return cls(None, n, reason)
