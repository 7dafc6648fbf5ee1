"""What ``proctor demo`` runs: the whole system on a bare machine.

1. a fresh SQLite database in a work directory, migrated; the shipped real sample banks
   (MMLU-Pro and GAOKAO-Bench excerpts) imported with augmentation;
2. the local model server (``fakellm``) with several models of clearly different
   abilities (:data:`DEMO_MODELS`, varied a little per discipline) and the local judge,
   answering from the bank's own answer key;
3. Proctor's API in a child process (:mod:`server.cli.demo_api`; real HTTP on 127.0.0.1)
   with the scoring worker inside it, so that it has a core of its own;
4. every model in an organisation of its own, registered and driven through its sessions,
   all models at once: by the evaluator runner (``clients.runner``) over the SDK, or with
   ``--driver server`` by the server itself, a run per model (``server.cli.demo_drivers``);
5. scoring, then the leaderboard (absolute, relative, per discipline, 95% CIs, tie
   groups) printed and written as an HTML report with plots (``clients.report``).

Before the API starts, the local judge is calibrated on a synthetic expert set
(``server.cli.demo_calibration``): it passes the calibration gate, and the leaderboard's
header shows its weighted kappa with the 95% interval.

The ranking printed must follow the configured abilities; the demo says whether it does
and exits 1 if not.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bank.bundled_datasets import sample_path
from bank.disciplines import DisciplineRow, list_disciplines
from bank.formats import read_records
from bank.importer import import_records
from clients.report import write_report
from clients.report.board import model_rows, tie_groups
from clients.runner.progress import item_progress
from clients.sdk import AsyncProctorClient
from fakellm.answer_key import AnswerKey
from fakellm.app import ServerConfig
from fakellm.app import create_app as create_fake_app
from fakellm.profiles import BUILTIN_PROFILES, ModelProfile
from judge.numbers import format_number
from server.app import create_app
from server.auth.service import create_api_key
from server.bank_keys import install_keyring
from server.calibration.runner import CalibrationRun
from server.cli.demo_api import ApiProcess
from server.cli.demo_calibration import SET_NAME, calibrate_demo_judge
from server.cli.demo_config import DemoConfig, DemoDriver
from server.cli.demo_drivers import DRIVERS, DemoTenant, DriveRequest
from server.cli.leaderboard import print_disciplines, print_leaderboard
from server.config import JudgeEndpoint, Settings
from server.database import create_engine, unit_of_work, upgrade
from server.observability.log_format import LogLevel
from server.orgs.service import create_org
from server.threaded import serve_in_thread

DEMO_MODELS: tuple[tuple[str, float], ...] = (
    ("demo-strong", 0.90),
    ("demo-good", 0.72),
    ("demo-fair", 0.55),
    ("demo-weak", 0.38),
    ("demo-guess", 0.22),
)
"""(name, accuracy): the models the demo can run, best first."""
DISCIPLINE_SPREAD = 0.06
"""Each model's accuracy varies by up to this much per discipline (seeded)."""
SAMPLES = ("mmlu_pro", "gaokao_bench")
JUDGE = "demo-judge"


@dataclass
class DemoResult:
    board: dict[str, Any]
    disciplines: dict[str, Any]
    expected_order: list[str]
    printed_order: list[str]
    report: Path
    workdir: Path
    wall_s: float
    failures: list[str] = field(default_factory=list)
    groups: list[list[str]] = field(default_factory=list)
    """Tie groups: models the data cannot order."""

    @property
    def ranking_matches(self) -> bool:
        """The printed order is the configured one, except that models of one tie group
        (the data cannot order them) may stand in any order."""
        group_of = {name: i for i, group in enumerate(self.groups) for name in group}
        rank = {name: i for i, name in enumerate(self.printed_order)}
        if set(rank) != set(self.expected_order):
            return False
        for i, better in enumerate(self.expected_order):
            for worse in self.expected_order[i + 1 :]:
                tied = better in group_of and group_of.get(worse) == group_of[better]
                if rank[better] > rank[worse] and not tied:
                    return False
        return True


def demo_profiles(disciplines: Sequence[str], models: int, seed: int) -> dict[str, ModelProfile]:
    """The judge plus ``models`` of :data:`DEMO_MODELS`, each with its accuracy moved by up
    to :data:`DISCIPLINE_SPREAD` per discipline (seeded), so the heatmap has texture while
    the overall order stays the configured one."""
    rng = random.Random(seed)
    profiles = {"judge": BUILTIN_PROFILES["judge"]}
    for name, accuracy in DEMO_MODELS[:models]:
        by = {
            d: min(1.0, max(0.0, accuracy + rng.uniform(-DISCIPLINE_SPREAD, DISCIPLINE_SPREAD)))
            for d in disciplines
        }
        profiles[name] = ModelProfile(name=name, accuracy=accuracy, discipline_accuracy=by)
    return profiles


