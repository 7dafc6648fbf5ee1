"""Agreement of our ranking with an imported static leaderboard (LLMEval-Fair §3.3, table 3).

LLMEval-Fair's Finding 5 compares its dynamic ranking with static benchmarks (AGIEval,
C-Eval): Spearman rho (table 3a), the per-model rank displacement
``Delta = Rank_static - Rank_ours`` (table 3b; negative means the static benchmark ranks
the model higher than we do) and the share of model pairs whose order is inverted
("26.7% of model pairs exhibit rank inversions against C-Eval", 4 of the 15 pairs of
table 3b).

* :func:`read_leaderboard_csv`: a static leaderboard from CSV, ``model,score`` or
  ``model,rank`` (:class:`StaticLeaderboard`); every problem collected into one
  :class:`LeaderboardInputError`;
* :func:`compare_rankings`: the comparison on the models both sides rank
  (:class:`RankComparison`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np

from bank.formats.input_problems import InputError, InputProblem, numbered_rows, read_text

VALUE_COLUMNS: tuple[str, ...] = ("score", "rank")


class LeaderboardInputError(InputError):
    """A leaderboard file that cannot be used; ``errors`` lists every problem found."""


@dataclass(frozen=True, slots=True)
class StaticLeaderboard:
    """A static leaderboard as read from CSV.

    Attributes
    ----------
    column : {"score", "rank"}
        Which column the file gives: a score (higher is better) or a rank (1 is best).
    values : dict of str to float
        Model -> the value of that column, in file order.
    """

    column: Literal["score", "rank"]
    values: dict[str, float]

    @property
    def scores(self) -> dict[str, float]:
        """Model -> a value where higher is better, for :func:`compare_rankings`.

        The scores themselves, or the negated ranks.
        """
        if self.column == "score":
            return dict(self.values)
        return {model: -rank for model, rank in self.values.items()}


def read_leaderboard_csv(path: str | os.PathLike[str]) -> StaticLeaderboard:
    """Read a static leaderboard from a CSV file with a header row.

    The header has a ``model`` column and exactly one of ``score`` (a finite number,
    higher is better) and ``rank`` (a positive integer, 1 is best; equal ranks are ties).
    Other columns are ignored; values are stripped of surrounding blanks; blank lines are
    skipped; a UTF-8 byte-order mark is allowed.

    Parameters
    ----------
    path : str or os.PathLike
        The file; messages name it as given.

    Returns
    -------
    StaticLeaderboard

    Raises
    ------
    LeaderboardInputError
        With every problem found, each ``file:line: column: what is wrong``: a file that
        is empty, not UTF-8 or not valid CSV; a header missing ``model`` or both value
        columns, holding both, or naming a column twice; a row with the wrong number of
        fields, an empty model, a model listed twice (both lines named), a score that is
        not a finite number or a rank that is not a positive integer; no rows.
    OSError
        The file cannot be read.
    """
    name, text = read_text(path, LeaderboardInputError)
    return _LeaderboardParser(name).parse(text)


class _LeaderboardParser:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[InputProblem] = []
        self.values: dict[str, float] = {}
        self.lines: dict[str, int] = {}

    def problem(self, line: int | None, column: str, message: str) -> None:
        self.problems.append(InputProblem(self.path, line, column, message))

    def parse(self, text: str) -> StaticLeaderboard:
        header: list[str] | None = None
        header_line = 0
        column: Literal["score", "rank"] | None = None
        for line, row in numbered_rows(text, path=self.path, problems=self.problems):
            if header is None:
                header, header_line = [cell.strip() for cell in row], line
                column = self.check_header(header, line)
                if column is None:
                    break
                continue
            assert column is not None
            self.parse_row(header, row, line, column)
        if header is None:
            self.problem(None, "file", "is empty; expected a header model,score or model,rank")
        elif column is not None and not self.values and not self.problems:
            self.problem(header_line, "file", "has a header but no models")
        if self.problems:
            raise LeaderboardInputError(self.problems)
        assert column is not None
        return StaticLeaderboard(column=column, values=self.values)

    def check_header(self, header: list[str], line: int) -> Literal["score", "rank"] | None:
        ok = True
        for name, count in Counter(header).items():
            if count > 1 and name in ("model", *VALUE_COLUMNS):
                self.problem(line, name, f"column appears {count} times in the header")
                ok = False
        if "model" not in header:
            self.problem(line, "model", f"required column is missing (header: {','.join(header)})")
            ok = False
        present = [c for c in VALUE_COLUMNS if c in header]
        if not present:
            self.problem(
                line,
                "score",
                f"the header needs a score or a rank column (header: {','.join(header)})",
            )
            ok = False
        elif len(present) > 1:
            self.problem(line, "rank", "the header has both score and rank; give one of them")
            ok = False
        if not ok:
            return None
        return "score" if present[0] == "score" else "rank"

    def parse_row(
        self, header: list[str], row: list[str], line: int, column: Literal["score", "rank"]
    ) -> None:
        if len(row) != len(header):
            self.problem(line, "row", f"has {len(row)} fields, the header has {len(header)}")
            return
        cells = dict(zip(header, row, strict=True))
        model = cells["model"].strip()
        raw = cells[column]
        value = _parse_value(raw.strip(), column)
        if not model:
            self.problem(line, "model", "is empty")
        elif model in self.lines:
            self.problem(
                line, "model", f"{model!r} is listed twice: on line {self.lines[model]} and here"
            )
        else:
            self.lines[model] = line
        if value is None:
            what = "a finite number" if column == "score" else "a positive integer"
            self.problem(line, column, f"{raw!r} is not {what}")
        if model and value is not None and self.lines.get(model) == line:
            self.values[model] = value


def _parse_value(text: str, column: str) -> float | None:
    if column == "rank":
        if not text.isdigit() or not text.isascii() or int(text) < 1:
            return None
        return float(int(text))
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class RankComparison:
    """How our ranking compares with a static one (LLMEval-Fair (Zhang et al.) table 3).

    Ranks are computed among the common models only, 1 for the best, tied values sharing
    the mean of their ranks (``scipy.stats.rankdata(method="average")``).

    Attributes
    ----------
    spearman, spearman_p : float
        ``scipy.stats.spearmanr`` of the two sides' values on the common models, and its
        two-sided p-value (table 3a).
    kendall, kendall_p : float
        ``scipy.stats.kendalltau`` (tau-b) and its p-value. All four are NaN with fewer
        than two common models or when a side gives every common model the same value.
    our_ranks, their_ranks : dict of str to float
        Model -> rank on each side; in our order (best first).
    displacement : dict of str to float
        Model -> ``their rank - our rank`` (table 3b's ``Delta``; negative: the static
        leaderboard ranks the model higher than we do); in our order.
    inverted_pairs : tuple of (str, str)
        The pairs, ``(our better, our worse)``, that the other side orders the other way.
    n_ordered_pairs : int
        Common pairs that both sides order strictly (not tied on either side).
    inverted_share : float
        ``len(inverted_pairs) / n_ordered_pairs``: pairs tied on either side count neither
        as inverted nor in the denominator (with no ties the denominator is all
        ``n (n - 1) / 2`` pairs, as in the paper); NaN when no pair is ordered on both
        sides.
    n_common : int
        Models on both sides.
    only_ours, only_theirs : tuple of str
        Models on one side only, in that side's order; they take no part in the numbers.
    """

    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float
    our_ranks: dict[str, float]
    their_ranks: dict[str, float]
    displacement: dict[str, float]
    inverted_pairs: tuple[tuple[str, str], ...]
    n_ordered_pairs: int
    inverted_share: float
    n_common: int
    only_ours: tuple[str, ...]
    only_theirs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; NaN becomes ``None``."""

        def num(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {
            "spearman": num(self.spearman),
            "spearman_p": num(self.spearman_p),
            "kendall": num(self.kendall),
            "kendall_p": num(self.kendall_p),
            "our_ranks": dict(self.our_ranks),
            "their_ranks": dict(self.their_ranks),
            "displacement": dict(self.displacement),
            "inverted_pairs": [list(p) for p in self.inverted_pairs],
            "n_ordered_pairs": self.n_ordered_pairs,
            "inverted_share": num(self.inverted_share),
            "n_common": self.n_common,
            "only_ours": list(self.only_ours),
            "only_theirs": list(self.only_theirs),
        }


def _check_values(side: str, values: Mapping[str, float]) -> None:
    for model, value in values.items():
        if isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"{side}: model {model!r} has {value!r}, not a finite number")


