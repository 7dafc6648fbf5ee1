"""``proctor bank health``: item and bank health on the server's verdicts or on recorded
responses, optionally flagging items for review."""

from __future__ import annotations

import csv
import json
import math
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bank.health.labels import Breakdown
from server.cli.options import JsonFlag
from server.cli.output import fail, stderr

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bank.health.flags import FlagThresholds
    from bank.health.population import Population
    from bank.health.report import HealthOptions, HealthReport
    from bank.health.subsets import SubsetRule

CLI_ACTOR = "cli"


def health_command(
    population: Annotated[
        str,
        typer.Option(
            help="Models to compute on: all, top:K (by mean score), models:A,B, "
            "family:NAME, before:YYYY-MM-DD or after:YYYY-MM-DD.",
        ),
    ] = "all",
    by: Annotated[Breakdown, typer.Option(help="How to group items into strata.")] = (
        Breakdown.DISCIPLINE
    ),
    responses: Annotated[
        Path | None,
        typer.Option(help="Recorded responses CSV (model column, then one per item id)."),
    ] = None,
    items: Annotated[
        Path | None, typer.Option(help="Items JSONL of the recorded responses.")
    ] = None,
    models: Annotated[
        Path | None,
        typer.Option(help="Models CSV of the recorded responses: model,family,params_b,date."),
    ] = None,
    peers: Annotated[
        list[str] | None,
        typer.Option(
            "--peer",
            help="STRATUM=CSV: a static leaderboard (model,score or model,rank) of that "
            "stratum for CBRC and BQS; repeatable.",
        ),
    ] = None,
    flag: Annotated[
        bool,
        typer.Option(
            "--flag", help="Move flagged items to status 'flagged' (server verdicts only)."
        ),
    ] = False,
    save_subset: Annotated[
        str | None,
        typer.Option(
            help="RULE=NAME: save that selective subset (cad_ds, cas or cad_ds_cas) as the "
            "item set NAME, which sessions can draw from (server verdicts only).",
        ),
    ] = None,
    thresholds: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="NAME=VALUE: a review-rule threshold other than the default (e.g. "
            "saturated_p=0.99, family_inversions=2); repeatable.",
        ),
    ] = None,
    items_csv: Annotated[
        Path | None, typer.Option(help="Also write every item's figures to this CSV.")
    ] = None,
    iterations: Annotated[
        int, typer.Option(min=2, max=1_000, help="Bootstrap resamples for stability.")
    ] = 100,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the bootstraps.")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Item and bank health: figures, flags, subsets.

    Discriminability, capability alignment, within-family inversions, saturation and
    rank stability per item, stratum and bank (Benchmark², Qian et al.; Benchmark Health
    Index, Zhu et al.; Capability Alignment).

    On the server's own verdicts (and stored as a snapshot), or with --responses and
    --items on recorded data. Every figure states the model population it rests on; a
    figure that cannot be computed is null with its reason."""
    from bank.health.population import parse_population
    from bank.health.report import HealthOptions

    try:
        chosen = parse_population(population)
    except ValueError as error:
        fail(f"--population: {error}", code=2)
    if (responses is None) != (items is None):
        fail("--responses and --items go together", code=2)
    if responses is not None and (flag or save_subset):
        fail("--flag and --save-subset act on the bank; they need the server's verdicts", code=2)
    subset = None if save_subset is None else _subset_choice(save_subset)
    options = HealthOptions(
        by=by,
        stability_iterations=iterations,
        seed=seed,
        thresholds=_thresholds(thresholds or []),
    )
    peer_boards = _peers(peers or [])
    if responses is not None and items is not None:
        report = _recorded(responses, items, models, chosen, options, peer_boards)
    else:
        report = _on_server(chosen, options, flag=flag, save=subset, peers=peer_boards)
    if items_csv is not None:
        _write_items_csv(report, items_csv)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, allow_nan=False))
        return
    _print(report)


def _recorded(
    responses: Path,
    items: Path,
    models: Path | None,
    population: Population,
    options: HealthOptions,
    peers: dict[str, list[dict[str, float]]],
) -> HealthReport:
    from bank.adaptive.recorded import RecordedInputError
    from bank.health.recorded import load_recorded
    from bank.health.report import health_report

    try:
        recorded = load_recorded(responses, items, models)
    except RecordedInputError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot read: {error}")
    try:
        return health_report(
            recorded.responses,
            recorded.labels,
            population=population,
            options=options,
            peers=peers,
        )
    except ValueError as error:
        fail(f"--population: {error}", code=2)


def _subset_choice(value: str) -> tuple[SubsetRule, str]:
    from bank.health.subsets import SubsetRule
    from bank.item_sets import InvalidItemSet, check_name

    rule, sep, name = value.partition("=")
    try:
        chosen = SubsetRule(rule.strip())
    except ValueError:
        known = ", ".join(r.value for r in SubsetRule)
        fail(f"--save-subset {value!r}: expected RULE=NAME with RULE one of {known}", code=2)
    if not sep:
        fail(f"--save-subset {value!r}: expected RULE=NAME", code=2)
    try:
        return chosen, check_name(name)
    except InvalidItemSet as error:
        fail(f"--save-subset: {error}", code=2)


def _on_server(
    population: Population,
    options: HealthOptions,
    *,
    flag: bool,
    save: tuple[SubsetRule, str] | None,
    peers: dict[str, list[dict[str, float]]],
) -> HealthReport:
    """Collect, compute and store a snapshot in one transaction (and flag, with --flag;
    save a subset, with --save-subset)."""
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.config import get_settings
    from server.health.service import collect_verdicts, compute_report, flag_report, store_snapshot
    from server.scoring.assignment import assign_judges

    settings = get_settings()

    async def work(db: AsyncSession) -> HealthReport:
        collected = await collect_verdicts(db, judges=await assign_judges(db, settings))
        try:
            report = await compute_report(
                collected, population=population, options=options, peers=peers
            )
        except ValueError as error:
            fail(f"--population: {error}", code=2)
        snapshot = await store_snapshot(db, report=report, watermark=collected.watermark)
        if flag:
            moved, _ = await flag_report(
                db, report=report, collected=collected, actor=CLI_ACTOR, snapshot_id=snapshot.id
            )
            stderr.print(f"{moved} items moved to flagged")
        if save is not None:
            await _save_subset(db, report, collected.item_uuids, *save)
        return report

    return run_in_unit_of_work(work)


async def _save_subset(
    db: AsyncSession,
    report: HealthReport,
    item_uuids: tuple[uuid.UUID, ...],
    rule: SubsetRule,
    name: str,
) -> None:
    from bank.item_sets import ItemSetError, save_item_set
    from server.errors import InvalidInput

    uuid_of = dict(zip(report.item_ids, item_uuids, strict=True))
    members = [uuid_of[i] for i in report.subset_members.get(str(rule), ())]
    evaluation = report.subsets[str(rule)]
    figures = {
        key: evaluation[key]["value"]
        for key in ("rank_tau", "stability_subset", "ds_subset", "ds_full")
    }
    try:
        saved = await save_item_set(
            db,
            name=name,
            item_ids=members,
            rule={
                "subset": rule.value,
                "population": report.population["text"],
                "retention": evaluation["retention"],
                **figures,
            },
            actor=CLI_ACTOR,
        )
    except ItemSetError as error:
        raise InvalidInput(str(error)) from None
    stderr.print(f"item set {saved.name!r} saved: {saved.n_items} items ({rule.value})")


def _thresholds(values: list[str]) -> FlagThresholds:
    from bank.health.flags import parse_thresholds

    pairs: dict[str, object] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep:
            fail(f"--threshold {value!r}: expected NAME=VALUE", code=2)
        pairs[name.strip()] = number.strip()
    try:
        return parse_thresholds(pairs)
    except ValueError as error:
        fail(f"--threshold: {error}", code=2)


def _peers(values: list[str]) -> dict[str, list[dict[str, float]]]:
    from judge.ranking.static_compare import LeaderboardInputError, read_leaderboard_csv

    boards: dict[str, list[dict[str, float]]] = {}
    for value in values:
        stratum, sep, path = value.partition("=")
        if not sep or not stratum.strip() or not path:
            fail(f"--peer {value!r}: expected STRATUM=CSV", code=2)
        try:
            board = read_leaderboard_csv(path)
        except LeaderboardInputError as error:
            fail(str(error))
        except OSError as error:
            fail(f"--peer: cannot read {path}: {error}")
        # Ranks order the other way round: rank 1 is the best score.
        sign = -1.0 if board.column == "rank" else 1.0
        scores = {m: sign * v for m, v in board.values.items()}
        boards.setdefault(stratum.strip(), []).append(scores)
    return boards


def _write_items_csv(report: HealthReport, path: Path) -> None:
    columns = ["item_id", "n", "p", "difficulty", "point_biserial", "spearman", "cas"]
    columns += ["cas_kfold", "inversions", "pairs", "cad", "separation", "flags"]
    from server.csv_export import safe_row

    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(safe_row(columns))
            for item_id, row in report.items.items():
                d = row["discrimination"]
                flat = {**row, "point_biserial": d["point_biserial"], "spearman": d["spearman"]}
                flat["flags"] = ";".join(row["flags"])
                writer.writerow(safe_row([item_id, *(_cell(flat[c]) for c in columns[1:])]))
    except OSError as error:
        fail(f"--items-csv: cannot write {path}: {error}")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _print(report: HealthReport) -> None:
    from rich.console import Console
    from rich.table import Table

    from bank.health.report import FIGURES

    console = Console()
    population = report.population
    console.print(
        f"population: {population.get('kind')} — {population.get('n_models')} models; "
        f"{report.bank['n_items']} items with responses; {len(report.flags)} items flagged"
    )
    table = Table(title="bank and strata")
    table.add_column("stratum")
    table.add_column("items", justify="right")
    table.add_column("models", justify="right")
    for key in FIGURES:
        table.add_column(key, justify="right")
    for name, row in [("(bank)", report.bank), *report.strata.items()]:
        table.add_row(
            name, str(row["n_items"]), str(row["n_models"]), *(_fmt(row[k]) for k in FIGURES)
        )
    console.print(table)
    subsets = Table(title="selective subsets")
    columns = ("rule", "items", "retention", "rank tau", "stability", "full", "DS", "full")
    for column in columns:
        subsets.add_column(column, justify="right" if column != "rule" else "left")
    for name, s in report.subsets.items():
        subsets.add_row(
            name,
            str(s["retained"]),
            _fmt(s["retention"]),
            *(
                _fmt(s[key]["value"])
                for key in ("rank_tau", "stability_subset", "stability_full", "ds_subset")
            ),
            _fmt(s["ds_full"]["value"]),
        )
    console.print(subsets)
