"""A model-by-dimension score table from CSV or TSV text (``proctor analyze``).

The table has a header row, one row per model, and:

* a model column: ``model`` (any case) or, failing that, the first column whose cells are
  not all numbers (known non-dimension columns aside);
* optionally an absolute-score column, the first of :data:`ABSOLUTE_COLUMNS` present (any
  case): ``S_abs`` (LLMEval-Fair (Zhang et al.) table 8), ``absolute`` or ``overall``;
* numeric dimension columns: by default every other column except the known
  non-dimension columns :data:`NON_DIMENSION_COLUMNS` (``R_sota``, ``relative``,
  ``rank``, ``access``, ``ref_year``); or exactly the columns the caller names.

Every cell of the dimension and absolute columns must be a finite number. Problems are
collected and raised together as a :class:`TableInputError` whose lines read
``file:line: column: what is wrong``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bank.formats.input_problems import InputError, InputProblem, numbered_rows
from judge.ranking.diagnostics import ScoreMatrix

MODEL_COLUMN = "model"
ABSOLUTE_COLUMNS: tuple[str, ...] = ("S_abs", "absolute", "overall")
"""Names of an absolute-score column, in order of preference (matched in any case)."""
NON_DIMENSION_COLUMNS: tuple[str, ...] = ("R_sota", "relative", "rank", "access", "ref_year")
"""Columns that are never dimensions unless named explicitly (matched in any case):
published relative scores and ranks (derived, not measured) and LLMEval-Fair table 8's
``access`` (open/closed weights) and ``ref_year``."""

NO_ABSOLUTE = ""
"""Pass as ``absolute_column`` to use no absolute-score column even if one is present."""


class TableInputError(InputError):
    """A score table that cannot be used; ``errors`` lists every problem found."""


@dataclass(frozen=True, slots=True, eq=False)
class ScoreTable:
    """A parsed score table.

    Attributes
    ----------
    matrix : ScoreMatrix
        Models (in file order) by dimension columns (in file order, or as named).
    model_column : str
    absolute_column : str or None
        The absolute-score column used, if any.
    absolute : dict of str to float or None
        Model -> its absolute score, from ``absolute_column``.
    ignored_columns : tuple of str
        Columns that are neither the model, the absolute score nor a dimension.
    lines : dict of str to int
        Model -> its line in the file.
    """

    matrix: ScoreMatrix
    model_column: str
    absolute_column: str | None
    absolute: dict[str, float] | None
    ignored_columns: tuple[str, ...]
    lines: dict[str, int]

    @property
    def overall_source(self) -> str:
        """Where :meth:`overall` comes from: the absolute column or the dimension mean."""
        return self.absolute_column or "mean of dimensions"

    def overall(self) -> dict[str, float]:
        """Model -> overall score: the absolute column if present, else the unweighted
        mean of the model's dimension scores."""
        return dict(self.absolute) if self.absolute is not None else self.matrix.mean_scores()


def sniff_delimiter(name: str, text: str) -> Literal[",", "\t", ";", "|"]:
    """The field delimiter: by extension (``.tsv``/``.tab`` tab, ``.csv`` comma), else
    ``csv.Sniffer`` on the first lines, else a tab if the first line has one, else a
    comma."""
    lower = name.lower()
    if lower.endswith((".tsv", ".tab")):
        return "\t"
    if lower.endswith(".csv"):
        return ","
    sample = "\n".join(text.splitlines()[:20])
    try:
        found = csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        found = "\t" if "\t" in (text.splitlines() or [""])[0] else ","
    if found == "\t":
        return "\t"
    if found == ";":
        return ";"
    if found == "|":
        return "|"
    return ","


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value


def parse_score_table(
    text: str,
    *,
    name: str,
    delimiter: str | None = None,
    dimensions: Sequence[str] | None = None,
    model_column: str | None = None,
    absolute_column: str | None = None,
) -> ScoreTable:
    """Parse a score table.

    Parameters
    ----------
    text : str
        The file's text (a leading byte-order mark is dropped; blank lines are skipped;
        cells are stripped of surrounding blanks).
    name : str
        The file's name, for messages and for :func:`sniff_delimiter`.
    delimiter : str, optional
        The field delimiter (default: :func:`sniff_delimiter`).
    dimensions : sequence of str, optional
        Exactly these columns are the dimensions, in this order; other columns are
        ignored. Default: every column except the model, absolute-score and
        :data:`NON_DIMENSION_COLUMNS` columns.
    model_column : str, optional
        The model column (default: ``model`` in any case, else the first column whose
        cells are not all numbers).
    absolute_column : str, optional
        The absolute-score column (default: the first of :data:`ABSOLUTE_COLUMNS`
        present); :data:`NO_ABSOLUTE` (``""``) for none.

    Returns
    -------
    ScoreTable

    Raises
    ------
    TableInputError
        With every problem found: an empty file, a duplicate or empty header name, a named
        column that does not exist, no model column, no dimension column, a row with the
        wrong number of fields, an empty model name, a model listed twice (both lines
        named), or a dimension or absolute cell that is empty or not a finite number.
    """
    return _Parser(text.removeprefix("\ufeff"), name, delimiter).parse(
        dimensions, model_column, absolute_column
    )


