"""Judge calibration: agreement of LLM judges with a human reference and with each other.

Pure statistics over 0-3 rubric scores (no database, no network), plus a reader for a
ratings CSV and ``rich`` tables for people. What is computed follows papers/004:

* §3.4 (Finding 8) and app. F.2 / table 10: Cohen's kappa of each judge against human
  labels, used to pick the judge (``default_judge``);
* app. L, table 13: item-level agreement (exact, within one point, quadratic-weighted
  kappa);
* app. L, table 12: how consistently two raters rank the models (Spearman rho and Kendall
  tau of the per-model mean scores);
* app. L, table 14: family bias, a judge's mean on answers of its own model family minus
  the mean of all judges on those answers.

The rubric is DESIGN.md "Scoring": integer 0-3. Kappa is pinned to
``sklearn.metrics.cohen_kappa_score`` and the rank correlations are
``scipy.stats.spearmanr`` / ``kendalltau``; undefined values are NaN (``None`` in JSON),
never a warning.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from rich.table import Table
from scipy import stats

SCORE_LABELS: tuple[int, ...] = (0, 1, 2, 3)
"""The rubric's scores (DESIGN.md "Scoring"; papers/004 §2.3)."""

REQUIRED_COLUMNS: tuple[str, ...] = ("answer_id", "rater", "score")
OPTIONAL_COLUMNS: tuple[str, ...] = ("model", "model_family")
MAX_REPORTED_ERRORS = 50
"""How many problems ``str(AgreementInputError)`` spells out; ``errors`` holds them all."""

KappaWeights = Literal["linear", "quadratic"] | None
Scores = Sequence[int] | npt.NDArray[np.integer[Any]]

_NAN = float("nan")


# --------------------------------------------------------------------------- #
# Pairwise statistics
# --------------------------------------------------------------------------- #


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
    papers/004 §3.4 and app. F.2 report plain kappa against human labels; app. L, table 13
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
    weight = _disagreement_weights(k, weights)
    rows = [0] * k  # rater a's count of each label
    cols = [0] * k  # rater b's count of each label
    for (i, j), count in pairs.items():
        rows[i] += count
        cols[j] += count
    observed = sum(weight[i][j] * count for (i, j), count in pairs.items())
    # n * expected disagreement, an integer: sum_ij w_ij * rows_i * cols_j
    expected_n = sum(weight[i][j] * rows[i] * cols[j] for i in range(k) for j in range(k))
    if expected_n == 0:
        return _NAN
    return 1.0 - (len(x) * observed) / expected_n


def exact_agreement(a: Scores, b: Scores) -> float:
    """Share of answers that both raters scored the same (papers/004 app. L, table 13).

    Raises
    ------
    ValueError
        Different lengths or no scores.
    """
    x, y = _aligned(a, b)
    return float(np.mean(np.asarray(x) == np.asarray(y)))


def within_one_agreement(a: Scores, b: Scores) -> float:
    """Share of answers whose two scores differ by at most one point.

    The "±1 Tol." column of papers/004 app. L, table 13.

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

    ``kappa`` is plain Cohen's kappa (papers/004 §3.4, app. F.2), ``weighted_kappa`` the
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
        return {
            "kappa": _json_float(self.kappa),
            "weighted_kappa": _json_float(self.weighted_kappa),
            "exact": _json_float(self.exact),
            "within_one": _json_float(self.within_one),
            "n": self.n,
        }


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
        return RaterAgreement(_NAN, _NAN, _NAN, _NAN, 0)
    return RaterAgreement(
        kappa=cohen_kappa(x, y, labels=labels),
        weighted_kappa=cohen_kappa(x, y, weights="quadratic", labels=labels),
        exact=exact_agreement(x, y),
        within_one=within_one_agreement(x, y),
        n=len(x),
    )


@dataclass(frozen=True, slots=True)
class RankingAgreement:
    """How alike two raters rank the models (papers/004 app. L, table 12).

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
        return {
            "spearman": _json_float(self.spearman),
            "spearman_p": _json_float(self.spearman_p),
            "kendall": _json_float(self.kendall),
            "kendall_p": _json_float(self.kendall_p),
            "n_models": self.n_models,
        }


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
        return RankingAgreement(_NAN, _NAN, _NAN, _NAN, len(x))
    rho = stats.spearmanr(x, y)
    tau = stats.kendalltau(x, y)
    return RankingAgreement(
        spearman=float(rho.statistic),
        spearman_p=float(rho.pvalue),
        kendall=float(tau.statistic),
        kendall_p=float(tau.pvalue),
        n_models=len(x),
    )


