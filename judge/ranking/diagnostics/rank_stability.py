"""Rank Stability Amplitude over weighting schemes (ReLE §3.5, §6.1).

A model's rank under several weighting schemes (:mod:`judge.ranking.diagnostics.schemes`);
``RSA = max rank - min rank`` (formula in docs/methods.md). The paper is "ReLE: A Scalable
System and Structured Benchmark for Diagnosing Capability Anisotropy in Chinese LLMs"; its
equations could not be recovered from its text, so :func:`rank_stability_amplitude`
follows the paper's prose and documents every choice it leaves open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge.ranking.diagnostics.matrix import FloatArray, ScoreMatrix
from judge.ranking.diagnostics.schemes import validate_schemes

IntArray = npt.NDArray[np.int64]

TIE_TOLERANCE = 1e-9
"""Scheme scores closer than ``TIE_TOLERANCE * max(1, max |score|)`` are ranked as tied, so
that models whose weighted means are equal in exact arithmetic (e.g. Baidu-3.5 and
ChatGLM-Pro in LLMEval-Fair (Zhang et al.) table 8) are not split by floating-point rounding."""


def competition_ranks(values: Sequence[float] | FloatArray) -> IntArray:
    """Ranks, 1 for the highest value, ties sharing the best ("1224") rank.

    ``rank_i = 1 + #{j : v_j > v_i + tol}`` with
    ``tol = TIE_TOLERANCE * max(1, max |v|)``: values within ``tol`` of each other tie
    (for exact values this is ``scipy.stats.rankdata(-v, method="min")``).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"expected a 1-D sequence, got shape {v.shape}")
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    tol = TIE_TOLERANCE * max(1.0, float(np.max(np.abs(v))))
    ordered = np.sort(v)
    above = v.size - np.searchsorted(ordered, v + tol, side="right")
    return np.asarray(above + 1, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RankStability:
    """A model's ranks across weighting schemes (see :func:`rank_stability_amplitude`).

    Attributes
    ----------
    amplitude : int
        ``RSA = max rank - min rank`` over the schemes; 0 with a single scheme.
    ranks : dict of str to int
        Scheme -> the model's rank (1 = best).
    scores : dict of str to float
        Scheme -> the model's weighted mean score.
    """

    amplitude: int
    ranks: dict[str, int]
    scores: dict[str, float]


def rank_stability_amplitude(
    matrix: ScoreMatrix, schemes: Mapping[str, Mapping[str, float]]
) -> dict[str, RankStability]:
    """Rank Stability Amplitude of every model over weighting schemes.

    ReLE §3.5 and §6.1. Under scheme ``k`` with
    weights ``w_k`` a model's score is the weighted mean of its dimension scores,
    ``s_mk = sum_j w_kj x_mj / sum_j w_kj``; the models are ranked by it, rank 1 the best,
    with competition ranking for ties (tied models share the best of their ranks, as
    ``scipy.stats.rankdata(-s, method="min")``; scores within :data:`TIE_TOLERANCE` count
    as tied); and

    .. math:: RSA_m = \\max_k \\mathrm{rank}_{mk} - \\min_k \\mathrm{rank}_{mk}.

    Parameters
    ----------
    matrix : ScoreMatrix
    schemes : mapping of str to mapping of str to float
        Scheme -> dimension -> weight, checked by :func:`validate_schemes` (unknown
        dimensions, negative weights and all-zero schemes are errors; a dimension a scheme
        does not name weighs 0).
        :data:`~judge.ranking.diagnostics.schemes.RELE_SCHEMES` for the ten LLMEval-Fair
        disciplines.

    Returns
    -------
    dict of str to RankStability
        Model -> its RSA, ranks and scores, in the matrix's model order.

    Raises
    ------
    SchemeError
        Invalid schemes.
    """
    checked = validate_schemes(schemes, matrix.dimensions)
    ranks: dict[str, IntArray] = {}
    scores: dict[str, FloatArray] = {}
    for name, weights in checked.items():
        w = np.array([weights.get(d, 0.0) for d in matrix.dimensions], dtype=np.float64)
        scores[name] = matrix.scores @ (w / w.sum())
        ranks[name] = competition_ranks(scores[name])
    result: dict[str, RankStability] = {}
    for i, model in enumerate(matrix.models):
        model_ranks = {name: int(r[i]) for name, r in ranks.items()}
        result[model] = RankStability(
            amplitude=max(model_ranks.values()) - min(model_ranks.values()),
            ranks=model_ranks,
            scores={name: float(s[i]) for name, s in scores.items()},
        )
    return result


__all__ = ["TIE_TOLERANCE", "RankStability", "competition_ranks", "rank_stability_amplitude"]
