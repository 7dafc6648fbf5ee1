"""Item-level agreement of two raters: Cohen's kappa, exact and within-one agreement.

LLMEval-Fair §3.4 (Finding 8) and app. F.2 / table 10 use plain kappa against human labels
to pick the judge; app. L, table 13 reports exact agreement, agreement within one point
and the quadratic-weighted kappa. :func:`cohen_kappa` is pinned to
``sklearn.metrics.cohen_kappa_score``; :func:`rater_agreement` bundles every statistic
of two aligned score sequences as a :class:`RaterAgreement`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from judge.agreement.scores import NAN, SCORE_LABELS, Scores, json_record

KappaWeights = Literal["linear", "quadratic"] | None


def cohen_kappa(
    a: Scores,
    b: Scores,
    *,
    weights: KappaWeights = None,
    labels: Sequence[int] = SCORE_LABELS,
) -> float:
    """Cohen's kappa of two raters' scores of the same answers.

    Computed as ``sklearn.metrics.cohen_kappa_score(a, b, labels=labels, weights=weights)``
    does, ``1 - sum(w * observed) / sum(w * expected)``, but in exact integer arithmetic up
    to the final division. Disagreement weights use label positions in ``labels``: 1 off
    the diagonal (plain), ``|i - j|`` (linear) or ``(i - j)**2`` (quadratic).
    LLMEval-Fair §3.4 and app. F.2 report plain kappa against human labels; app. L, table 13
    reports the quadratic-weighted kappa between judges.

    Parameters
    ----------
    a, b : sequence of int
        Scores of the same answers, aligned by position.
    weights : {None, "linear", "quadratic"}
        Disagreement weighting.
    labels : sequence of int
        The possible scores, in order; every score in ``a`` and ``b`` must be one.

    Returns
    -------
    float
        Kappa in [-1, 1]; NaN when the expected disagreement is zero (both raters gave
        every answer the same single score), where scikit-learn also returns NaN.

    Raises
    ------
    ValueError
        Different lengths, no scores, a score that is not in ``labels``, duplicate
        labels, or unknown ``weights``. (scikit-learn silently drops scores outside
        ``labels``; here that is an error.)
    """
    index = _label_index(labels)
    x, y = _aligned(a, b)
    try:
        pairs = Counter((index[i], index[j]) for i, j in zip(x, y, strict=True))
    except KeyError as exc:
        raise ValueError(f"score {exc.args[0]!r} is not one of the labels {list(labels)}") from None
    k = len(labels)
    weight = disagreement_weights(k, weights)
    rows = [0] * k  # rater a's count of each label
    cols = [0] * k  # rater b's count of each label
    for (i, j), count in pairs.items():
        rows[i] += count
        cols[j] += count
    observed = sum(weight[i][j] * count for (i, j), count in pairs.items())
    # n * expected disagreement, an integer: sum_ij w_ij * rows_i * cols_j
    expected_n = sum(weight[i][j] * rows[i] * cols[j] for i in range(k) for j in range(k))
    if expected_n == 0:
        return NAN
    return 1.0 - (len(x) * observed) / expected_n


def exact_agreement(a: Scores, b: Scores) -> float:
    """Share of answers that both raters scored the same (LLMEval-Fair app. L, table 13).

    Raises
    ------
    ValueError
        Different lengths or no scores.
    """
    x, y = _aligned(a, b)
    return float(np.mean(np.asarray(x) == np.asarray(y)))


def within_one_agreement(a: Scores, b: Scores) -> float:
    """Share of answers whose two scores differ by at most one point.

    The "±1 Tol." column of LLMEval-Fair (Zhang et al.) app. L, table 13.

    Raises
    ------
    ValueError
        Different lengths or no scores.
    """
    x, y = _aligned(a, b)
    return float(np.mean(np.abs(np.asarray(x) - np.asarray(y)) <= 1))


@dataclass(frozen=True, slots=True)
class RaterAgreement:
    """Agreement between two raters over the answers both scored.

    ``kappa`` is plain Cohen's kappa (LLMEval-Fair §3.4, app. F.2), ``weighted_kappa`` the
    quadratic-weighted one and ``exact`` / ``within_one`` shares in [0, 1]
    (app. L, table 13). Every statistic is NaN when ``n`` is 0.
    """

    kappa: float
    weighted_kappa: float
    exact: float
    within_one: float
    n: int

    def to_json(self) -> dict[str, Any]:
        """``{"kappa", "weighted_kappa", "exact", "within_one", "n"}``, NaN as ``None``."""
        return json_record(self)


def rater_agreement(
    a: Scores, b: Scores, *, labels: Sequence[int] = SCORE_LABELS
) -> RaterAgreement:
    """All item-level agreement statistics of two aligned score sequences.

    Parameters
    ----------
    a, b : sequence of int
        Scores of the same answers by two raters (usually the reference first), aligned
        by position. They may be empty: then every statistic is NaN and ``n`` is 0.
    labels : sequence of int
        Possible scores, as for `cohen_kappa`.

    Returns
    -------
    RaterAgreement
    """
    x, y = list(a), list(b)
    if len(x) != len(y):
        raise ValueError(f"score sequences differ in length: {len(x)} and {len(y)}")
    if not x:
        return RaterAgreement(NAN, NAN, NAN, NAN, 0)
    return RaterAgreement(
        kappa=cohen_kappa(x, y, labels=labels),
        weighted_kappa=cohen_kappa(x, y, weights="quadratic", labels=labels),
        exact=exact_agreement(x, y),
        within_one=within_one_agreement(x, y),
        n=len(x),
    )


def _label_index(labels: Sequence[int]) -> dict[int, int]:
    index = {label: i for i, label in enumerate(labels)}
    if len(index) != len(labels) or not index:
        raise ValueError(f"labels must be distinct and non-empty, got {list(labels)}")
    return index


def _aligned(a: Scores, b: Scores) -> tuple[list[int], list[int]]:
    x, y = list(a), list(b)
    if len(x) != len(y):
        raise ValueError(f"score sequences differ in length: {len(x)} and {len(y)}")
    if not x:
        raise ValueError("no scores to compare")
    return x, y


def disagreement_weights(k: int, weights: KappaWeights) -> list[list[int]]:
    """The ``k x k`` disagreement weights of label positions: ``[i != j]`` (plain),
    ``|i - j|`` (linear) or ``(i - j)**2`` (quadratic); ``ValueError`` for other
    ``weights``."""
    if weights is None:
        return [[int(i != j) for j in range(k)] for i in range(k)]
    if weights == "linear":
        return [[abs(i - j) for j in range(k)] for i in range(k)]
    if weights == "quadratic":
        return [[(i - j) ** 2 for j in range(k)] for i in range(k)]
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
