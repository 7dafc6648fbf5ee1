"""``proctor bank ...``: import, stats, dry-run sampling and the private anchor set, over the
configured database."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bank.bundled_datasets import sample_path
from bank.formats import FORMATS, detect_format, read_records
from bank.sampling.plan import DEFAULT_N
from server.cli.bank_health import health_command
from server.cli.bank_rotation import new_key_command, rotate_key_command
from server.cli.groups import example, group, group_registrar
from server.cli.options import JsonFlag
from server.cli.output import stderr

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bank.anchor_set import AnchorSetChange
    from bank.disciplines import DisciplineRow
    from bank.importer import ImportReport
    from bank.records import RawRecord
    from bank.taxonomy import DisciplineMap

app = group(
    "bank", "The private question bank.", "proctor bank import --format mmlu_pro data.jsonl"
)
register = group_registrar(app)
app.command(
    "health",
    epilog=example(
        "proctor bank health --population top:10 --by discipline",
        "proctor bank health --responses responses.csv --items items.jsonl --json",
    ),
)(health_command)
app.command(
    "rotate-key",
    epilog=example("proctor bank rotate-key --check", "proctor bank rotate-key --batch 5000"),
)(rotate_key_command)
app.command("new-key", epilog=example("proctor bank new-key --id k2"))(new_key_command)
SAMPLES = ("gaokao_bench", "mmlu_pro")


def _records(
    paths: list[Path], fmt: str | None, discipline_map: DisciplineMap | None
) -> Iterator[RawRecord]:
    for path in paths:
        yield from read_records(path, fmt, discipline_map)


@app.command("import")
def import_command(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Files or GAOKAO-Bench folders.")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help=f"One of {', '.join(FORMATS)}; default: detect.")
    ] = None,
    augment: Annotated[
        bool, typer.Option("--augment/--no-augment", help="Derive true/false and fill-in variants.")
    ] = True,
    sample: Annotated[
        list[str] | None, typer.Option(help=f"Import a shipped sample: {', '.join(SAMPLES)}.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    discipline_map: Annotated[
        Path | None,
        typer.Option(
            "--discipline-map",
            help="CSV 'source,discipline': maps the source's categories onto the bank's "
            "disciplines, over the format's shipped map.",
        ),
    ] = None,
    add_disciplines: Annotated[
        bool,
        typer.Option(
            "--add-disciplines", help="Add disciplines the bank does not know instead of refusing."
        ),
    ] = False,
) -> None:
    """Import items, all or nothing.

    One bad record and nothing is written."""
    from bank.importer import ImportRefused, import_records
    from server.cli.unit_of_work import run_in_unit_of_work

    targets = list(paths or []) + [sample_path(name) for name in _known_samples(sample or [])]
    if not targets:
        raise typer.BadParameter("give at least one PATH or --sample NAME")
    if fmt is not None and fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}")
    for target in targets:
        if not target.exists():
            raise typer.BadParameter(f"{target}: no such file or directory")
        if fmt is None:
            try:
                detect_format(target)
            except (ValueError, OSError) as error:
                raise typer.BadParameter(str(error)) from None

    mapping = _discipline_map(discipline_map)

    async def work(session: AsyncSession) -> ImportReport:
        records = _records(targets, fmt, mapping)
        return await import_records(
            session, records, augment=augment, add_disciplines=add_disciplines
        )

    try:
        report = run_in_unit_of_work(work)
    except OSError as failure:
        stderr.print(f"error: {failure}; nothing was imported", markup=False)
        raise typer.Exit(1) from None
    except ImportRefused as refused:
        for problem in refused.errors:
            stderr.print(str(problem), markup=False)
        stderr.print(f"import refused: {len(refused.errors)} bad record(s); nothing was imported")
        raise typer.Exit(1) from None
    _print_report(report, as_json)


def _discipline_map(path: Path | None) -> DisciplineMap | None:
    from bank.formats.discipline_maps import load_discipline_map
    from bank.taxonomy import MapFileError

    if path is None:
        return None
    try:
        return load_discipline_map(path)
    except (MapFileError, OSError) as error:
        stderr.print(f"error: {error}; nothing was imported", markup=False)
        raise typer.Exit(1) from None


def _known_samples(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        raise typer.BadParameter(f"unknown sample {unknown[0]!r}; choose from {', '.join(SAMPLES)}")
    return names


def _print_report(report: ImportReport, as_json: bool) -> None:
    for dup in report.duplicates:
        stderr.print(
            f"{dup.location}: question: exact duplicate of {dup.duplicate_of}, skipped",
            markup=False,
        )
    for near in report.near_duplicates:
        stderr.print(near.describe(), markup=False)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
        return
    typer.echo(
        f"{report.records} records: {report.originals_added} originals and "
        f"{report.variants_added} variants added, {report.unchanged} unchanged, "
        f"{len(report.duplicates)} exact duplicates skipped, "
        f"{len(report.near_duplicates)} near duplicates reported"
    )


@app.command("stats")
def stats_command(
    as_json: JsonFlag = False,
) -> None:
    """Count items by discipline, type and sub-discipline.

    Also items, families, and originals against augmented variants."""
    from bank.stats import bank_stats
    from server.cli.unit_of_work import run_in_unit_of_work

    stats = run_in_unit_of_work(bank_stats)
    if as_json:
        typer.echo(json.dumps(stats, indent=2, ensure_ascii=False))
        return
    _print_stats(stats)


def _print_stats(stats: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"{stats['items']} items in {stats['families']} families: "
        f"{stats['originals']} originals, {stats['augmented']} augmented"
    )
    for title in ("by_discipline", "by_qtype"):
        table = Table(title=title.replace("_", " "))
        table.add_column("name")
        table.add_column("items", justify="right")
        for name, count in stats[title].items():
            table.add_row(name, str(count))
        console.print(table)


@app.command("disciplines")
def disciplines_command(
    evaluated: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Make these (comma-separated or repeated) the evaluated disciplines.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the bank's disciplines, or set the evaluated ones.

    Each with its key, display name, whether it is evaluated, and its active items.
    Sessions split their quota evenly over the evaluated disciplines that have items."""
    from bank.disciplines import UnknownDisciplines, list_disciplines, set_evaluated
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.errors import InvalidInput

    names = [n for value in evaluated or [] for n in value.split(",")]

    async def work(session: AsyncSession) -> list[DisciplineRow]:
        if evaluated is not None:
            try:
                await set_evaluated(session, names)
            except UnknownDisciplines as error:
                raise InvalidInput(str(error)) from None
        return await list_disciplines(session)

    rows = run_in_unit_of_work(work)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=2, ensure_ascii=False))
        return
    for row in rows:
        mark = "evaluated" if row.evaluated else "-"
        typer.echo(f"{row.key:<24} {row.display_name:<24} {mark:<9} {row.items:>8}")