def compare_rankings(ours: Mapping[str, float], theirs: Mapping[str, float]) -> RankComparison:
    """Compare our ranking with a static leaderboard's (LLMEval-Fair §3.3, table 3).

    Parameters
    ----------
    ours, theirs : mapping of str to float
        Model -> score, higher is better on both sides (for a leaderboard of ranks pass
        :attr:`StaticLeaderboard.scores`, the negated ranks).

    Returns
    -------
    RankComparison
        Computed on the models both sides rank.

    Raises
    ------
    ValueError
        A value that is not a finite number.

    Examples
    --------
    >>> c = compare_rankings({"a": 3.0, "b": 2.0, "c": 1.0}, {"a": 1.0, "b": 3.0, "d": 0.0})
    >>> c.displacement, c.inverted_pairs, c.only_ours, c.only_theirs
    ({'a': 1.0, 'b': -1.0}, (('a', 'b'),), ('c',), ('d',))
    """
    _check_values("ours", ours)
    _check_values("theirs", theirs)
    from scipy import stats  # scipy.stats takes ~1 s to import: not at every CLI start

    common_in_input = [m for m in ours if m in theirs]
    x_all = np.array([ours[m] for m in common_in_input], dtype=float)
    # our order: best first, equal scores in input order
    order = sorted(range(len(common_in_input)), key=lambda i: -x_all[i])
    common = [common_in_input[i] for i in order]
    x = np.array([ours[m] for m in common], dtype=float)
    y = np.array([theirs[m] for m in common], dtype=float)
    n = len(common)
    our_rank = stats.rankdata(-x, method="average") if n else np.empty(0)
    their_rank = stats.rankdata(-y, method="average") if n else np.empty(0)
    nan = math.nan
    rho = rho_p = tau = tau_p = nan
    if n >= 2 and not np.all(x == x[0]) and not np.all(y == y[0]):
        spearman = stats.spearmanr(x, y)
        kendall = stats.kendalltau(x, y)
        rho, rho_p = float(spearman.statistic), float(spearman.pvalue)
        tau, tau_p = float(kendall.statistic), float(kendall.pvalue)
    inverted: list[tuple[str, str]] = []
    ordered = 0
    for i, j in combinations(range(n), 2):
        product = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        if product != 0:
            ordered += 1
        if product < 0:
            better, worse = (i, j) if x[i] > x[j] else (j, i)
            inverted.append((common[better], common[worse]))
    return RankComparison(
        spearman=rho,
        spearman_p=rho_p,
        kendall=tau,
        kendall_p=tau_p,
        our_ranks={m: float(r) for m, r in zip(common, our_rank, strict=True)},
        their_ranks={m: float(r) for m, r in zip(common, their_rank, strict=True)},
        displacement={
            m: float(t - o) for m, o, t in zip(common, our_rank, their_rank, strict=True)
        },
        inverted_pairs=tuple(inverted),
        n_ordered_pairs=ordered,
        inverted_share=len(inverted) / ordered if ordered else nan,
        n_common=n,
        only_ours=tuple(m for m in ours if m not in theirs),
        only_theirs=tuple(m for m in theirs if m not in ours),
    )
