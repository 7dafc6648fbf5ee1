"""Bootstrap rank stability of a stratum, and a family bootstrap for any statistic.

Variants of one question are dependent, so the resampled unit is the item FAMILY, never the
item: a family drawn twice counts twice, with all of its (selected) items. One draw serves
every model, as in Benchmark² (Qian et al.), §3.4 eq. 7.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bank.health.responses import BoolArray, FloatArray, IntArray, Responses
from bank.health.results import Figure

_TIE = 1e-9
"""Scores this close are tied in a ranking."""


@dataclass(frozen=True, slots=True)
class _FamilyCells:
    """The observed cells summed per (family, model): a resample only reweights these."""

    family: IntArray
    """Per row, the index of its family among the selected families (0..n_families-1)."""
    model: IntArray
    total: FloatArray
    """Sum of y over the row's cells."""
    count: FloatArray
    """Number of the row's cells."""
    n_families: int


def _family_cells(responses: Responses, items: BoolArray | None) -> _FamilyCells:
    keep = np.ones(responses.n_items, bool) if items is None else np.asarray(items, bool)
    if keep.shape != (responses.n_items,):
        raise ValueError("items must select among the items of the responses")
    cells = keep[responses.item]
    families, family_of_item = np.unique(responses.family[keep], return_inverse=True)
    item_family = np.full(responses.n_items, -1, dtype=np.int64)
    item_family[keep] = family_of_item
    key = item_family[responses.item[cells]] * responses.n_models + responses.model[cells]
    rows, row_of_cell = np.unique(key, return_inverse=True)
    return _FamilyCells(
        family=(rows // responses.n_models).astype(np.int64),
        model=(rows % responses.n_models).astype(np.int64),
        total=np.bincount(row_of_cell, responses.score[cells], minlength=rows.size).astype(
            np.float64
        ),
        count=np.bincount(row_of_cell, minlength=rows.size).astype(np.float64),
        n_families=int(families.size),
    )


def _resampled_scores(
    cells: _FamilyCells, n_models: int, rng: np.random.Generator, iterations: int
) -> FloatArray:
    """iterations × models: each model's mean y over its cells in each family resample
    (weighted by how often each family was drawn); NaN where it has no cell."""
    out = np.full((iterations, n_models), np.nan)
    for k in range(iterations):
        drawn = rng.integers(0, cells.n_families, size=cells.n_families)
        multiplicity = np.bincount(drawn, minlength=cells.n_families).astype(np.float64)
        weight = multiplicity[cells.family]
        totals = np.bincount(cells.model, weight * cells.total, minlength=n_models)
        counts = np.bincount(cells.model, weight * cells.count, minlength=n_models)
        out[k] = np.where(counts > 0, totals / np.where(counts > 0, counts, 1.0), np.nan)
    return out


def pairwise_tau_b(rankings: FloatArray) -> FloatArray:
    """K × K Kendall tau-b between the rows of a K × models score matrix (NaN = absent).

    Each pair of rows is compared on the models both score. With ``S_k`` the sign of
    ``x_i - x_j`` for every model pair i < j of row k (0 where either model is absent, or
    where they tie within 1e-9 so that summation order cannot break a tie) and ``P_k`` the
    pairs present in row k, ``tau_b(a, b) = S_a.S_b / sqrt((S_a^2.P_b) (S_b^2.P_a))``: the
    concordant minus discordant pairs over the geometric mean of each row's untied pairs.
    NaN where undefined (a row constant on the common models). Memory: K × m(m-1)/2.
    """
    k, m = rankings.shape
    first, second = np.triu_indices(m, 1)
    a, b = rankings[:, first], rankings[:, second]
    present = (np.isfinite(a) & np.isfinite(b)).astype(np.float64)
    gap = np.nan_to_num(a - b)
    sign = np.where((present > 0) & (np.abs(gap) > _TIE), np.sign(gap), 0.0)
    untied = sign**2
    numerator = sign @ sign.T
    untied_on_common = untied @ present.T
    denominator = np.sqrt(untied_on_common * untied_on_common.T)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(
            denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan
        )
    return np.asarray(tau, dtype=np.float64).reshape(k, k)


def rank_stability(
    responses: Responses,
    *,
    iterations: int = 100,
    seed: int = 0,
    items: BoolArray | None = None,
    min_models: int = 3,
) -> Figure:
    """Stability of the model ranking under resampling: Benchmark² (Qian et al.), §3.4 eq. 7.

    ``Stability = 2 / (K (K - 1)) * sum_{a < b} tau_b(r_a, r_b)`` over K = ``iterations``
    bootstrap rankings. Each resample draws, with replacement, as many item families as the
    selected ``items`` (default: all) span; a family drawn twice counts twice. A model's score
    in a resample is its mean y over its observed cells in the drawn items (weighted by draw
    multiplicity); the ranking is by that score. A model without a cell in a resample is
    left out of that resample's comparisons (each pair of rankings is compared on their
    common models); a pair of rankings on which tau-b is undefined is left out of the mean.

    The paper draws r·|B| items from a selective benchmark of ratio r; with a full stratum
    r = 1. Deterministic for a given ``seed``. ``n`` = models with at least one cell among
    the selected items; missing below ``min_models`` models or with fewer than 2 iterations.
    """
    cells = _family_cells(responses, items)
    ranked = int(np.unique(cells.model).size)
    if ranked < min_models:
        return Figure.missing(f"fewer than {min_models} models", ranked)
    if iterations < 2:
        return Figure.missing("fewer than 2 bootstrap iterations", ranked)
    rng = np.random.default_rng(seed)
    scores = _resampled_scores(cells, responses.n_models, rng, iterations)
    tau = pairwise_tau_b(scores)[np.triu_indices(iterations, 1)]
    tau = tau[np.isfinite(tau)]
    if tau.size == 0:
        return Figure.missing("no pair of resampled rankings has a defined tau", ranked)
    return Figure.of(float(np.mean(tau)), ranked)


@dataclass(frozen=True, slots=True)
class Interval:
    """A statistic with its family-bootstrap percentile interval."""

    value: float
    """The statistic on the responses as given."""
    low: float
    high: float
    iterations: int
    """Resamples on which the statistic was defined (the others are left out)."""


def resample_families(responses: Responses, rng: np.random.Generator) -> Responses:
    """One family bootstrap resample: as many families as there are, drawn with replacement,
    each drawn copy with all of its items and their cells (a copy is a new family)."""
    families, family_of_item = np.unique(responses.family, return_inverse=True)
    drawn = rng.integers(0, families.size, size=families.size)
    by_family = np.argsort(family_of_item, kind="stable")
    family_start = np.searchsorted(family_of_item[by_family], np.arange(families.size))
    family_size = np.bincount(family_of_item, minlength=families.size)
    new_items = _gather(by_family, family_start[drawn], family_size[drawn])
    new_family = np.repeat(np.arange(drawn.size, dtype=np.int64), family_size[drawn])
    item_start = np.searchsorted(responses.item, np.arange(responses.n_items))
    item_size = responses.responses_per_item()
    cells = _gather(np.arange(responses.item.size), item_start[new_items], item_size[new_items])
    new_item_of_cell = np.repeat(np.arange(new_items.size, dtype=np.int64), item_size[new_items])
    return Responses(
        tuple(responses.item_ids[i] for i in new_items),
        responses.models,
        new_item_of_cell,
        responses.model[cells],
        responses.score[cells],
        new_family,
    )


def _gather(order: IntArray, starts: IntArray, sizes: IntArray) -> IntArray:
    """``order[start:start + size]`` for each (start, size), concatenated, without a loop."""
    offsets = np.repeat(starts - np.cumsum(sizes) + sizes, sizes)
    return np.asarray(order[offsets + np.arange(int(sizes.sum()))], dtype=np.int64)


def bootstrap_interval(
    statistic: Callable[[Responses], float],
    responses: Responses,
    *,
    iterations: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile interval of ``statistic`` under family bootstrap resampling.

    Benchmark² (Qian et al.), App. E, use 1000 iterations and 95% intervals without saying
    what they resample; here the unit is the item family (see ``resample_families``).
    Resamples on which the statistic is NaN are left out; NaN bounds when none is left.
    """
    rng = np.random.default_rng(seed)
    values = np.array([statistic(resample_families(responses, rng)) for _ in range(iterations)])
    values = values[np.isfinite(values)]
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail]) if values.size else (np.nan, np.nan)
    return Interval(float(statistic(responses)), float(low), float(high), int(values.size))