# --------------------------------------------------------------------------- #
# Ratings and the report
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class Rating:
    """One rater's 0-3 score of one answer.

    ``model`` is the model that wrote the answer and ``model_family`` its family (e.g.
    ``"OpenAI"``); both are optional, and answers without a model are left out of the
    per-model, ranking and family-bias parts of the report.
    """

    answer_id: str
    rater: str
    score: int
    model: str | None = None
    model_family: str | None = None


@dataclass(frozen=True, slots=True)
class FamilyBias:
    """A judge's lean toward its own model family (papers/004 app. L, table 14).

    ``own_mean`` is the judge's mean score over the ``n`` answers it scored that were
    written by models of ``family``; ``all_judge_mean`` the mean of every score that the
    non-reference raters (the judges, this one included) gave those answers;
    ``delta = own_mean - all_judge_mean``. NaN when ``n`` is 0.
    """

    family: str
    own_mean: float
    all_judge_mean: float
    delta: float
    n: int

    def to_json(self) -> dict[str, Any]:
        """``{"family", "own_mean", "all_judge_mean", "delta", "n"}``."""
        return {
            "family": self.family,
            "own_mean": _json_float(self.own_mean),
            "all_judge_mean": _json_float(self.all_judge_mean),
            "delta": _json_float(self.delta),
            "n": self.n,
        }


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """Calibration of judges against a reference rater (see `agreement_report`)."""

    reference: str
    raters: dict[str, RaterAgreement]
    """Each non-reference rater against the reference over the answers both scored."""
    models: dict[str, dict[str, RaterAgreement]]
    """model -> non-reference rater -> agreement with the reference on that model's answers."""
    ranking_agreement: dict[str, RankingAgreement]
    """``"A vs B"`` (A < B) -> rank correlation of their per-model means."""
    family_bias: dict[str, FamilyBias]
    """rater -> its own-family mean minus the all-judge mean."""

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data; NaN becomes ``None``.

        Shape: ``{"reference": str, "raters": {name: {...}}, "models": {model: {rater:
        {...}}}, "ranking_agreement": {"A vs B": {...}}, "family_bias": {rater: {...}}}``.
        """
        return {
            "reference": self.reference,
            "raters": {name: result.to_json() for name, result in self.raters.items()},
            "models": {
                model: {name: result.to_json() for name, result in per_rater.items()}
                for model, per_rater in self.models.items()
            },
            "ranking_agreement": {
                pair: result.to_json() for pair, result in self.ranking_agreement.items()
            },
            "family_bias": {name: bias.to_json() for name, bias in self.family_bias.items()},
        }


def agreement_report(
    ratings: Sequence[Rating],
    *,
    reference: str = "human",
    families: Mapping[str, str] | None = None,
    min_models: int = 2,
) -> AgreementReport:
    """Agreement of every rater with the reference, per model, in ranking and family bias.

    The statistics of papers/004 §3.4, app. F.2 (kappa against human labels, table 10)
    and app. L (tables 12-14). Every dictionary in the result is sorted by key.

    Parameters
    ----------
    ratings : sequence of Rating
        Scores; a rater scores an answer at most once (identical repeats are ignored).
    reference : str
        The rater the others are compared with, usually human experts.
    families : mapping of str to str, optional
        Rater -> the model family it belongs to (e.g. ``{"gpt-4o": "OpenAI"}``), matched
        against ``Rating.model_family``. Raters not in it get no family-bias entry.
    min_models : int
        A pair of raters gets a ranking agreement only when the answers both scored come
        from at least this many models (at least 2).

    Returns
    -------
    AgreementReport
        ``raters``: each non-reference rater vs the reference over the answers both
        scored. ``models``: the same per model (answers with a known model).
        ``ranking_agreement``: for every pair of raters, the reference included, keyed
        ``"A vs B"`` with A < B, the rank correlation of the two raters' mean scores per
        model over the answers both scored. ``family_bias``: see `FamilyBias`.

    Raises
    ------
    ValueError
        The reference scored nothing, a score is not 0-3, a rater scored an answer twice
        with different scores, two ratings of an answer name different models or model
        families, or ``min_models`` < 2.
    """
    if min_models < 2:
        raise ValueError(f"min_models must be at least 2, got {min_models}")
    table = _RatingTable.build(ratings)
    if reference not in table.scores:
        raise ValueError(
            f"the reference rater {reference!r} scored no answer"
            f" (raters: {', '.join(sorted(table.scores)) or 'none'})"
        )
    judges = sorted(r for r in table.scores if r != reference)

    raters = {judge: table.agreement(reference, judge) for judge in judges}

    model_names = sorted({m for m in table.model.values() if m is not None})
    models = {
        model: {judge: table.agreement(reference, judge, model=model) for judge in judges}
        for model in model_names
    }

    rankings: dict[str, RankingAgreement] = {}
    everyone = sorted(table.scores)
    for i, first in enumerate(everyone):
        for second in everyone[i + 1 :]:
            per_model = table.model_means(first, second)
            if len(per_model) >= min_models:
                means_a = [a for a, _ in per_model.values()]
                means_b = [b for _, b in per_model.values()]
                rankings[f"{first} vs {second}"] = ranking_agreement(means_a, means_b)

    family_bias: dict[str, FamilyBias] = {}
    for judge in judges:
        family = (families or {}).get(judge)
        if family is None:
            continue
        own_answers = [a for a in table.scores[judge] if table.family.get(a) == family]
        if not own_answers:
            family_bias[judge] = FamilyBias(family, _NAN, _NAN, _NAN, 0)
            continue
        own = [table.scores[judge][a] for a in own_answers]
        pooled = [
            table.scores[other][a]
            for other in judges
            for a in own_answers
            if a in table.scores[other]
        ]
        own_mean = math.fsum(own) / len(own)
        all_mean = math.fsum(pooled) / len(pooled)
        family_bias[judge] = FamilyBias(
            family, own_mean, all_mean, own_mean - all_mean, len(own_answers)
        )

    return AgreementReport(reference, raters, models, rankings, family_bias)


def default_judge(results: Mapping[str, RaterAgreement], *, min_n: int = 100) -> str | None:
    """The judge to use: the highest kappa against the reference (papers/004 app. F.2).

    Parameters
    ----------
    results : mapping of str to RaterAgreement
        Usually ``AgreementReport.raters``.
    min_n : int
        Only raters compared on at least this many answers qualify.

    Returns
    -------
    str or None
        The qualifying rater with the highest ``kappa``; ties go to the higher
        ``weighted_kappa`` (NaN counts as lowest), then to the name that sorts first.
        ``None`` when no rater has ``n >= min_n`` and a defined kappa.
    """
    candidates = [
        (name, result)
        for name, result in results.items()
        if result.n >= min_n and not math.isnan(result.kappa)
    ]
    if not candidates:
        return None

    def key(item: tuple[str, RaterAgreement]) -> tuple[float, float, str]:
        name, result = item
        weighted = -math.inf if math.isnan(result.weighted_kappa) else result.weighted_kappa
        return (-result.kappa, -weighted, name)

    return min(candidates, key=key)[0]


# --------------------------------------------------------------------------- #
# CSV input
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One thing wrong with a ratings file; ``str()`` is ``file:line: field: what``."""

    path: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


