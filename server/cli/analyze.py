"""``proctor analyze TABLE``: relative scores and capability diagnostics of any score table.

Reads a CSV/TSV score table (:mod:`judge.ranking.score_table`) and reports:

* ``relative``: ``R = overall / overall(anchor) * 100`` (LLMEval-Fair, Zhang et al., the
  relative score), where a model's overall score is its absolute-score column (``S_abs``,
  ``absolute`` or ``overall``) if the table has one, else the mean of its dimension scores;
  the anchor is ``--anchor`` or the top model;
* ``anisotropy_index``: 1 minus the mean Pearson correlation, across models, over all
  unique pairs of dimension columns (ReLE: A Scalable System and Structured Benchmark for
  Diagnosing Capability Anisotropy in Chinese LLMs, the anisotropy index);
* ``rsa``: Rank Stability Amplitude per model over the ``--schemes`` weighting schemes, or
  ReLE's three schemes when the dimensions are the ten LLMEval-Fair disciplines
  (:data:`judge.ranking.diagnostics.RELE_SCHEMES`);
* ``capability_inconsistency``: per model (ReLE; see
  :func:`judge.ranking.diagnostics.capability_inconsistency`).

Input problems are printed as ``error: file:line: column: what`` and exit with status 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from judge.numbers import format_number, json_float
from judge.ranking.diagnostics import (
    AnisotropyResult,
    CapabilityInconsistency,
    RankStability,
    anisotropy_index,
    capability_inconsistency,
    competition_ranks,
    rank_stability_amplitude,
    rele_schemes_for,
)
from judge.ranking.score_table import NO_ABSOLUTE, ScoreTable, TableInputError, parse_score_table
from judge.ranking.scores import RelativeScores, relative_scores
from server.cli.groups import command_registrar
from server.cli.options import JsonFlag
from server.cli.output import CommandInputError, exit_on_input_error, stdout
from server.cli.schemes import read_schemes

RELE = "rele"
"""``schemes_source`` when ReLE's schemes were used."""


def analyze_command(
    table: Annotated[
        Path,
        typer.Argument(
            help="Score table (CSV or TSV): a model column and numeric dimension columns, "
            "optionally an absolute-score column (S_abs, absolute or overall).",
            show_default=False,
        ),
    ],
    anchor: Annotated[
        str | None,
        typer.Option("--anchor", help="Anchor model for R (default: the top model)."),
    ] = None,
    schemes: Annotated[
        Path | None,
        typer.Option(
            "--schemes",
            help='Weighting schemes for RSA, JSON {"scheme": {"dimension": weight, ...}}. '
            "Default: ReLE's three schemes if the dimensions are LLMEval-Fair disciplines "
            "(on some of the ten, renormalised over those), else no RSA.",
        ),
    ] = None,
    as_json: JsonFlag = False,
    dimensions: Annotated[
        str | None,
        typer.Option(
            "--dimensions",
            help="Comma-separated dimension columns (default: every column except the "
            "model, the absolute score and R_sota, relative, rank, access, ref_year).",
        ),
    ] = None,
    model_column: Annotated[
        str | None,
        typer.Option(
            "--model-column",
            help="The model column (default: 'model', else the first non-numeric column).",
        ),
    ] = None,
    absolute: Annotated[
        str | None,
        typer.Option(
            "--absolute",
            help="The absolute-score column, or 'none' to use the mean of the dimensions "
            "(default: S_abs, absolute or overall if present).",
        ),
    ] = None,
) -> None:
    """Relative scores and diagnostics of a score table.

    Relative scores R (anchor = 100), the anisotropy index, the Rank Stability Amplitude
    over weighting schemes and each model's capability inconsistency."""
    with exit_on_input_error():
        report = _analyze(table, anchor, schemes, dimensions, model_column, absolute)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        report.render(stdout)


register = command_registrar(
    "analyze", analyze_command, "proctor analyze scores.csv --anchor GPT-4o --json"
)