def run_demo(config: DemoConfig, console: Console) -> DemoResult:
    """Run the demo (see the module docstring); the console gets progress and the board."""
    if not 1 <= config.models <= len(DEMO_MODELS):
        raise ValueError(f"--models must be between 1 and {len(DEMO_MODELS)}")
    started = time.monotonic()
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="proctor-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite+aiosqlite:///{workdir / 'demo.db'}"
    api = None if config.api_in_process else ApiProcess()  # imports the app meanwhile
    try:
        install_keyring(Settings(data_dir=workdir, database_url=url))  # the API's, later
        console.print(f"[bold]1/5[/bold] bank: importing {', '.join(SAMPLES)} into {workdir}")
        upgrade(url)
        disciplines, tenants, admin_key = asyncio.run(_seed(url, config))
        console.print(f"      {_disciplines_line(disciplines)}")
        console.print("      models: " + ", ".join(f"{t.name} ({t.accuracy:.0%})" for t in tenants))
        fake = ServerConfig(
            profiles=demo_profiles([d.key for d in disciplines], config.models, config.seed),
            answer_key=AnswerKey.from_database(url),
            seed=config.seed,
        )
        where = "in-process" if api is None else "in a process of its own"
        console.print(f"[bold]2/5[/bold] local model and judge server, Proctor API {where}")
        with serve_in_thread(create_fake_app(fake)) as fake_root:
            settings = _settings(workdir, url, config, f"{fake_root}/v1")
            run = asyncio.run(_calibrate(settings, config))
            console.print(f"      {_calibration_line(run, settings.judge_gate_min_kappa)}")
            with _serve_api(api, settings) as api_root:
                console.print(f"      API {api_root}, models {fake_root}/v1")
                board, by_discipline, failures = asyncio.run(
                    _evaluate(
                        api_root, f"{fake_root}/v1", tenants, admin_key, config, workdir, console
                    )
                )
        console.print("[bold]5/5[/bold] leaderboard")
        print_leaderboard(board, console)
        print_disciplines(board, console)
        expected = [t.name for t in tenants]
        printed = [row["name"] for row in board["models"]]
        report = write_report(
            config.report,
            board,
            title="Proctor demo leaderboard",
            subtitle="Local models of configured abilities, scored by the local judge",
            config={
                "models": ", ".join(f"{t.name} {t.accuracy:.0%}" for t in tenants),
                "sessions per model": config.sessions,
                "items per session": config.items,
                "driven by": config.driver.value,
                "seed": config.seed,
            },
            generated_at=datetime.now(UTC),
        )
        result = DemoResult(
            board,
            by_discipline,
            expected,
            printed,
            report,
            workdir,
            time.monotonic() - started,
            failures,
            tie_groups(board, model_rows(board)),
        )
        _verdict(result, console)
        return result
    finally:
        if api is not None:
            api.stop()
        if config.workdir is None and not config.keep:
            shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _serve_api(api: ApiProcess | None, settings: Settings) -> Iterator[str]:
    """The API's root URL while the block runs: served by ``api``, or (None) from a thread
    of this process."""
    if api is None:
        with serve_in_thread(create_app(settings), lifespan="on") as root:
            yield root
        return
    with api:
        yield api.start(settings)


async def _calibrate(settings: Settings, config: DemoConfig) -> CalibrationRun:
    engine = create_engine(settings.effective_database_url)
    try:
        return await calibrate_demo_judge(engine, settings, judge=JUDGE, seed=config.seed)
    finally:
        await engine.dispose()


def _calibration_line(run: CalibrationRun, bar: float) -> str:
    figures = run.figures
    return (
        f"judge {run.judge} on {figures.n} answers with synthetic expert scores "
        f"({SET_NAME} v{run.set_version}): weighted kappa "
        f"{format_number(figures.weighted_kappa, 2)} "
        f"[{format_number(figures.weighted_low, 2)}, {format_number(figures.weighted_high, 2)}]"
        f"; the gate admits a lower bound of {bar:g} or more"
    )


