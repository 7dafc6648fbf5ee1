"""How alike two raters rank the models (LLMEval-Fair (Zhang et al.) app. L, table 12).

Spearman rho and Kendall tau of the two raters' per-model mean scores, as
``scipy.stats.spearmanr`` / ``kendalltau`` give them; NaN when either rater gives every
model the same mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.agreement.scores import NAN, json_record


@dataclass(frozen=True, slots=True)
class RankingAgreement:
    """How alike two raters rank the models (LLMEval-Fair app. L, table 12).

    Spearman rho and Kendall tau (tau-b) of the two raters' per-model mean scores, with
    their two-sided p-values, as ``scipy.stats.spearmanr`` / ``kendalltau`` give them;
    NaN when either rater gives every model the same mean.
    """

    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float
    n_models: int

    def to_json(self) -> dict[str, Any]:
        """``{"spearman", "spearman_p", "kendall", "kendall_p", "n_models"}``."""
        return json_record(self)


def ranking_agreement(means_a: Sequence[float], means_b: Sequence[float]) -> RankingAgreement:
    """Rank correlation of two raters' mean scores of the same models.

    Parameters
    ----------
    means_a, means_b : sequence of float
        Per-model mean scores, aligned by model; at least two models.

    Returns
    -------
    RankingAgreement
        ``scipy.stats.spearmanr`` and ``scipy.stats.kendalltau`` of the two sequences.
        When either sequence is constant the correlations are undefined: all four numbers
        are NaN (scipy would say the same with a ``ConstantInputWarning``).
    """
    x = np.asarray(means_a, dtype=float)
    y = np.asarray(means_b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"mean sequences differ in shape: {x.shape} and {y.shape}")
    if len(x) < 2:
        raise ValueError(f"a ranking needs at least two models, got {len(x)}")
    if np.all(x == x[0]) or np.all(y == y[0]):
        return RankingAgreement(NAN, NAN, NAN, NAN, len(x))
    from scipy import stats  # scipy.stats takes ~1 s to import: not at every CLI start

    rho = stats.spearmanr(x, y)
    tau = stats.kendalltau(x, y)
    return RankingAgreement(
        spearman=float(rho.statistic),
        spearman_p=float(rho.pvalue),
        kendall=float(tau.statistic),
        kendall_p=float(tau.pvalue),
        n_models=len(x),
    )
