"""``rich`` tables of an agreement report, for people (``proctor judge agreement``).

One table of agreement with the reference, then one per non-empty part of the report
(per model, ranking agreement, family bias). Undefined values print as ``-``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from judge.agreement.intervals import KappaInterval, KappaIntervals
from judge.agreement.kappa import RaterAgreement
from judge.agreement.report import AgreementReport


def render_tables(report: AgreementReport) -> list[Table]:
    """``rich`` tables of the report, for ``proctor judge agreement``.

    The agreement with the reference always; then one table per non-empty part: per
    model, ranking agreement and family bias. Undefined values print as ``-``.
    """
    agreement_columns = (
        "n",
        "kappa",
        "95% CI",
        "weighted kappa",
        "95% CI",
        "exact",
        "within ±1",
    )
    summary = _table(
        f"Agreement with {report.reference!r} (LLMEval-Fair (Zhang et al.) app. F.2, L)",
        ("rater",),
        agreement_columns,
    )
    for name, result in report.raters.items():
        summary.add_row(name, *_agreement_cells(result, report.intervals.raters.get(name)))
    tables = [summary]

    if report.models:
        per_model = _table(
            f"Agreement with {report.reference!r} per model",
            ("model", "rater"),
            agreement_columns,
        )
        for model, per_rater in report.models.items():
            intervals = report.intervals.models.get(model, {})
            for name, result in per_rater.items():
                per_model.add_row(model, name, *_agreement_cells(result, intervals.get(name)))
        tables.append(per_model)

    if report.ranking_agreement:
        ranking = _table(
            "Model ranking agreement (LLMEval-Fair app. L, table 12)",
            ("pair",),
            ("models", "Spearman rho", "p", "Kendall tau", "p"),
        )
        for pair, correlation in report.ranking_agreement.items():
            ranking.add_row(
                pair,
                str(correlation.n_models),
                _number(correlation.spearman),
                _p_value(correlation.spearman_p),
                _number(correlation.kendall),
                _p_value(correlation.kendall_p),
            )
        tables.append(ranking)

    if report.family_bias:
        bias_table = _table(
            "Family bias (LLMEval-Fair app. L, table 14)",
            ("rater", "family"),
            ("n", "own mean", "all-judge mean", "delta"),
        )
        for name, bias in report.family_bias.items():
            bias_table.add_row(
                name,
                bias.family,
                str(bias.n),
                _number(bias.own_mean, 2),
                _number(bias.all_judge_mean, 2),
                _number(bias.delta, 2, signed=True),
            )
        tables.append(bias_table)
    return tables


def _table(title: str, left: Sequence[str], right: Sequence[str]) -> Table:
    table = Table(title=title)
    for column in left:
        table.add_column(column, justify="left")
    for column in right:
        table.add_column(column, justify="right")
    return table


def _agreement_cells(result: RaterAgreement, intervals: KappaIntervals | None) -> list[str]:
    return [
        str(result.n),
        _number(result.kappa),
        _interval(intervals.plain if intervals else None),
        _number(result.weighted_kappa),
        _interval(intervals.weighted if intervals else None),
        _percent(result.exact),
        _percent(result.within_one),
    ]


def _interval(interval: KappaInterval | None) -> str:
    if interval is None or math.isnan(interval.low) or math.isnan(interval.high):
        return "-"
    return f"[{interval.low:.3f}, {interval.high:.3f}]"


def _number(value: float, digits: int = 3, *, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 100:.1f}%"


def _p_value(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"