@dataclass
class _Report:
    path: Path
    table: ScoreTable
    relative: RelativeScores
    anisotropy: AnisotropyResult
    schemes: dict[str, dict[str, float]] | None
    schemes_source: str | None
    rsa: dict[str, RankStability] | None
    inconsistency: CapabilityInconsistency
    overall: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        self.overall = self.table.overall()

    def to_json(self) -> dict[str, Any]:
        matrix = self.table.matrix
        rsa = self.rsa
        return {
            "table": str(self.path),
            "models": list(matrix.models),
            "dimensions": list(matrix.dimensions),
            "ignored_columns": list(self.table.ignored_columns),
            "overall_source": self.table.overall_source,
            "overall": self.overall,
            "anchor": self.relative.anchor,
            "anchor_designated": self.relative.designated,
            "relative": self.relative.relative,
            "anisotropy_index": json_float(self.anisotropy.index),
            "mean_correlation": json_float(self.anisotropy.mean_correlation),
            "correlation_pairs": self.anisotropy.n_pairs,
            "undefined_correlation_pairs": [list(p) for p in self.anisotropy.undefined_pairs],
            "schemes_source": self.schemes_source,
            "schemes": self.schemes,
            "rsa": None if rsa is None else {m: r.amplitude for m, r in rsa.items()},
            "mean_rsa": None if rsa is None else _mean([r.amplitude for r in rsa.values()]),
            "scheme_ranks": None
            if rsa is None or self.schemes is None
            else {s: {m: r.ranks[s] for m, r in rsa.items()} for s in self.schemes},
            "capability_inconsistency": self.inconsistency.values,
            "ci_difficulty": self.inconsistency.difficulty,
            "ci_difficulty_anchors": list(self.inconsistency.anchors),
            "ci_floor": self.inconsistency.floor,
            "ci_floored": list(self.inconsistency.floored),
        }

    def render(self, console: Console) -> None:
        matrix = self.table.matrix
        ignored = ", ".join(self.table.ignored_columns) or "none"
        console.print(
            f"{self.path}: {len(matrix.models)} models x {len(matrix.dimensions)} dimensions "
            f"({', '.join(matrix.dimensions)}); ignored columns: {ignored}",
            markup=False,
        )
        how = "designated" if self.relative.designated else "the top model"
        console.print(
            f"overall = {self.table.overall_source}; anchor {self.relative.anchor} "
            f"({how}, overall {self.relative.anchor_score:.2f}) = 100",
            markup=False,
        )
        a = self.anisotropy
        skipped = f", {len(a.undefined_pairs)} undefined (constant column)"
        console.print(
            f"anisotropy index {format_number(a.index, 4)}: "
            f"mean Pearson r {format_number(a.mean_correlation, 4)}"
            f" over {a.n_pairs} dimension pairs{skipped if a.undefined_pairs else ''}",
            markup=False,
        )
        if self.rsa is None or self.schemes is None:
            console.print(
                "RSA: not computed; the dimensions are not the ten LLMEval-Fair disciplines, "
                "pass --schemes FILE",
                markup=False,
            )
        else:
            source = "ReLE §6.1" if self.schemes_source == RELE else str(self.schemes_source)
            mean = _mean([r.amplitude for r in self.rsa.values()])
            console.print(
                f"RSA over {len(self.schemes)} schemes ({', '.join(self.schemes)}; {source}): "
                f"mean {mean:.2f}, max {max(r.amplitude for r in self.rsa.values())}",
                markup=False,
            )
        ci = self.inconsistency
        anchors = f"top {len(ci.anchors)} models" if ci.anchors else "given"
        console.print(
            f"capability inconsistency: std / max(mean, {ci.floor:g}) of scores divided by "
            f"the difficulty of each dimension (mean of the {anchors})",
            markup=False,
        )
        console.print(self.table_of_models())

    def table_of_models(self) -> Table:
        models = self.table.matrix.models
        caption = (
            "scheme columns: the model's rank under that weighting scheme"
            if (self.rsa is not None)
            else None
        )
        table = Table(title="Models by relative score", title_justify="left", caption=caption)
        table.add_column("rank", justify="right")
        table.add_column("model")
        table.add_column("overall", justify="right")
        table.add_column("R", justify="right")
        scheme_names = list(self.schemes or {}) if self.rsa is not None else []
        for name in scheme_names:
            table.add_column(name, justify="right")
        if self.rsa is not None:
            table.add_column("RSA", justify="right")
        table.add_column("CI", justify="right")
        ranks = competition_ranks([self.overall[m] for m in models])
        order = sorted(range(len(models)), key=lambda i: (ranks[i], i))
        for i in order:
            model = models[i]
            cells = [
                str(ranks[i]),
                model,
                f"{self.overall[model]:.2f}",
                f"{self.relative.relative[model]:.2f}",
            ]
            if self.rsa is not None:
                stability = self.rsa[model]
                cells += [str(stability.ranks[name]) for name in scheme_names]
                cells.append(str(stability.amplitude))
            cells.append(f"{self.inconsistency.values[model]:.3f}")
            table.add_row(*cells)
        return table