class AgreementInputError(ValueError):
    """A ratings file that cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[InputProblem]) -> None:
        self.errors = list(errors)
        shown = "\n".join(str(e) for e in self.errors[:MAX_REPORTED_ERRORS])
        more = len(self.errors) - MAX_REPORTED_ERRORS
        super().__init__(shown + (f"\n... and {more} more" if more > 0 else ""))


def read_ratings_csv(path: str | os.PathLike[str], *, reference: str = "human") -> list[Rating]:
    """Read ratings from a CSV file with a header row.

    Columns ``answer_id``, ``rater`` and ``score`` (an integer 0-3) are required;
    ``model`` and ``model_family`` are optional (empty means unknown); other columns are
    ignored. Values are stripped of surrounding blanks; blank lines are skipped; a UTF-8
    byte-order mark is allowed. A rating repeated with the same score is kept once.

    Parameters
    ----------
    path : str or os.PathLike
        The file; messages name it as given.
    reference : str
        The reference rater, which must score at least one answer.

    Returns
    -------
    list of Rating
        In file order.

    Raises
    ------
    AgreementInputError
        With every problem found, each ``file:line: field: what is wrong``: an empty file,
        a missing required column, a bad row (wrong number of fields, empty
        ``answer_id`` / ``rater``, a score that is not an integer 0-3), a rater scoring
        an answer twice with different scores (both lines named), an answer given two
        different models or families, or a reference rater that scores nothing.
    OSError
        The file cannot be read.
    """
    name = os.fspath(path)
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise AgreementInputError([InputProblem(name, line, "file", "not valid UTF-8")]) from None
    if not text.strip():
        raise AgreementInputError(
            [InputProblem(name, None, "file", "is empty; expected a header answer_id,rater,score")]
        )
    return _RatingsParser(name, reference).parse(text)


class _RatingsParser:
    def __init__(self, path: str, reference: str) -> None:
        self.path = path
        self.reference = reference
        self.problems: list[InputProblem] = []
        self.ratings: list[Rating] = []
        self.raters_seen: set[str] = set()
        self.scored: dict[tuple[str, str], tuple[int, int]] = {}  # (rater, answer) -> line, score
        self.answer_info: dict[tuple[str, str], tuple[int, str]] = {}  # (field, answer) -> line, v

    def problem(self, line: int | None, field: str, message: str) -> None:
        self.problems.append(InputProblem(self.path, line, field, message))

    def parse(self, text: str) -> list[Rating]:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        end = 0  # the last physical line read so far
        header: list[str] | None = None
        header_line = 0
        header_ok = False
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                self.problem(end + 1, "csv", str(exc))
                break
            line, end = end + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header, header_line = [cell.strip() for cell in row], line
                header_ok = self.check_header(header, line)
                if not header_ok:
                    break
                continue
            self.parse_row(header, row, line)
        if header is None:
            self.problem(None, "file", "is empty; expected a header answer_id,rater,score")
        elif not self.problems and not self.ratings:
            self.problem(header_line, "file", "has a header but no ratings")
        if header_ok and self.raters_seen and self.reference not in self.raters_seen:
            seen = ", ".join(sorted(self.raters_seen)) or "none"
            self.problem(
                None,
                "rater",
                f"the reference rater {self.reference!r} scores no answer (raters: {seen})",
            )
        if self.problems:
            raise AgreementInputError(self.problems)
        return self.ratings

    def check_header(self, header: list[str], line: int) -> bool:
        ok = True
        for column, count in Counter(header).items():
            if count > 1 and column in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
                self.problem(line, column, f"column appears {count} times in the header")
                ok = False
        for column in REQUIRED_COLUMNS:
            if column not in header:
                self.problem(
                    line, column, f"required column is missing (header: {','.join(header)})"
                )
                ok = False
        return ok

    def parse_row(self, header: list[str], row: list[str], line: int) -> None:
        if len(row) != len(header):
            self.problem(line, "row", f"has {len(row)} fields, the header has {len(header)}")
            return
        values = {column: cell.strip() for column, cell in zip(header, row, strict=True)}
        raw_score = dict(zip(header, row, strict=True))["score"]
        before = len(self.problems)
        answer_id, rater = values["answer_id"], values["rater"]
        if not answer_id:
            self.problem(line, "answer_id", "is empty")
        if rater:
            self.raters_seen.add(rater)
        else:
            self.problem(line, "rater", "is empty")
        score_text = values["score"]
        if score_text not in {"0", "1", "2", "3"}:
            self.problem(line, "score", f"{raw_score!r} is not an integer 0-3")
        if len(self.problems) > before:
            return
        score = int(score_text)
        model = values.get("model") or None
        family = values.get("model_family") or None
        earlier = self.scored.get((rater, answer_id))
        if earlier is not None:
            earlier_line, earlier_score = earlier
            if earlier_score != score:
                self.problem(
                    line,
                    "score",
                    f"rater {rater!r} scored answer {answer_id!r} twice with different "
                    f"scores: {earlier_score} on line {earlier_line}, {score} on line {line}",
                )
            return
        consistent = self.consistent(line, answer_id, "model", model)
        consistent = self.consistent(line, answer_id, "model_family", family) and consistent
        if not consistent:
            return
        self.scored[(rater, answer_id)] = (line, score)
        self.ratings.append(Rating(answer_id, rater, score, model, family))

    def consistent(self, line: int, answer_id: str, field: str, value: str | None) -> bool:
        if value is None:
            return True
        earlier = self.answer_info.setdefault((field, answer_id), (line, value))
        if earlier[1] == value:
            return True
        self.problem(
            line,
            field,
            f"answer {answer_id!r} has {field} {value!r} here but {earlier[1]!r} "
            f"on line {earlier[0]}",
        )
        return False


# --------------------------------------------------------------------------- #
# Tables for people
# --------------------------------------------------------------------------- #


def render_tables(report: AgreementReport) -> list[Table]:
    """``rich`` tables of the report, for ``proctor judge agreement``.

    The agreement with the reference always; then one table per non-empty part: per
    model, ranking agreement and family bias. Undefined values print as ``-``.
    """
    agreement_columns = ("n", "kappa", "weighted kappa", "exact", "within ±1")
    summary = _table(
        f"Agreement with {report.reference!r} (papers/004 app. F.2, L)",
        ("rater",),
        agreement_columns,
    )
    for name, result in report.raters.items():
        summary.add_row(name, *_agreement_cells(result))
    tables = [summary]

    if report.models:
        per_model = _table(
            f"Agreement with {report.reference!r} per model",
            ("model", "rater"),
            agreement_columns,
        )
        for model, per_rater in report.models.items():
            for name, result in per_rater.items():
                per_model.add_row(model, name, *_agreement_cells(result))
        tables.append(per_model)

    if report.ranking_agreement:
        ranking = _table(
            "Model ranking agreement (papers/004 app. L, table 12)",
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
            "Family bias (papers/004 app. L, table 14)",
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


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


@dataclass(slots=True)
class _RatingTable:
    scores: dict[str, dict[str, int]]  # rater -> answer -> score
    model: dict[str, str | None]  # answer -> model
    family: dict[str, str | None]  # answer -> model family

    @classmethod
    def build(cls, ratings: Iterable[Rating]) -> _RatingTable:
        table = cls({}, {}, {})
        for rating in ratings:
            score: object = rating.score
            if (
                isinstance(score, bool)
                or not isinstance(score, int | np.integer)
                or not (0 <= score <= 3)
            ):
                raise ValueError(
                    f"{rating.rater!r} on answer {rating.answer_id!r}: score {rating.score!r}"
                    " is not an integer 0-3"
                )
            scores = table.scores.setdefault(rating.rater, {})
            earlier = scores.setdefault(rating.answer_id, rating.score)
            if earlier != rating.score:
                raise ValueError(
                    f"rater {rating.rater!r} scored answer {rating.answer_id!r} twice with "
                    f"different scores: {earlier} and {rating.score}"
                )
            _merge(table.model, rating.answer_id, "model", rating.model)
            _merge(table.family, rating.answer_id, "model_family", rating.model_family)
        return table

    def common(self, first: str, second: str, *, model: str | None = None) -> list[str]:
        """Answers both raters scored (of ``model`` if given), sorted."""
        a, b = self.scores[first], self.scores[second]
        shared = a.keys() & b.keys()
        if model is not None:
            shared = {answer for answer in shared if self.model.get(answer) == model}
        return sorted(shared)

    def agreement(self, first: str, second: str, *, model: str | None = None) -> RaterAgreement:
        answers = self.common(first, second, model=model)
        return rater_agreement(
            [self.scores[first][a] for a in answers], [self.scores[second][a] for a in answers]
        )

    def model_means(self, first: str, second: str) -> dict[str, tuple[float, float]]:
        """model -> (mean of first, mean of second) over answers both scored, sorted."""
        grouped: dict[str, tuple[list[int], list[int]]] = {}
        for answer in self.common(first, second):
            model = self.model.get(answer)
            if model is None:
                continue
            a, b = grouped.setdefault(model, ([], []))
            a.append(self.scores[first][answer])
            b.append(self.scores[second][answer])
        return {
            model: (math.fsum(a) / len(a), math.fsum(b) / len(b))
            for model, (a, b) in sorted(grouped.items())
        }


def _merge(known: dict[str, str | None], answer_id: str, field: str, value: str | None) -> None:
    earlier = known.get(answer_id)
    if earlier is None:
        known[answer_id] = value
    elif value is not None and value != earlier:
        raise ValueError(f"answer {answer_id!r} has {field} {earlier!r} and {value!r}")


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


def _disagreement_weights(k: int, weights: KappaWeights) -> list[list[int]]:
    if weights is None:
        return [[int(i != j) for j in range(k)] for i in range(k)]
    if weights == "linear":
        return [[abs(i - j) for j in range(k)] for i in range(k)]
    if weights == "quadratic":
        return [[(i - j) ** 2 for j in range(k)] for i in range(k)]
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _agreement_cells(result: RaterAgreement) -> list[str]:
    return [
        str(result.n),
        _number(result.kappa),
        _number(result.weighted_kappa),
        _percent(result.exact),
        _percent(result.within_one),
    ]


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
