"""Selective subsets: the items worth keeping, and how well they stand in for the bank.

Benchmark² (Qian et al., §5.4) keeps the items with a high item CAD (> 0.15) and a high
discriminability contribution (the top 35%), about 35% of a benchmark; Capability
Alignment (§6.3) adds CAS > 0.4. Each filter is a mask computed on the full bank and the
filters combine by intersection. The per-item "discriminability contribution" is not
defined by either paper; here it is the separation d_q = 2 n1 (n - n1) / (n (n - 1)), the
share of model pairs the item separates.

The top share keeps ``max(1, floor(share * N + 1/2))`` items (round half up), where N is
the number of items with a finite d_q; items tied at the cut (within 1e-9) are taken in
item order. An item with NaN in a figure a rule needs is never selected.

A subset is judged as in Benchmark² §5.4: the Kendall tau-b between the model rankings on
the full bank and on the subset, the bootstrap rank stability (eq. 7) and the DS (eq. 2)
of each, all on the models that have a score on both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from bank.health.population import top_k_mask
from bank.health.responses import BoolArray, FloatArray, Responses
from bank.health.results import Figure, ItemStatistics, Minimums

TOLERANCE = 1e-9
"""Added to the strict thresholds (CAD > 0.15, CAS > 0.4), so noise cannot flip a tie."""


class SubsetRule(StrEnum):
    """Which filters make the subset (each on the full bank; combined by intersection)."""

    CAD_DS = "cad_ds"
    """Item CAD > cad_min and in the top share by separation d_q (Benchmark² §5.4)."""
    CAS = "cas"
    """CAS_i > cas_min (Capability Alignment §6.3)."""
    CAD_DS_CAS = "cad_ds_cas"
    """Both of the above."""


class Discriminability(Protocol):
    """DS over the per-model mean scores (fractions in [0, 1]; Benchmark² eq. 2)."""

    def __call__(self, scores: FloatArray, /) -> Figure | float: ...


class RankStability(Protocol):
    """Bootstrap rank stability over the selected items (Benchmark² eq. 7)."""

    def __call__(
        self, responses: Responses, *, iterations: int, seed: int, items: BoolArray
    ) -> Figure | float: ...


def top_share_count(n: int, share: float) -> int:
    """How many of ``n`` ranked items a top ``share`` keeps: round half up, at least 1
    (0 when there is nothing to rank)."""
    if n <= 0:
        return 0
    return max(1, math.floor(share * n + 0.5))


def separation_mask(separation: FloatArray, share: float) -> BoolArray:
    """The top ``share`` of the items with a finite d_q, ties broken by item index."""
    values = np.asarray(separation, dtype=np.float64)
    return top_k_mask(values, top_share_count(int(np.isfinite(values).sum()), share))


def select_subset(
    stats: ItemStatistics,
    rule: SubsetRule,
    *,
    top_share: float = 0.35,
    cad_min: float = 0.15,
    cas_min: float = 0.4,
) -> BoolArray:
    """The items of the subset ``rule`` picks (a mask over the items of ``stats``).

    ``cad_min`` and ``cas_min`` are strict (``>``, with a 1e-9 tolerance). Raises
    ``ValueError`` for a share outside (0, 1].
    """
    rule = SubsetRule(rule)
    if not 0.0 < top_share <= 1.0:
        raise ValueError(f"top_share must be in (0, 1], not {top_share}")
    keep = np.ones(stats.p.shape[0], dtype=bool)
    with np.errstate(invalid="ignore"):
        if rule in (SubsetRule.CAD_DS, SubsetRule.CAD_DS_CAS):
            keep &= stats.cad > cad_min + TOLERANCE
            keep &= separation_mask(stats.separation, top_share)
        if rule in (SubsetRule.CAS, SubsetRule.CAD_DS_CAS):
            keep &= stats.cas > cas_min + TOLERANCE
    return keep


@dataclass(frozen=True, slots=True)
class SubsetEvaluation:
    """How a subset compares with the full bank (Benchmark² §5.4, Table 2)."""

    n_items: int
    """Items in the full bank."""
    retained: int
    """Items in the subset."""
    retention: float | None
    """``retained / n_items``; None for an empty bank."""
    n_models: int
    """Models with a score on both the full bank and the subset (every figure uses these)."""
    models_without_subset_score: int
    """Models with a score on the full bank but none on the subset (left out)."""
    rank_tau: Figure
    """Kendall tau-b between the models' mean scores on the full bank and on the subset."""
    stability_subset: Figure
    stability_full: Figure
    ds_subset: Figure
    ds_full: Figure

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; each figure as ``{"value", "n", "reason"}``."""
        figures = ("rank_tau", "stability_subset", "stability_full", "ds_subset", "ds_full")
        out: dict[str, Any] = {
            "n_items": self.n_items,
            "retained": self.retained,
            "retention": self.retention,
            "n_models": self.n_models,
            "models_without_subset_score": self.models_without_subset_score,
        }
        for name in figures:
            figure: Figure = getattr(self, name)
            out[name] = {"value": figure.value, "n": figure.n, "reason": figure.reason}
        return out


def rank_tau(full: FloatArray, subset: FloatArray, *, minimum: int = 3) -> Figure:
    """Kendall tau-b between two score vectors over the models finite in both.

    Missing below ``minimum`` models, and when either vector is constant (tau undefined).
    """
    both = np.isfinite(full) & np.isfinite(subset)
    n = int(both.sum())
    if n < minimum:
        return Figure.missing(f"fewer than {minimum} models with both scores", n)
    if np.ptp(full[both]) == 0 or np.ptp(subset[both]) == 0:
        return Figure.missing("constant scores: tau is undefined", n)
    from scipy import (
        stats as scipy_stats,  # scipy.stats takes ~1 s to import: not at every CLI start
    )

    tau = scipy_stats.kendalltau(full[both], subset[both]).statistic
    return Figure.of(float(tau), n)


def evaluate_subset(
    responses: Responses,
    subset_mask: BoolArray,
    *,
    discriminability: Discriminability,
    stability: RankStability,
    iterations: int = 100,
    seed: int = 0,
    minimums: Minimums | None = None,
) -> SubsetEvaluation:
    """Retention, rank tau-b, stability and DS of a subset against the full bank.

    All figures are computed on the models that have a score on both (so the two sides
    rest on one population). ``discriminability`` receives those models' mean scores on
    each side; ``stability`` receives the responses of those models with the item mask
    (all items for the full bank), ``iterations`` and ``seed``. A callable may return a
    ``Figure`` or a float (NaN: missing). Rank tau needs ``minimums.models_per_stratum``.
    """
    limits = minimums or Minimums()
    subset_mask = np.asarray(subset_mask, dtype=bool)
    if subset_mask.shape != (responses.n_items,):
        raise ValueError(
            f"the subset mask has shape {subset_mask.shape}, not ({responses.n_items},)"
        )
    full_scores = responses.abilities()
    subset_scores = responses.abilities(subset_mask[responses.item])
    both = np.isfinite(full_scores) & np.isfinite(subset_scores)
    n_models = int(both.sum())
    figures = _figures(
        responses.select(models=both),
        subset_mask,
        (full_scores[both], subset_scores[both]),
        discriminability=discriminability,
        stability=stability,
        iterations=iterations,
        seed=seed,
        minimum=limits.models_per_stratum,
    )
    return SubsetEvaluation(
        n_items=responses.n_items,
        retained=int(subset_mask.sum()),
        retention=float(subset_mask.mean()) if responses.n_items else None,
        n_models=n_models,
        models_without_subset_score=int((np.isfinite(full_scores) & ~both).sum()),
        rank_tau=rank_tau(full_scores, subset_scores, minimum=limits.models_per_stratum),
        **figures,
    )


def _figures(
    common: Responses,
    subset_mask: BoolArray,
    scores: tuple[FloatArray, FloatArray],
    *,
    discriminability: Discriminability,
    stability: RankStability,
    iterations: int,
    seed: int,
    minimum: int,
) -> dict[str, Figure]:
    """Stability and DS of the subset and the full bank on the common models."""
    n = common.n_models
    names = ("stability_subset", "stability_full", "ds_subset", "ds_full")
    if n < minimum:
        return dict.fromkeys(names, Figure.missing(f"fewer than {minimum} models", n))
    every_item = np.ones(common.n_items, dtype=bool)
    full, subset = scores
    return {
        "stability_subset": _figure(
            stability(common, iterations=iterations, seed=seed, items=subset_mask), n
        ),
        "stability_full": _figure(
            stability(common, iterations=iterations, seed=seed, items=every_item), n
        ),
        "ds_subset": _figure(discriminability(subset), n),
        "ds_full": _figure(discriminability(full), n),
    }


def _figure(value: Figure | float, n: int) -> Figure:
    if isinstance(value, Figure):
        return value
    return Figure.of(float(value), n)