@app.command("anchor-set")
def anchor_set_command(
    size: Annotated[int, typer.Option(min=1, help="Item families to withhold.")],
    seed: Annotated[
        str | None, typer.Option(help="Hex seed; default: fresh from the CSPRNG.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Withhold never-served item families as the anchor set.

    SIZE item families that were never served to anyone become the private anchor set:
    ordinary sessions never draw them again; anchor-set sessions (mode "anchor") serve
    them to measure each model's generalisation gap. Spread evenly over disciplines."""
    from bank.anchor_set import designate_anchor_set
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.errors import InvalidInput

    if seed is not None:
        seed = _normal_seed(seed)

    async def work(session: AsyncSession) -> AnchorSetChange:
        try:
            return await designate_anchor_set(session, size=size, seed=seed)
        except ValueError as error:
            raise InvalidInput(str(error)) from None

    change = run_in_unit_of_work(work)
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(change), ensure_ascii=False))
        return
    typer.echo(f"anchor set: {change.families} families ({change.items} items) withheld")
    for discipline, n in change.by_discipline.items():
        typer.echo(f"  {discipline}: {n}")


@app.command("sample")
def sample_command(
    org: Annotated[str, typer.Option(help="Organisation whose exposure is excluded.")],
    n: Annotated[int, typer.Option(min=1, help="Sample size.")] = DEFAULT_N,
    seed: Annotated[
        str | None, typer.Option(help="Hex seed; default: fresh from the CSPRNG.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Dry run: draw a sample as a session would.

    Nothing is recorded."""
    from bank.sampling.service import draw_sample
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.orgs.service import get_org

    if seed is not None:
        seed = _normal_seed(seed)

    async def work(session: AsyncSession) -> dict[str, Any]:
        organisation = await get_org(session, name=org)
        drawn = await draw_sample(session, org_id=organisation.id, n=n, seed=seed)
        return drawn.as_dict()

    result = run_in_unit_of_work(work)
    if as_json:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    typer.echo(f"seed {result['seed']}: {len(result['items'])} of {result['n']} items drawn")
    if result["shortfall"].get("unplaced"):
        typer.echo(f"shortfall: {json.dumps(result['shortfall'], ensure_ascii=False)}")


def _normal_seed(seed: str) -> str:
    """Lower-case hex without ``0x``, 1-64 digits, so one seed has one spelling."""
    digits = seed.strip().lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{1,64}", digits):
        raise typer.BadParameter(f"--seed must be 1-64 hexadecimal digits, got {seed!r}")
    return digits
