"""All three diagnostics of a score table, never raising on degenerate data.

:func:`diagnose` computes the anisotropy index (:mod:`~judge.ranking.diagnostics.anisotropy`),
the Rank Stability Amplitude (:mod:`~judge.ranking.diagnostics.rank_stability`) and the
capability inconsistency (:mod:`~judge.ranking.diagnostics.inconsistency`) of ReLE ("ReLE:
A Scalable System and Structured Benchmark for Diagnosing Capability Anisotropy in Chinese
LLMs", §3.5, §5-6); a statistic that cannot be computed is None with a human-readable
reason (:class:`Diagnostics`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge.ranking.diagnostics.anisotropy import AnisotropyResult, anisotropy_index
from judge.ranking.diagnostics.inconsistency import (
    DEFAULT_DIFFICULTY_ANCHORS,
    CapabilityInconsistency,
    capability_inconsistency,
    difficulty_parameters,
    unusable_difficulties,
)
from judge.ranking.diagnostics.matrix import FloatArray, ScoreMatrix, check_labels, check_shape
from judge.ranking.diagnostics.rank_stability import RankStability, rank_stability_amplitude
from judge.ranking.diagnostics.schemes import SchemeError, rele_schemes_for

ANISOTROPY = "anisotropy_index"
RSA = "rsa"
INCONSISTENCY = "capability_inconsistency"
STATISTICS: tuple[str, ...] = (ANISOTROPY, RSA, INCONSISTENCY)
"""The names of the statistics of :class:`Diagnostics` (the keys of ``unavailable``)."""


@dataclass(frozen=True, slots=True, eq=False)
class Diagnostics:
    """The three diagnostics of a score table, each computed or unavailable with a reason
    (see :func:`diagnose`).

    Attributes
    ----------
    models : tuple of str
        The models the statistics are over: those with a finite score on every dimension,
        in the given order.
    dimensions : tuple of str
        The dimensions, in the given order.
    anisotropy : AnisotropyResult or None
        None when unavailable.
    rsa : dict of str to RankStability or None
        None when unavailable (e.g. no weighting scheme applies).
    inconsistency : CapabilityInconsistency or None
        None when unavailable.
    unavailable : dict of str to str
        Statistic name (:data:`STATISTICS`) -> a human-readable reason why it is None;
        empty when all three were computed.
    """

    models: tuple[str, ...]
    dimensions: tuple[str, ...]
    anisotropy: AnisotropyResult | None
    rsa: dict[str, RankStability] | None
    inconsistency: CapabilityInconsistency | None
    unavailable: dict[str, str]


def diagnose(
    models: Sequence[str],
    dimensions: Sequence[str],
    scores: npt.ArrayLike,
    *,
    schemes: Mapping[str, Mapping[str, float]] | None = None,
    label: str = "dimension",
) -> Diagnostics:
    """Anisotropy index, RSA and capability inconsistency of a score table, each either
    computed or None with a reason; degenerate data never raises.

    A statistic that cannot be computed is unavailable, with a reason naming the cause,
    e.g. "discipline 'Law': every model scores 0, so its difficulty is undefined". The
    cases:

    * Every statistic compares models across dimensions, so each needs at least two
      models and two dimensions. Models with a non-finite score (NaN, infinity) on some
      dimension are left out first, like models not scored on every dimension.
    * Anisotropy: no pair of dimensions has a defined correlation (at most one dimension
      varies across models; see :func:`anisotropy_index`).
    * RSA: no weighting scheme applies (``schemes`` None on dimensions outside the ten
      LLMEval-Fair disciplines, or fewer than two of them), or the schemes are invalid
      (:func:`~judge.ranking.diagnostics.schemes.validate_schemes`).
    * Capability inconsistency: a difficulty ``b_j`` (the anchors' mean score) is not
      positive, e.g. every model scores 0 on ``j`` (see :func:`capability_inconsistency`),
      or the adjusted scores overflow.

    Parameters
    ----------
    models, dimensions : sequence of str
        Row and column labels, unique and non-empty; either may be empty.
    scores : array_like, shape (n_models, n_dimensions)
        Any floats, NaN and infinity included.
    schemes : mapping of str to mapping of str to float, optional
        Weighting schemes of RSA; default :func:`rele_schemes_for` the dimensions (ReLE's,
        on LLMEval-Fair disciplines only), none otherwise.
    label : str, default "dimension"
        What the reasons call a dimension (e.g. "discipline").

    Returns
    -------
    Diagnostics

    Raises
    ------
    ValueError
        Only for malformed arguments: ``scores`` not of shape (models, dimensions), or an
        empty or repeated label.
    """
    table = np.array(scores, dtype=np.float64)
    if table.size == 0 and 0 in (len(models), len(dimensions)):
        table = table.reshape(len(models), len(dimensions))
    check_shape(table.shape, models, dimensions)
    check_labels(models, dimensions)
    finite = np.asarray(np.isfinite(table).all(axis=1), dtype=np.bool_)
    kept = tuple(m for m, ok in zip(models, finite.tolist(), strict=True) if ok)
    too_little = _too_little(kept, tuple(dimensions), label, len(models) - len(kept))
    if too_little is not None:
        reasons = dict.fromkeys(STATISTICS, too_little)
        return Diagnostics(kept, tuple(dimensions), None, None, None, reasons)
    matrix = ScoreMatrix(kept, dimensions, table[finite])
    if schemes is None:
        schemes = rele_schemes_for(matrix.dimensions)
    anisotropy, why_not_ai = _safe_anisotropy(matrix, label)
    rsa, why_not_rsa = _safe_rsa(matrix, schemes, label)
    inconsistency, why_not_ci = _safe_inconsistency(matrix, label)
    reasons = {
        name: reason
        for name, reason in zip(STATISTICS, (why_not_ai, why_not_rsa, why_not_ci), strict=True)
        if reason is not None
    }
    return Diagnostics(matrix.models, matrix.dimensions, anisotropy, rsa, inconsistency, reasons)


def _too_little(
    models: tuple[str, ...], dimensions: tuple[str, ...], label: str, dropped: int
) -> str | None:
    """Why no statistic can be computed on ``models`` x ``dimensions``, or None."""
    if len(dimensions) < 2:
        return f"needs at least two {label}s, got {len(dimensions)}"
    if len(models) < 2:
        left_out = (
            f"; {dropped} left out for a score that is not a finite number" if dropped else ""
        )
        return f"needs at least two models scored on every {label}, got {len(models)}{left_out}"
    return None


def _named(label: str, names: Sequence[str]) -> str:
    """``discipline 'Law'`` or ``disciplines 'Law', 'History'``."""
    return f"{label}{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)}"


def _safe_anisotropy(matrix: ScoreMatrix, label: str) -> tuple[AnisotropyResult | None, str | None]:
    with np.errstate(all="ignore"):
        result = anisotropy_index(matrix)
    if result.n_pairs and math.isfinite(result.index):
        return result, None
    constant = [
        d for d, s in zip(matrix.dimensions, np.ptp(matrix.scores, axis=0), strict=True) if s == 0
    ]
    if constant:
        return None, (
            f"every model scores the same on {_named(label, constant)}, so no pair of "
            f"{label}s has a defined correlation"
        )
    return None, f"no pair of {label}s has a defined correlation"


def _safe_rsa(
    matrix: ScoreMatrix, schemes: Mapping[str, Mapping[str, float]] | None, label: str
) -> tuple[dict[str, RankStability] | None, str | None]:
    if not schemes:
        return None, (
            f"no weighting schemes apply to these {label}s (ReLE's weigh the ten "
            "LLMEval-Fair disciplines, not others); give schemes of your own"
        )
    try:
        with np.errstate(all="ignore"):
            return rank_stability_amplitude(matrix, schemes), None
    except SchemeError as error:
        return None, "invalid weighting schemes: " + "; ".join(error.problems)


def _safe_inconsistency(
    matrix: ScoreMatrix, label: str
) -> tuple[CapabilityInconsistency | None, str | None]:
    b, anchors = difficulty_parameters(matrix, None, DEFAULT_DIFFICULTY_ANCHORS)
    problems = [
        _difficulty_problem(
            f"{label} {matrix.dimensions[j]!r}", matrix.scores[:, j], float(b[j]), len(anchors)
        )
        for j in unusable_difficulties(b)
    ]
    if problems:
        return None, "; ".join(problems)
    with np.errstate(all="ignore"):
        result = capability_inconsistency(matrix)
    if not all(math.isfinite(v) for v in result.values.values()):
        return None, "the difficulty-adjusted scores overflow"
    return result, None


def _difficulty_problem(where: str, column: FloatArray, value: float, n_anchors: int) -> str:
    """Why the difficulty ``value`` of the dimension with scores ``column`` is unusable."""
    if not column.any():
        return f"{where}: every model scores 0, so its difficulty is undefined"
    if value == 0:
        return (
            f"{where}: the {n_anchors} anchor models (the best overall) all score 0, so its "
            "difficulty is undefined"
        )
    if not math.isfinite(value):
        return f"{where}: the anchor models' mean score overflows"
    return f"{where}: difficulty {value:g} (the anchor models' mean score) is not positive"


__all__ = ["ANISOTROPY", "INCONSISTENCY", "RSA", "STATISTICS", "Diagnostics", "diagnose"]