class _Parser:
    def __init__(self, text: str, name: str, delimiter: str | None) -> None:
        self.text = text
        self.name = name
        self.delimiter = delimiter or sniff_delimiter(name, text)
        self.problems: list[InputProblem] = []

    def problem(self, line: int | None, column: str, message: str) -> None:
        self.problems.append(InputProblem(self.name, line, column, message))

    def fail(self) -> TableInputError:
        return TableInputError(self.problems)

    def rows(self) -> list[tuple[int, list[str]]]:
        found = numbered_rows(
            self.text,
            path=self.name,
            problems=self.problems,
            delimiter=self.delimiter,
            strict=False,
        )
        return [(line, [cell.strip() for cell in row]) for line, row in found]

    def parse(
        self,
        dimensions: Sequence[str] | None,
        model_column: str | None,
        absolute_column: str | None,
    ) -> ScoreTable:
        rows = self.rows()
        if not rows:
            self.problem(None, "file", "is empty; expected a header row and one row per model")
            raise self.fail()
        (header_line, header), body = rows[0], rows[1:]
        self.check_header(header, header_line)
        if not body:
            self.problem(header_line, "file", "has a header but no models")
        if self.problems:
            raise self.fail()
        for line, row in body:
            if len(row) != len(header):
                self.problem(line, "row", f"has {len(row)} fields, the header has {len(header)}")
        if self.problems:
            raise self.fail()
        columns = {name: [row[i] for _, row in body] for i, name in enumerate(header)}
        model = self.pick_model(header, columns, model_column, header_line)
        absolute = self.pick_absolute(header, absolute_column, header_line)
        dims = self.pick_dimensions(header, dimensions, model, absolute, header_line)
        if self.problems or model is None:
            raise self.fail()
        lines = [line for line, _ in body]
        names = self.model_names(columns[model], lines, model)
        values = {c: self.numbers(columns[c], lines, c) for c in (*dims, *filter(None, [absolute]))}
        if self.problems:
            raise self.fail()
        used = {model, *dims, *filter(None, [absolute])}
        scores = [[values[d][i] for d in dims] for i in range(len(names))]
        return ScoreTable(
            matrix=ScoreMatrix(names, dims, scores),
            model_column=model,
            absolute_column=absolute,
            absolute=None if absolute is None else dict(zip(names, values[absolute], strict=True)),
            ignored_columns=tuple(c for c in header if c not in used),
            lines=dict(zip(names, lines, strict=True)),
        )

    def check_header(self, header: list[str], line: int) -> None:
        seen: set[str] = set()
        for position, column in enumerate(header, start=1):
            if not column:
                self.problem(line, f"column {position}", "has no name in the header")
            elif column in seen:
                self.problem(line, column, "appears twice in the header")
            seen.add(column)

    def find(self, header: list[str], wanted: str) -> str | None:
        return next((c for c in header if c.casefold() == wanted.casefold()), None)

    def pick_model(
        self,
        header: list[str],
        columns: dict[str, list[str]],
        named: str | None,
        line: int,
    ) -> str | None:
        if named is not None:
            if named not in header:
                self.problem(line, named, f"model column not found (columns: {', '.join(header)})")
                return None
            return named
        found = self.find(header, MODEL_COLUMN)
        if found is not None:
            return found
        skip = {c.casefold() for c in (*NON_DIMENSION_COLUMNS, *ABSOLUTE_COLUMNS)}
        for column in header:
            if column.casefold() in skip:
                continue
            if any(_number(cell) is None for cell in columns[column]):
                return column
        self.problem(
            line,
            MODEL_COLUMN,
            "no model column: name one 'model' or give the models as text in some column",
        )
        return None

    def pick_absolute(self, header: list[str], named: str | None, line: int) -> str | None:
        if named == NO_ABSOLUTE:
            return None
        if named is not None:
            if named not in header:
                self.problem(
                    line, named, f"absolute-score column not found (columns: {', '.join(header)})"
                )
                return None
            return named
        for candidate in ABSOLUTE_COLUMNS:
            found = self.find(header, candidate)
            if found is not None:
                return found
        return None

    def pick_dimensions(
        self,
        header: list[str],
        named: Sequence[str] | None,
        model: str | None,
        absolute: str | None,
        line: int,
    ) -> tuple[str, ...]:
        if named is not None:
            for column in named:
                if column not in header:
                    self.problem(
                        line, column, f"dimension column not found (columns: {', '.join(header)})"
                    )
                elif column in (model, absolute):
                    role = "model" if column == model else "absolute-score"
                    self.problem(line, column, f"is the {role} column, not a dimension")
            if len(set(named)) != len(named):
                self.problem(line, "dimensions", "a dimension is named twice")
            if not named:
                self.problem(line, "dimensions", "no dimension columns were named")
            return tuple(named)
        skip = {c.casefold() for c in NON_DIMENSION_COLUMNS}
        dims = tuple(c for c in header if c not in (model, absolute) and c.casefold() not in skip)
        if not dims and model is not None:
            self.problem(line, "dimensions", "the table has no dimension columns")
        return dims

    def model_names(self, cells: list[str], lines: list[int], column: str) -> list[str]:
        first: dict[str, int] = {}
        for cell, line in zip(cells, lines, strict=True):
            if not cell:
                self.problem(line, column, "the model name is empty")
            elif cell in first:
                self.problem(line, column, f"model {cell!r} is listed twice (line {first[cell]})")
            else:
                first[cell] = line
        return cells

    def numbers(self, cells: list[str], lines: list[int], column: str) -> list[float]:
        values: list[float] = []
        for cell, line in zip(cells, lines, strict=True):
            value = _number(cell)
            if not cell:
                self.problem(line, column, "is empty; expected a number")
            elif value is None:
                self.problem(line, column, f"{cell!r} is not a number")
            elif not math.isfinite(value):
                self.problem(line, column, f"{cell!r} is not a finite number")
            values.append(math.nan if value is None else value)
        return values
