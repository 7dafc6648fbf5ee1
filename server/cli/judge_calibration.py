"""``proctor judge calibration-set ...``, ``proctor judge calibrate`` and ``proctor judge gate``:
frozen calibration sets, a judge's run on one, and the gate that decides which judges may
score by default (``server.calibration``; LLMEval-Fair (Zhang et al.), "LLMEval-Fair: A
Large-Scale Longitudinal Study on Robust and Fair Evaluation of Large Language Models",
§3.4 and app. F.2: judges are chosen by their agreement with human experts)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from server.cli.groups import example, group
from server.cli.options import JsonFlag
from server.cli.output import fail, stderr, stdout

if TYPE_CHECKING:
    from rich.table import Table
    from sqlalchemy.ext.asyncio import AsyncSession

    from server.calibration.gate import GateReport, JudgeGate
    from server.calibration.models import CalibrationSet
    from server.calibration.runner import CalibrationRun
    from server.config import Settings

SetName = Annotated[str, typer.Option("--name", help="Set name (an existing name: a new version).")]

calibration_set_app = group(
    "calibration-set",
    "Frozen, versioned sets of human-scored answers.",
    "proctor judge calibration-set import human-scores.csv --name gaokao-2026",
    "proctor judge calibration-set from-review --name review-2026-11",
)


def _set_json(record: CalibrationSet) -> str:
    return json.dumps(
        {
            "id": str(record.id),
            "name": record.name,
            "version": record.version,
            "source": record.source,
            "n": record.n,
            "sha256": record.sha256,
        }
    )


@calibration_set_app.command(
    "import", epilog=example("proctor judge calibration-set import scores.csv --name gaokao-2026")
)
def import_set_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="CSV of question,reference,answer,human_score"
            "[,language,discipline,model_family,cluster]."
        ),
    ],
    name: SetName,
) -> None:
    """Freeze a CSV of human-scored answers as a calibration set.

    Every problem of the file is reported as file:line: field: what, and nothing is
    saved unless the whole file is good."""
    from server.calibration import service
    from server.calibration.models import CalibrationSource
    from server.cli.unit_of_work import run_in_unit_of_work

    try:
        service.check_set_name(name)
        rows = service.read_calibration_csv(file)
    except service.SetNameError as error:
        fail(f"--name: {error}", code=2)
    except service.CalibrationInputError as error:
        fail(*str(error).splitlines())
    except OSError as error:
        fail(f"{file}: {error.strerror or error}")

    async def work(db: AsyncSession) -> CalibrationSet:
        return await service.create_set(
            db, name=name, rows=rows, source=CalibrationSource.CSV, created_by="cli"
        )

    record = run_in_unit_of_work(work)
    stdout.print(_set_json(record))
    stderr.print(f"calibration set {record.name} version {record.version}: {record.n} answers")


@calibration_set_app.command(
    "from-review", epilog=example("proctor judge calibration-set from-review --name review-11")
)
def from_review_command(name: SetName) -> None:
    """Freeze the answers people reviewed as a calibration set.

    Every answer of the review queue that people scored; several reviewers of one answer
    give their mean, rounded half up."""
    from server.calibration import service
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.errors import InvalidInput

    try:
        service.check_set_name(name)
    except service.SetNameError as error:
        fail(f"--name: {error}", code=2)

    async def work(db: AsyncSession) -> CalibrationSet:
        try:
            return await service.set_from_review(db, name=name, created_by="cli")
        except service.EmptySetError as error:
            raise InvalidInput(str(error)) from None

    record = run_in_unit_of_work(work)
    stdout.print(_set_json(record))
    stderr.print(f"calibration set {record.name} version {record.version}: {record.n} answers")


def calibrate_command(
    judge: Annotated[str, typer.Option("--judge", help="A configured judge's name.")],
    set_name: Annotated[str, typer.Option("--set", help="Calibration set name.")],
    version: Annotated[
        int | None, typer.Option("--version", min=1, help="Set version (default: newest).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run a judge on a calibration set and store its kappa.

    The real judge scores every answer (no cached replies). Stored with the judge's model
    and prompt version: kappa and quadratic-weighted kappa against the human scores with
    95% intervals (bootstrap over item families), exact and within-one agreement."""
    from server.calibration.runner import CalibrationRunError

    settings = _settings()
    try:
        run = asyncio.run(_calibrate(settings, judge, set_name, version))
    except CalibrationRunError as error:
        fail(str(error))
    if as_json:
        stdout.print(json.dumps(run.to_json(), indent=2))
    else:
        stdout.print(_run_table(run))
        change = _change_line(run)
        if change:
            stdout.print(change)
    report = asyncio.run(_report(settings))
    gate = next((g for g in report.judges if g.judge == judge), None)
    if gate is not None:
        stderr.print(f"gate: {judge} {gate.status.value}: {gate.reason}")


