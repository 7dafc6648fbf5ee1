"""The agreement figures of one calibration run of a judge against the human scores.

Cohen's kappa and the quadratic-weighted kappa with their 95% intervals, exact and
within-one agreement, and how many answers and item families they rest on (LLMEval-Fair
(Zhang et al.), "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and Fair
Evaluation of Large Language Models", §3.4 and app. F.2 for kappa against human experts;
app. L, table 13 for the weighted kappa, exact and within-one agreement).
``server.calibration.runner`` computes them; the gate reads them back from the stored row.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.scoring.models import JudgeCalibration

__all__ = ["Figures"]


@dataclass(frozen=True, slots=True)
class Figures:
    """Agreement of a judge with the human scores on the answers it scored.

    Kappas and bounds are None where undefined (a constant rater, fewer than two clusters);
    ``exact`` and ``within_one`` are NaN with no answers (a stored row keeps 0.0 instead).
    ``n_clusters`` is None when the figures are read back from a stored row, which does not
    keep it.
    """

    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    weighted_kappa: float | None
    weighted_low: float | None
    weighted_high: float | None
    exact: float
    within_one: float
    n: int
    n_clusters: int | None

    @classmethod
    def stored(cls, row: JudgeCalibration) -> Figures:
        """The figures a stored run keeps (``n_clusters`` None: the row has no such column)."""
        return cls(
            kappa=row.kappa,
            kappa_low=row.kappa_low,
            kappa_high=row.kappa_high,
            weighted_kappa=row.weighted_kappa,
            weighted_low=row.weighted_low,
            weighted_high=row.weighted_high,
            exact=row.exact,
            within_one=row.within_one,
            n=row.n,
            n_clusters=None,
        )
