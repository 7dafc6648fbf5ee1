"""Vectorised per-group reductions over the cells of a sparse response matrix.

A group is usually an item: its cells are the models that answered it. Every function takes
per-cell arrays plus ``groups`` (the group index of each cell, **sorted ascending**, as the
cells of a ``Responses`` are by item; a boolean mask of the cells keeps them sorted) and
returns one value per group, with no Python loop over groups or cells.

Ties: Spearman correlation uses average ranks (scipy's default), and two values tie when
they are equal after rounding to :data:`TIE_DECIMALS` decimals (so two equal means summed in
different orders tie). Pearson's constancy test compares values exactly: round computed
values first.
"""

from __future__ import annotations

import numpy as np

from bank.health.responses import FloatArray, IntArray

TIE_DECIMALS = 12
"""Computed values (abilities) are rounded to this many decimals before ranking or a
constancy test, so that two equal means summed in different orders tie."""


def group_starts(groups: IntArray) -> IntArray:
    """Index of the first cell of each non-empty group, in order.

    Raises ``ValueError`` if ``groups`` is not sorted ascending."""
    g = np.asarray(groups, dtype=np.int64)
    if g.size == 0:
        return np.zeros(0, dtype=np.int64)
    step = np.diff(g)
    if np.any(step < 0):
        raise ValueError("groups must be sorted ascending")
    return np.concatenate(([0], np.flatnonzero(step) + 1)).astype(np.int64)


def average_ranks(values: FloatArray, groups: IntArray) -> FloatArray:
    """Per cell, the 1-based rank of its value within its group; tied values (equal to
    :data:`TIE_DECIMALS` decimals) share the mean of their ranks (as
    ``scipy.stats.rankdata(method="average")`` per group)."""
    x: FloatArray = np.asarray(values, dtype=np.float64).round(TIE_DECIMALS)
    g = np.asarray(groups, dtype=np.int64)
    if x.size == 0:
        return np.zeros(0)
    order = _group_value_order(x, g)
    xs, gs = x[order], g[order]
    new_group = np.concatenate(([True], gs[1:] != gs[:-1]))
    new_run = new_group | np.concatenate(([True], xs[1:] != xs[:-1]))
    index = np.arange(x.size)
    group_first = np.maximum.accumulate(np.where(new_group, index, 0))
    run_first = np.maximum.accumulate(np.where(new_run, index, 0))
    run_id = np.cumsum(new_run) - 1
    run_last = np.concatenate((np.flatnonzero(new_run)[1:] - 1, [x.size - 1]))[run_id]
    ranks = np.empty(x.size)
    ranks[order] = (run_first + run_last) / 2.0 - group_first + 1.0
    return ranks


def _group_value_order(x: FloatArray, g: IntArray) -> IntArray:
    """The permutation sorting cells by (group, value).

    Fast path for values in [0, 1] (scores, abilities) and fewer than 2**23 groups: one
    integer key ``group * 2**40 + round(value * 10**12)``, sorted stably (timsort runs along
    the already grouped cells). Otherwise a lexsort; both order ties alike."""
    if x.min() >= 0.0 and x.max() <= 1.0 and g.min() >= 0 and g.max() < 2**23:
        key = (g << 40) + np.rint(x * 10.0**TIE_DECIMALS).astype(np.int64)
        return np.argsort(key, kind="stable").astype(np.int64)
    return np.lexsort((x, g)).astype(np.int64)


def _is_constant(x: FloatArray, groups: IntArray, n_groups: int) -> tuple[IntArray, FloatArray]:
    """(count, 1.0 where the group's values are all equal else 0.0; NaN when empty)."""
    starts = group_starts(groups)
    count = np.bincount(groups, minlength=n_groups).astype(np.int64)
    constant = np.full(n_groups, np.nan)
    if starts.size:
        present = groups[starts]
        same = np.minimum.reduceat(x, starts) == np.maximum.reduceat(x, starts)
        constant[present] = same.astype(np.float64)
    return count, constant


def group_pearson(
    x: FloatArray, y: FloatArray, groups: IntArray, n_groups: int
) -> tuple[FloatArray, IntArray]:
    """Per group, Pearson's r between the cells' ``x`` and ``y``, and the number of cells.

    r is NaN for a group with fewer than 2 cells or with a constant ``x`` or ``y``
    (exact equality), and is clipped to [-1, 1]. Two-pass (centred) sums, so a
    near-constant group does not lose its precision to cancellation."""
    xv = np.asarray(x, dtype=np.float64)
    yv = np.asarray(y, dtype=np.float64)
    g = np.asarray(groups, dtype=np.int64)
    count, x_constant = _is_constant(xv, g, n_groups)
    _, y_constant = _is_constant(yv, g, n_groups)
    safe = np.maximum(count, 1)
    dx = xv - (np.bincount(g, xv, minlength=n_groups) / safe)[g]
    dy = yv - (np.bincount(g, yv, minlength=n_groups) / safe)[g]
    sxy = np.bincount(g, dx * dy, minlength=n_groups)
    sxx = np.bincount(g, dx * dx, minlength=n_groups)
    syy = np.bincount(g, dy * dy, minlength=n_groups)
    defined = (count >= 2) & (x_constant == 0.0) & (y_constant == 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0)
    return np.where(defined, r, np.nan), count


def group_spearman(
    x: FloatArray, y: FloatArray, groups: IntArray, n_groups: int
) -> tuple[FloatArray, IntArray]:
    """Per group, Spearman's rho (Pearson's r of the average ranks) and the number of cells;
    NaN where :func:`group_pearson` of the ranks is (fewer than 2 cells, a constant side)."""
    g = np.asarray(groups, dtype=np.int64)
    return group_pearson(average_ranks(x, g), average_ranks(y, g), g, n_groups)


def fisher_interval(
    r: FloatArray, n: IntArray, z: float = 1.959964
) -> tuple[FloatArray, FloatArray]:
    """The Fisher-z interval ``tanh(atanh(r) ± z / sqrt(n - 3))`` (95% for the default z);
    NaN where r is NaN or n < 4."""
    rv = np.asarray(r, dtype=np.float64)
    ok = np.isfinite(rv) & (np.asarray(n) >= 4)
    half = z / np.sqrt(np.maximum(np.asarray(n, dtype=np.float64) - 3.0, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = np.arctanh(np.where(ok, rv, 0.0))
    low = np.where(ok, np.tanh(centre - half), np.nan)
    high = np.where(ok, np.tanh(centre + half), np.nan)
    return low, high