def _mean(values: list[int]) -> float:
    return sum(values) / len(values)


def _analyze(
    path: Path,
    anchor: str | None,
    schemes_path: Path | None,
    dimensions: str | None,
    model_column: str | None,
    absolute: str | None,
) -> _Report:
    dims = None
    if dimensions is not None:
        dims = [d.strip() for d in dimensions.split(",") if d.strip()]
    table = _read_table(path, dims, model_column, absolute)
    matrix = table.matrix
    if len(matrix.models) < 2 or len(matrix.dimensions) < 2:
        raise CommandInputError(
            f"{path}: needs at least two models and two dimension columns, found "
            f"{len(matrix.models)} models and {len(matrix.dimensions)} dimensions"
        )
    overall = table.overall()
    if anchor is not None and anchor not in overall:
        raise CommandInputError(
            f"--anchor: model {anchor!r} is not in {path} ({len(overall)} models, column "
            f"{table.model_column!r})"
        )
    try:
        relative = relative_scores(overall, anchor)
    except ValueError as error:
        raise CommandInputError(f"--anchor: {error}") from None
    schemes, source = _schemes(schemes_path, matrix.dimensions)
    rsa = None if schemes is None else rank_stability_amplitude(matrix, schemes)
    return _Report(
        path=path,
        table=table,
        relative=relative,
        anisotropy=anisotropy_index(matrix),
        schemes=schemes,
        schemes_source=source,
        rsa=rsa,
        inconsistency=_inconsistency(path, table),
    )


def _read_table(
    path: Path, dims: list[str] | None, model_column: str | None, absolute: str | None
) -> ScoreTable:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CommandInputError(f"{path}: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CommandInputError(f"{path}:{line}: file: not valid UTF-8") from None
    if absolute is not None and absolute.casefold() == "none":
        absolute = NO_ABSOLUTE
    try:
        return parse_score_table(
            text,
            name=str(path),
            dimensions=dims,
            model_column=model_column,
            absolute_column=absolute,
        )
    except TableInputError as error:
        lines = [str(problem) for problem in error.errors]
        if dims is None and any("number" in p.message for p in error.errors):
            lines.append("(--dimensions a,b,c names the dimension columns; others are ignored)")
        raise CommandInputError(*lines) from None


def _schemes(
    path: Path | None, dimensions: tuple[str, ...]
) -> tuple[dict[str, dict[str, float]] | None, str | None]:
    if path is None:
        found = rele_schemes_for(dimensions)
        return (found, RELE) if found is not None else (None, None)
    return read_schemes(path, dimensions), str(path)


def _inconsistency(path: Path, table: ScoreTable) -> CapabilityInconsistency:
    try:
        return capability_inconsistency(table.matrix)
    except ValueError as error:
        raise CommandInputError(f"{path}: capability inconsistency: {error}") from None
