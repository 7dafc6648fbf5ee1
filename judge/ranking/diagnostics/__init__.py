"""Capability diagnostics of a model-by-dimension score matrix (ReLE §3.5, §5-6).

Three descriptive statistics of how uneven models are across capability dimensions
(formulas in docs/methods.md):

* :func:`anisotropy_index` (ReLE eq. 3): ``AI = 1 - mean r(d_a, d_b)``, the mean
  Pearson correlation, across models, over every unique pair of dimension columns.
* :func:`rank_stability_amplitude` (ReLE §3.5, §6.1): a model's rank under several
  weighting schemes; ``RSA = max rank - min rank``. :data:`RELE_SCHEMES` maps ReLE's three
  schemes onto the ten LLMEval-Fair disciplines.
* :func:`capability_inconsistency` (ReLE eq. 4-5): the coefficient of variation of a
  model's difficulty-adjusted dimension scores, with a smoothing floor under the mean.

ReLE is "ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability
Anisotropy in Chinese LLMs". Its equations could not be recovered from its text; the
formulas here follow the paper's prose, and each function documents the exact formula and
every choice the text leaves open.

One statistic per module, each validating its inputs and returning a frozen result:

* :mod:`~judge.ranking.diagnostics.matrix`: :class:`ScoreMatrix`, the input of every
  statistic, with the label and shape rules;
* :mod:`~judge.ranking.diagnostics.anisotropy`: :func:`anisotropy_index`;
* :mod:`~judge.ranking.diagnostics.schemes`: weighting schemes (:data:`RELE_SCHEMES`,
  :func:`rele_schemes_for`, :func:`validate_schemes`);
* :mod:`~judge.ranking.diagnostics.rank_stability`: :func:`rank_stability_amplitude` and
  :func:`competition_ranks`;
* :mod:`~judge.ranking.diagnostics.inconsistency`: :func:`capability_inconsistency`;
* :mod:`~judge.ranking.diagnostics.combined`: :func:`diagnose`, all three on a score table,
  never raising on degenerate data.

Imports flow one way: ``matrix`` and ``schemes`` at the bottom, then ``anisotropy``,
``rank_stability`` (on ``schemes``) and ``inconsistency``, and ``combined`` on top.
"""

from __future__ import annotations

from judge.ranking.diagnostics.anisotropy import AnisotropyResult, anisotropy_index
from judge.ranking.diagnostics.combined import (
    ANISOTROPY,
    INCONSISTENCY,
    RSA,
    STATISTICS,
    Diagnostics,
    diagnose,
)
from judge.ranking.diagnostics.inconsistency import (
    DEFAULT_CI_FLOOR,
    DEFAULT_DIFFICULTY_ANCHORS,
    CapabilityInconsistency,
    capability_inconsistency,
    difficulty_anchors,
)
from judge.ranking.diagnostics.matrix import ScoreMatrix
from judge.ranking.diagnostics.rank_stability import (
    TIE_TOLERANCE,
    RankStability,
    competition_ranks,
    rank_stability_amplitude,
)
from judge.ranking.diagnostics.schemes import (
    LLMEVAL_FAIR_DISCIPLINES,
    RELE_DOMAIN_DISCIPLINES,
    RELE_SCHEMES,
    SchemeError,
    rele_schemes_for,
    restricted_scheme,
    validate_schemes,
)

__all__: list[str] = [
    "ANISOTROPY",
    "DEFAULT_CI_FLOOR",
    "DEFAULT_DIFFICULTY_ANCHORS",
    "INCONSISTENCY",
    "LLMEVAL_FAIR_DISCIPLINES",
    "RELE_DOMAIN_DISCIPLINES",
    "RELE_SCHEMES",
    "RSA",
    "STATISTICS",
    "TIE_TOLERANCE",
    "AnisotropyResult",
    "CapabilityInconsistency",
    "Diagnostics",
    "RankStability",
    "SchemeError",
    "ScoreMatrix",
    "anisotropy_index",
    "capability_inconsistency",
    "competition_ranks",
    "diagnose",
    "difficulty_anchors",
    "rank_stability_amplitude",
    "rele_schemes_for",
    "restricted_scheme",
    "validate_schemes",
]