def _settings(workdir: Path, url: str, config: DemoConfig, judge_url: str) -> Settings:
    return Settings(
        data_dir=workdir,
        database_url=url,
        jwt_secret=secrets.token_urlsafe(48),
        judges=[JudgeEndpoint(name=JUDGE, base_url=judge_url, model="judge")],
        scoring_in_process=True,
        scoring_poll_s=0.5,
        default_session_items=config.items,
        max_session_items=max(5000, config.items),
        max_concurrent_sessions=config.sessions + 2,
        max_sessions_per_period=1000,
        rate_limit_per_minute=10_000_000,
        rate_limit_org_per_minute=10_000_000,
        leaderboard_resamples=1000,
        # --driver server: the API process drives the runs and calls the local models
        runs_in_process=True,
        run_poll_s=0.5,
        egress_allow=["127.0.0.1"] if config.driver == DemoDriver.SERVER else [],
        log_level=LogLevel.WARNING,  # no access line per request amid the demo's progress
    )


def _disciplines_line(rows: Sequence[DisciplineRow]) -> str:
    """How many disciplines have items and which of them sessions draw from (the evaluated
    set): ``10 disciplines with items, 9 evaluated (not evaluated: philosophy; evaluated
    without items: military)``."""
    stocked = [r for r in rows if r.items > 0]
    drawn = [r.key for r in stocked if r.evaluated]
    aside = [r.key for r in stocked if not r.evaluated]
    empty = [r.key for r in rows if r.evaluated and r.items == 0]
    notes = []
    if aside:
        notes.append(f"not evaluated: {', '.join(aside)}")
    if empty:
        notes.append(f"evaluated without items: {', '.join(empty)}")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return f"{len(stocked)} disciplines with items, {len(drawn)} evaluated{tail}"


async def _seed(url: str, config: DemoConfig) -> tuple[list[DisciplineRow], list[DemoTenant], str]:
    """Import the samples; an organisation with an evaluator key per model, and an admin."""
    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as db:
            records = (r for name in SAMPLES for r in read_records(sample_path(name)))
            await import_records(db, records, augment=True)
        async with unit_of_work(engine) as db:
            disciplines = await list_disciplines(db)
            tenants = []
            for name, accuracy in DEMO_MODELS[: config.models]:
                org = await create_org(db, name=f"org-{name}")
                _, key = await create_api_key(db, org_id=org.id, role="evaluator")
                tenants.append(DemoTenant(name, accuracy, key))
            admin_org = await create_org(db, name="demo-admin", operator=True)
            _, admin_key = await create_api_key(db, org_id=admin_org.id, role="admin")
    finally:
        await engine.dispose()
    return disciplines, tenants, admin_key


async def _evaluate(
    api_root: str,
    model_url: str,
    tenants: list[DemoTenant],
    admin_key: str,
    config: DemoConfig,
    workdir: Path,
    console: Console,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    who = "runner" if config.driver == DemoDriver.RUNNER else "server runs"
    console.print(
        f"[bold]3/5[/bold] {who}: {len(tenants)} models × {config.sessions} sessions × "
        f"{config.items} items"
    )
    drive = DRIVERS[config.driver]
    with item_progress(console) as progress:
        driven = await asyncio.gather(
            *(
                drive(
                    DriveRequest(
                        api_root, model_url, tenant, config.sessions, config.items, workdir
                    ),
                    progress,
                )
                for tenant in tenants
            )
        )
    failures = [
        f"{tenant.name}: {error}"
        for tenant, result in zip(tenants, driven, strict=True)
        for error in result.errors
    ]
    console.print("[bold]4/5[/bold] scoring (matchers and the local judge)")
    async with AsyncProctorClient(api_root, admin_key) as admin:
        for result in driven:
            for session_id in result.session_ids:
                await admin.wait_scored(session_id, timeout_s=600, poll_s=0.5)
        board = (await admin.leaderboard(diagnostics=True)).to_json()
        by_discipline = (await admin.leaderboard(view="disciplines")).to_json()
    return board, by_discipline, failures


def _verdict(result: DemoResult, console: Console) -> None:
    for failure in result.failures:
        console.print(f"[red]failed:[/red] {failure}")
    if result.ranking_matches:
        console.print(
            "[green]The ranking matches the configured abilities:[/green] "
            + " > ".join(result.expected_order)
        )
    else:
        console.print(
            "[red]The ranking does not match the configured abilities:[/red] expected "
            + " > ".join(result.expected_order)
            + ", got "
            + " > ".join(result.printed_order)
        )
    console.print(f"HTML report: {result.report}  ({result.wall_s:.0f} s)")