async def _calibrate(
    settings: Settings, judge: str, set_name: str, version: int | None
) -> CalibrationRun:
    from server.calibration.runner import calibrate
    from server.database import create_engine

    engine = create_engine(settings.effective_database_url)
    try:
        return await calibrate(
            engine, settings, judge=judge, set_name=set_name, set_version=version
        )
    finally:
        await engine.dispose()


def gate_command(as_json: JsonFlag = False) -> None:
    """Which configured judges pass the calibration gate.

    The gate reads the lower bound of the 95% interval of each judge's weighted kappa on
    the current calibration set; the first judge that passes is the default."""
    report = asyncio.run(_report(_settings()))
    if as_json:
        stdout.print(json.dumps(_report_json(report), indent=2))
        return
    where = (
        f"calibration set {report.set_name} v{report.set_version}"
        if report.set_name
        else "no calibration set"
    )
    stdout.print(
        f"{where}; prompt {report.prompt_version}; threshold: weighted kappa lower bound "
        f">= {report.min_kappa:g}; default judge: {report.default or 'none'}"
    )
    stdout.print(_gate_table(report))


def _settings() -> Settings:
    from server.config import get_settings
    from server.database import upgrade

    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)
    return settings


async def _report(settings: Settings) -> GateReport:
    from server.calibration.gate import gate_report
    from server.database import create_engine, unit_of_work

    engine = create_engine(settings.effective_database_url)
    try:
        async with unit_of_work(engine) as db:
            return await gate_report(db, settings)
    finally:
        await engine.dispose()


def _interval(estimate: float | None, low: float | None, high: float | None) -> str:
    if estimate is None:
        return "undefined"
    if low is None or high is None:
        return f"{estimate:.3f}"
    return f"{estimate:.3f} [{low:.3f}, {high:.3f}]"


def _run_table(run: CalibrationRun) -> Table:
    from rich.table import Table

    figures = run.figures
    table = Table(title=f"{run.judge} on {run.set_name} v{run.set_version} ({run.kind.value})")
    for column in ("model", "prompt", "n", "kappa (95%)", "weighted kappa (95%)", "exact", "±1"):
        table.add_column(column)
    table.add_row(
        run.model,
        run.prompt_version,
        f"{figures.n} ({run.unscored} unscored)" if run.unscored else str(figures.n),
        _interval(figures.kappa, figures.kappa_low, figures.kappa_high),
        _interval(figures.weighted_kappa, figures.weighted_low, figures.weighted_high),
        f"{figures.exact:.3f}",
        f"{figures.within_one:.3f}",
    )
    return table


def _change_line(run: CalibrationRun) -> str | None:
    """The paired change in weighted kappa from the judge's previous full run, if any."""
    previous = run.previous
    change = previous.get("change") if previous else None
    if not isinstance(change, dict) or previous is None:
        return None
    weighted = change["weighted"]
    estimate, low, high = weighted["change"], weighted["low"], weighted["high"]
    if estimate is None:
        return None
    bounds = "" if low is None or high is None else f" [{low:+.3f}, {high:+.3f}]"
    return (
        f"weighted kappa change from the previous run ({previous['prompt_version']}, "
        f"{previous['created_at']}): {estimate:+.3f}{bounds} on {change['n']} answers"
    )


def _gate_table(report: GateReport) -> Table:
    from rich.table import Table

    table = Table()
    for column in ("judge", "model", "status", "weighted kappa (95%)", "n", "why"):
        table.add_column(column)
    for gate in report.judges:
        run = gate.run.figures if gate.run else None
        figures = _interval(run.weighted_kappa, run.weighted_low, run.weighted_high) if run else "-"
        marker = " (default)" if gate.judge == report.default else ""
        table.add_row(
            gate.judge + marker,
            gate.model,
            gate.status.value,
            figures,
            str(run.n) if run else "-",
            gate.reason,
        )
    return table


def _gate_json(gate: JudgeGate, default: str | None) -> dict[str, object]:
    run = gate.run
    return {
        "judge": gate.judge,
        "model": gate.model,
        "status": gate.status.value,
        "eligible": gate.eligible,
        "default": gate.judge == default,
        "reason": gate.reason,
        "run": None
        if run is None
        else {
            "id": str(run.id),
            "n": run.figures.n,
            "kappa": run.figures.kappa,
            "kappa_low": run.figures.kappa_low,
            "kappa_high": run.figures.kappa_high,
            "weighted_kappa": run.figures.weighted_kappa,
            "weighted_low": run.figures.weighted_low,
            "weighted_high": run.figures.weighted_high,
        },
    }


def _report_json(report: GateReport) -> dict[str, object]:
    return {
        "calibration_set": None
        if report.set_name is None
        else {"name": report.set_name, "version": report.set_version},
        "prompt_version": report.prompt_version,
        "min_kappa": report.min_kappa,
        "default": report.default,
        "judges": [_gate_json(gate, report.default) for gate in report.judges],
    }
