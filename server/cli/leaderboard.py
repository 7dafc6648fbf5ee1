"""``proctor leaderboard``: the ranking from the database, as a table, JSON or CSV."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from judge.numbers import format_number
from server.cli.groups import command_registrar
from server.cli.options import JudgeName
from server.cli.output import exit_on_input_error, fail, stdout

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from judge.ranking.static_compare import RankComparison
    from server.leaderboard.service import LeaderboardData


def leaderboard_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (every field).")] = False,
    by_discipline: Annotated[
        bool, typer.Option("--by-discipline", help="Models per discipline (10-point scale).")
    ] = False,
    csv_file: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per model to this CSV file.")
    ] = None,
    judge: JudgeName = None,
    baselines: Annotated[
        bool, typer.Option("--baselines", help="Add Elo and Bradley-Terry ratings.")
    ] = False,
    diagnostics: Annotated[
        bool,
        typer.Option(
            "--diagnostics",
            help="Add the anisotropy index, RSA over weighting schemes and capability "
            "inconsistency of the discipline scores.",
        ),
    ] = False,
    schemes: Annotated[
        Path | None,
        typer.Option(
            "--schemes",
            help='Weighting schemes for RSA: JSON {"scheme": {"discipline": weight}}; '
            "default: ReLE's three on the LLMEval-Fair disciplines.",
        ),
    ] = None,
    compare: Annotated[
        Path | None,
        typer.Option(
            "--compare",
            help="A static leaderboard CSV (model + score or rank): Spearman, Kendall, "
            "rank displacement and inverted pairs against our relative scores.",
        ),
    ] = None,
) -> None:
    """The ranking from the database: table, JSON or CSV.

    Every model's relative and absolute score with its 95% interval, the groups of models
    the data cannot separate, per-discipline scores, latency, cost and contamination
    checks. Reads the database directly (run it where the server's PROCTOR_ settings
    are)."""
    from bank.formats.input_problems import InputError
    from judge.ranking.static_compare import compare_rankings, read_leaderboard_csv
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.config import get_settings
    from server.leaderboard import service
    from server.leaderboard.schemas import disciplines_json, leaderboard_json
    from server.scoring.assignment import JudgeAssignment, assign_judges

    settings = get_settings()
    static = None
    if compare is not None:
        try:
            static = read_leaderboard_csv(compare)
        except InputError as error:
            fail(str(error))

    async def work(db: AsyncSession) -> LeaderboardData:
        judges = JudgeAssignment.single(judge) if judge else await assign_judges(db, settings)
        return await service.configured_leaderboard(
            db, settings=settings, judges=judges, baselines=baselines
        )

    data = run_in_unit_of_work(work)
    if diagnostics:
        data = _with_diagnostics(data, schemes)
    if csv_file is not None:
        _write_csv(csv_file, data)
    comparison = None
    if static is not None:
        ours = {row.name: row.absolute.mean for row in data.board.rows}
        comparison = compare_rankings(ours, static.scores)
    if as_json:
        view = disciplines_json(data) if by_discipline else leaderboard_json(data)
        if comparison is not None:
            view["static_comparison"] = comparison.to_json()
        typer.echo(json.dumps(view, indent=2, ensure_ascii=False))
        return
    if by_discipline:
        print_disciplines(leaderboard_json(data))
    else:
        print_leaderboard(leaderboard_json(data))
    if comparison is not None:
        _print_comparison(comparison)


register = command_registrar(
    "leaderboard", leaderboard_command, "proctor leaderboard --by-discipline --csv board.csv"
)


def _print_comparison(comparison: RankComparison) -> None:
    stdout.print(
        f"against the static leaderboard ({comparison.n_common} common models): "
        f"Spearman {_cell(comparison.spearman, 3)}, Kendall {_cell(comparison.kendall, 3)}, "
        f"inverted pairs {_cell(comparison.inverted_share * 100, 1)}%"
    )
    for model, delta in comparison.displacement.items():
        if delta:
            stdout.print(f"  {model}: rank displacement {delta:+g}")


def _with_diagnostics(data: LeaderboardData, path: Path | None) -> LeaderboardData:
    from judge.ranking.leaderboard import board_diagnostics
    from server.cli.schemes import read_schemes

    chosen = None
    if path is not None:
        with exit_on_input_error():
            chosen = read_schemes(path, data.board.disciplines)
    return dataclasses.replace(data, diagnostics=board_diagnostics(data.board, chosen))


def _write_csv(path: Path, data: LeaderboardData) -> None:
    from server.csv_export import write_rows
    from server.leaderboard.fields import CSV_COLUMNS
    from server.leaderboard.schemas import csv_rows

    with path.open("w", newline="", encoding="utf-8") as handle:
        write_rows(handle, [*CSV_COLUMNS, *data.board.disciplines], csv_rows(data))


def _cell(value: float | None, digits: int = 2) -> str:
    """A figure in a leaderboard cell: "-" where it is missing."""
    return format_number(value, digits, missing="-")


def _interval(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return "-"
    return f"[{_cell(summary['ci_low'])}, {_cell(summary['ci_high'])}]"


def judging_header(view: dict[str, Any]) -> str:
    """Who scored, and how well the default judge agrees with people: e.g. ``judge j1,
    prompt fig11-v1, weighted kappa 0.91 [0.86, 0.95] on demo v1 (n=120)``."""
    judges = view.get("judges") or [view["judge"]]
    who = (
        f"judge {view['judge']}"
        if len(judges) < 2
        else f"panel {', '.join(judges)} ({view['panel_rule']})"
    )
    text = f"{who}, prompt {view['prompt_version']}"
    figures = view.get("judge_calibration")
    if figures is None:
        return f"{text}, uncalibrated"
    return (
        f"{text}, weighted kappa {_cell(figures['weighted_kappa'])} "
        f"[{_cell(figures['weighted_ci_low'])}, {_cell(figures['weighted_ci_high'])}] "
        f"on {figures['calibration_set']} v{figures['set_version']} (n={figures['n']})"
    )


def print_leaderboard(view: dict[str, Any], console: Console = stdout) -> None:
    """The per-model view as a table, its anchor note, diagnostics, baselines and the
    groups the data cannot order."""
    anchor = view["anchor"]
    how = "designated" if anchor["designated"] else "top model"
    table = Table(
        title=f"Leaderboard ({judging_header(view)}; R relative to {anchor['name'] or '-'}, {how})"
    )
    for column in ("#", "group", "ranks", "model", "R", "R 95% CI", "S", "S 95% CI", "sessions"):
        table.add_column(column, justify="left" if column == "model" else "right")
    table.add_column("P(>next)", justify="right")
    table.add_column("p50 / p95 s", justify="right")
    table.add_column("contamination")
    for row in view["models"]:
        low, high = row["rank_range"]
        table.add_row(
            str(row["position"]),
            str(row["group"]),
            f"{low}-{high}" if low != high else str(low),
            row["name"],
            _cell(row["relative"]["mean"] if row["relative"] else None),
            _interval(row["relative"]),
            _cell(row["absolute"]["mean"]),
            _interval(row["absolute"]),
            str(row["sessions"]),
            _cell(row["beats_next"], 3),
            f"{_cell(row['latency']['median_s'])} / {_cell(row['latency']['p95_s'])}",
            _contamination(row["contamination"]),
        )
    console.print(table)
    if view.get("diagnostics"):
        _print_diagnostics(view["diagnostics"], console)
    if "baselines" in view:
        base = view["baselines"]
        ratings = ", ".join(f"{m['name']} {_cell(m['elo'], 0)}" for m in base["models"])
        console.print(f"Elo ({base['n_comparisons']} per-item comparisons): {ratings}")
    if anchor["note"]:
        console.print(f"note: {anchor['note']}")
    tied = [group for group in view["groups"] if len(group) > 1]
    for group in tied:
        console.print(f"cannot be ordered by the data: {', '.join(group)}")


def _print_diagnostics(found: dict[str, Any], console: Console) -> None:
    """The anisotropy index, each model's RSA and capability inconsistency (those that
    were computed), then why any statistic is unavailable."""
    console.print(f"anisotropy index {_cell(found['anisotropy_index'], 4)}")
    rsa = found["rsa"] or {}
    inconsistency = found["capability_inconsistency"] or {}
    for name in found["models"]:
        parts = [f"RSA {rsa[name]}"] if name in rsa else []
        if name in inconsistency:
            parts.append(f"capability inconsistency {_cell(inconsistency[name], 3)}")
        if parts:
            console.print(f"  {name}: {', '.join(parts)}", markup=False)
    for statistic, reason in found.get("unavailable", {}).items():
        title = "RSA" if statistic == "rsa" else statistic.replace("_", " ")
        console.print(f"{title} unavailable: {reason}", markup=False)


def _contamination(report: dict[str, Any]) -> str:
    parts = []
    if report["replay"]:
        replay = report["replay"]
        parts.append(f"replay {replay['near_exact']}/{replay['items']}")
    if report["generalisation_gap"]:
        gap = report["generalisation_gap"]
        parts.append(f"gap {_cell(gap['gap'])}" + (" FLAGGED" if gap["flagged"] else ""))
    return ", ".join(parts) or "-"


def print_disciplines(view: dict[str, Any], console: Console = stdout) -> None:
    """Per-discipline scores (10-point scale) ± their standard errors: one row per
    discipline, one column per model in leaderboard order, from the per-model view."""
    models = view["models"]
    names = sorted({d for row in models for d in row.get("disciplines", {})})
    table = Table(title="Per discipline (10-point scale, ± standard error)")
    table.add_column("discipline")
    for row in models:
        table.add_column(row["name"], justify="right")
    for discipline in names:
        cells = []
        for row in models:
            score = row.get("disciplines", {}).get(discipline)
            cells.append(
                "-"
                if score is None
                else f"{_cell(score['score'])} ± {_cell(score['standard_error'])}"
            )
        table.add_row(discipline, *cells)
    console.print(table)
