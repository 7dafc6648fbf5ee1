"""Anisotropy index of a score matrix (ReLE eq. 3, §5.1).

``AI = 1 - mean r(v_a, v_b)``: one minus the mean Pearson correlation, across models,
over every unique pair of dimension columns (formula in docs/methods.md). The paper is
"ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability Anisotropy in
Chinese LLMs"; its equations could not be recovered from its text, so the formula follows
the paper's prose and :func:`anisotropy_index` documents every choice the text leaves
open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from judge.ranking.diagnostics.matrix import FloatArray, ScoreMatrix


@dataclass(frozen=True, slots=True, eq=False)
class AnisotropyResult:
    """The anisotropy index of a score matrix (see :func:`anisotropy_index`).

    Attributes
    ----------
    index : float
        ``1 - mean_correlation``; 0 when every pair of dimensions is perfectly positively
        correlated, up to 2 when all are perfectly anti-correlated. NaN when no pair has
        a defined correlation.
    mean_correlation : float
        The mean Pearson correlation over the ``n_pairs`` pairs with a defined
        correlation; NaN when there are none.
    n_pairs : int
        How many unique dimension pairs were averaged.
    undefined_pairs : tuple of (str, str)
        Pairs left out because one of the columns is constant across models (its Pearson
        correlation is 0/0).
    dimensions : tuple of str
        The dimensions, in the order of ``correlation``.
    correlation : ndarray, shape (n_dimensions, n_dimensions)
        The Pearson correlation matrix across models (``np.corrcoef`` of the columns);
        NaN in the rows and columns of constant dimensions, including their diagonal.
    """

    index: float
    mean_correlation: float
    n_pairs: int
    undefined_pairs: tuple[tuple[str, str], ...]
    dimensions: tuple[str, ...]
    correlation: FloatArray = field(repr=False)


def _pearson_matrix(values: FloatArray) -> FloatArray:
    """Pearson correlation of the columns of ``values``; NaN for constant columns."""
    spread = np.ptp(values, axis=0)
    constant = spread == 0
    # Scale each column to a range of 1 first (r is scale-free), so that the squares below
    # can neither underflow nor overflow; a non-constant column then has a norm >= 0.5.
    centred = (values - values.mean(axis=0)) / np.where(constant, 1.0, spread)
    norms = np.sqrt((centred**2).sum(axis=0))
    unit = centred / np.where(constant, 1.0, norms)
    corr = np.clip(unit.T @ unit, -1.0, 1.0)
    corr[constant, :] = np.nan
    corr[:, constant] = np.nan
    return np.asarray(corr, dtype=np.float64)


def anisotropy_index(
    matrix: ScoreMatrix, dimensions: Sequence[str] | None = None
) -> AnisotropyResult:
    """Anisotropy index: 1 minus the mean inter-dimension Pearson correlation.

    ReLE eq. 3 (§5.1). With ``D`` dimensions and ``v_j`` the
    vector of all models' scores on dimension ``j``:

    .. math:: AI = 1 - \\frac{2}{D(D-1)} \\sum_{a < b} r(v_a, v_b)

    where ``r`` is the Pearson correlation across models. A dimension whose scores are the
    same for every model has no defined correlation with anything (0/0); the pairs that
    involve it are left out of the mean and listed in ``undefined_pairs`` (``scipy.stats``
    would return NaN with a ``ConstantInputWarning``). If no pair is left, the index is
    NaN.

    Parameters
    ----------
    matrix : ScoreMatrix
        At least two models.
    dimensions : sequence of str, optional
        The dimensions to use (default: all of them); at least two.

    Returns
    -------
    AnisotropyResult

    Raises
    ------
    ValueError
        Fewer than two models or dimensions, or an unknown dimension.
    """
    if dimensions is not None:
        matrix = matrix.select(dimensions)
    n_models, n_dims = matrix.scores.shape
    if n_models < 2:
        raise ValueError(f"the anisotropy index needs at least two models, got {n_models}")
    if n_dims < 2:
        raise ValueError(f"the anisotropy index needs at least two dimensions, got {n_dims}")
    corr = _pearson_matrix(matrix.scores)
    corr.setflags(write=False)
    defined: list[float] = []
    undefined: list[tuple[str, str]] = []
    for a, b in combinations(range(n_dims), 2):
        value = float(corr[a, b])
        if math.isnan(value):
            undefined.append((matrix.dimensions[a], matrix.dimensions[b]))
        else:
            defined.append(value)
    mean = math.fsum(defined) / len(defined) if defined else math.nan
    return AnisotropyResult(
        index=1.0 - mean,
        mean_correlation=mean,
        n_pairs=len(defined),
        undefined_pairs=tuple(undefined),
        dimensions=matrix.dimensions,
        correlation=corr,
    )


__all__ = ["AnisotropyResult", "anisotropy_index"]
