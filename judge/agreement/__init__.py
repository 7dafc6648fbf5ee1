"""Judge calibration: agreement of LLM judges with a human reference and with each other.

Pure statistics over 0-3 rubric scores (no database, no network), plus a reader for a
ratings CSV and ``rich`` tables for people. What is computed follows LLMEval-Fair (Zhang et al.):

* §3.4 (Finding 8) and app. F.2 / table 10: Cohen's kappa of each judge against human
  labels, used to pick the judge (``default_judge``);
* app. L, table 13: item-level agreement (exact, within one point, quadratic-weighted
  kappa);
* app. L, table 12: how consistently two raters rank the models (Spearman rho and Kendall
  tau of the per-model mean scores);
* app. L, table 14: family bias, a judge's mean on answers of its own model family minus
  the mean of all judges on those answers.

The rubric's scores are integers 0-3. Kappa is pinned to
``sklearn.metrics.cohen_kappa_score`` and the rank correlations are
``scipy.stats.spearmanr`` / ``kendalltau``; undefined values are NaN (``None`` in JSON),
never a warning.

One concept per module:

* :mod:`~judge.agreement.scores`: the rubric's scores and the NaN-to-JSON convention;
* :mod:`~judge.agreement.kappa`: kappa, exact and within-one agreement of two raters;
* :mod:`~judge.agreement.resampling`: the cluster bootstrap of kappa and its studentized
  interval, which the next two share;
* :mod:`~judge.agreement.intervals`: kappa with cluster-bootstrap intervals, per group;
* :mod:`~judge.agreement.round_change`: the change in kappa between calibration rounds;
* :mod:`~judge.agreement.inter_judge`: item-level agreement of several judges on the same
  answers (pairwise Pearson r and exact agreement) and the answers they disagree on;
* :mod:`~judge.agreement.ranking`: rank correlation of two raters' per-model means;
* :mod:`~judge.agreement.ratings`: :class:`Rating` and the validated table of ratings;
* :mod:`~judge.agreement.report`: :func:`agreement_report` (with family bias) and
  :func:`default_judge`;
* :mod:`~judge.agreement.ratings_csv`: :func:`read_ratings_csv` and its errors;
* :mod:`~judge.agreement.render`: :func:`render_tables`.
"""

from __future__ import annotations

from bank.formats.input_problems import MAX_REPORTED_ERRORS, InputProblem
from judge.agreement.inter_judge import (
    Disagreement,
    InterJudgeAgreement,
    JudgePairAgreement,
    disagreements,
    inter_judge_agreement,
)
from judge.agreement.intervals import (
    KappaInterval,
    KappaIntervals,
    ScorePair,
    grouped_kappa_intervals,
    kappa_interval,
    kappa_intervals,
)
from judge.agreement.kappa import (
    KappaWeights,
    RaterAgreement,
    cohen_kappa,
    exact_agreement,
    rater_agreement,
    within_one_agreement,
)
from judge.agreement.ranking import RankingAgreement, ranking_agreement
from judge.agreement.ratings import Rating
from judge.agreement.ratings_csv import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    AgreementInputError,
    read_ratings_csv,
)
from judge.agreement.render import render_tables
from judge.agreement.report import AgreementReport, FamilyBias, agreement_report, default_judge
from judge.agreement.round_change import (
    CalibrationRound,
    KappaChange,
    KappaChanges,
    kappa_change,
)
from judge.agreement.scores import SCORE_LABELS, Scores

__all__ = [
    "MAX_REPORTED_ERRORS",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "SCORE_LABELS",
    "AgreementInputError",
    "AgreementReport",
    "CalibrationRound",
    "Disagreement",
    "FamilyBias",
    "InputProblem",
    "InterJudgeAgreement",
    "JudgePairAgreement",
    "KappaChange",
    "KappaChanges",
    "KappaInterval",
    "KappaIntervals",
    "KappaWeights",
    "RankingAgreement",
    "RaterAgreement",
    "Rating",
    "ScorePair",
    "Scores",
    "agreement_report",
    "cohen_kappa",
    "default_judge",
    "disagreements",
    "exact_agreement",
    "grouped_kappa_intervals",
    "inter_judge_agreement",
    "kappa_change",
    "kappa_interval",
    "kappa_intervals",
    "ranking_agreement",
    "rater_agreement",
    "read_ratings_csv",
    "render_tables",
    "within_one_agreement",
]
