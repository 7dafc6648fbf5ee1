"""``proctor judge ...``: score a session now, run a scoring worker, measure judge agreement.

Agreement follows LLMEval-Fair (Zhang et al.): Cohen's kappa of each rater against human
labels, agreement per model, cross-rater ranking correlation and a family-bias test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from judge.prompts import PROMPT_VERSION
from server.cli.groups import example, group, group_registrar
from server.cli.judge_calibration import calibrate_command, calibration_set_app, gate_command
from server.cli.options import JsonFlag, JudgeName
from server.cli.output import fail, stderr, stdout

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

    from server.config import Settings
    from server.scoring.assignment import JudgeAssignment
    from server.scoring.worker import ScoringWorker

app = group(
    "judge",
    "Scoring: the judge, its workers and its calibration.",
    "proctor judge run --session SESSION_ID",
)
register = group_registrar(app)
app.add_typer(calibration_set_app)
app.command(
    "calibrate",
    epilog=example("proctor judge calibrate --judge gpt-4o-2024-11-20 --set gaokao-2026 --json"),
)(calibrate_command)
app.command("gate", epilog=example("proctor judge gate", "proctor judge gate --json"))(gate_command)


@app.command("run")
def run_command(
    session: Annotated[str, typer.Option("--session", help="Session id.")],
    judge: JudgeName = None,
    review_again: Annotated[
        bool, typer.Option("--review-again", help="Re-score answers left needing review.")
    ] = False,
) -> None:
    """Score (or re-score) every answer of a session now.

    A progress bar shows the answers scored. Answers already scored by this judge and
    prompt version keep their verdict; a new judge or prompt version scores them all again.
    """
    from server.config import get_settings
    from server.database import upgrade

    try:
        session_id = uuid.UUID(session)
    except ValueError:
        fail(f"--session: {session!r} is not a session id (a UUID)", code=2)
    settings = get_settings()
    if settings.is_embedded:
        upgrade(settings.effective_database_url)
    code = asyncio.run(_run(settings, session_id, judge, review_again))
    raise typer.Exit(code)


async def _run(settings: Settings, session_id: uuid.UUID, judge: str | None, again: bool) -> int:
    from server.database import create_engine, unit_of_work
    from server.scoring import service
    from server.scoring.assignment import JudgeAssignment, assign_judges
    from server.scoring.worker import ScoringWorker
    from server.sessions.models import EvalSession

    engine = create_engine(settings.effective_database_url)
    try:
        async with unit_of_work(engine) as db:
            if await db.get(EvalSession, session_id) is None:
                stderr.print(f"[red]error:[/red] no session {session_id}")
                return 1
            judges = JudgeAssignment.single(judge) if judge else await assign_judges(db, settings)
            queued = 0
            for name in judges.judges_for(None):
                queued += await service.enqueue_session(
                    db,
                    session_id=session_id,
                    judge=name,
                    prompt_version=PROMPT_VERSION,
                    review_again=again,
                    now=_now(),
                )
        names = ", ".join(judges.judges_for(None))
        stderr.print(f"judges {names}, prompt {PROMPT_VERSION}: {queued} jobs queued")
        worker = ScoringWorker(engine=engine, settings=settings)
        try:
            await _drain_with_progress(engine, worker, session_id, judges)
        finally:
            await worker.aclose()
        async with unit_of_work(engine) as db:
            done = await service.progress(
                db, session_id=session_id, judges=judges, prompt_version=PROMPT_VERSION
            )
        stdout.print(
            json.dumps(
                {
                    "session": str(session_id),
                    "judge": judges.default,
                    "judges": list(judges.judges_for(None)),
                    "prompt_version": PROMPT_VERSION,
                    "answers": done.answers,
                    "scored": done.scored,
                    "needs_review": done.needs_review,
                    "waiting": done.queued + done.leased,
                    "points": done.points,
                }
            )
        )
        return 0
    finally:
        await engine.dispose()


async def _drain_with_progress(
    engine: AsyncEngine, worker: ScoringWorker, session_id: uuid.UUID, judges: JudgeAssignment
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from server.database import unit_of_work
    from server.scoring import service

    columns = (
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[review]} need review"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=stderr, transient=False) as bar:
        task = bar.add_task("scoring", total=None, review=0)
        drain = asyncio.create_task(worker.drain())
        while True:
            async with unit_of_work(engine) as db:
                now = await service.progress(
                    db, session_id=session_id, judges=judges, prompt_version=PROMPT_VERSION
                )
            bar.update(
                task,
                total=now.answers,
                completed=now.scored + now.needs_review,
                review=now.needs_review,
            )
            if drain.done():
                await drain
                break
            await asyncio.wait({drain}, timeout=0.5)


@app.command("worker")
def worker_command(
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", min=1, max=65535, help="Serve Prometheus metrics on this port."
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics port listens on.")
    ] = "0.0.0.0",
) -> None:
    """Run a scoring worker until SIGTERM or Ctrl-C.

    It takes its work from PostgreSQL and is woken by Redis. On SIGTERM it claims no more
    jobs, finishes those in hand within PROCTOR_SHUTDOWN_GRACE_S seconds (then gives the
    rest back to the queue) and exits 0. Metrics (--metrics-port) are served without a
    token: keep that port off public networks."""
    from prometheus_client import start_http_server

    from server.cli.unit_of_work import require_bank_keyring
    from server.config import get_settings
    from server.database import upgrade
    from server.observability.logs import configure_logging
    from server.observability.metrics import scrape_registry

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    require_bank_keyring(settings)  # refused now, not at the first answer to score
    if settings.is_embedded:
        upgrade(settings.effective_database_url)
    if metrics_port is not None:
        start_http_server(metrics_port, addr=metrics_host, registry=scrape_registry())
    asyncio.run(_work_until_signalled(settings))


async def _work_until_signalled(settings: Settings) -> None:
    from server.scoring.process import run_worker_process

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await run_worker_process(settings, stop)


@app.command("agreement")
def agreement_command(
    file: Annotated[
        Path, typer.Argument(help="CSV of answer_id,rater,score[,model,model_family].")
    ],
    reference: Annotated[
        str, typer.Option("--reference", help="The reference rater (human labels).")
    ] = "human",
    as_json: JsonFlag = False,
    family: Annotated[
        list[str] | None,
        typer.Option("--family", help="RATER=FAMILY, for the family-bias test (repeatable)."),
    ] = None,
    store: Annotated[
        bool,
        typer.Option("--store", help="Store each rater's figures as its calibration."),
    ] = False,
) -> None:
    """Agreement of each rater with the reference rater.

    Cohen's kappa (plain and quadratic), exact and within-one agreement, per model;
    cross-rater ranking correlation; family bias."""
    from judge.agreement import (
        AgreementInputError,
        agreement_report,
        read_ratings_csv,
        render_tables,
    )

    families = _families(family or [])
    try:
        ratings = read_ratings_csv(file, reference=reference)
        report = agreement_report(ratings, reference=reference, families=families)
    except AgreementInputError as error:
        fail(str(error))
    except OSError as error:
        fail(f"{file}: {error.strerror or error}")
    if as_json:
        stdout.print(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        for table in render_tables(report):
            stdout.print(table)
    if store:
        from server.cli.unit_of_work import run_in_unit_of_work
        from server.scoring.models import JudgeCalibration

        digest = hashlib.sha256(file.read_bytes()).hexdigest()

        async def work(db: AsyncSession) -> int:
            for name, figures in report.raters.items():
                db.add(
                    JudgeCalibration(
                        judge=name,
                        prompt_version=PROMPT_VERSION,
                        reference=reference,
                        kappa=_finite(figures.kappa),
                        weighted_kappa=_finite(figures.weighted_kappa),
                        exact=figures.exact,
                        within_one=figures.within_one,
                        n=figures.n,
                        source_sha256=digest,
                    )
                )
            await db.flush()
            return len(report.raters)

        stored = run_in_unit_of_work(work)
        stderr.print(f"stored the calibration of {stored} raters (prompt {PROMPT_VERSION})")


def _families(pairs: list[str]) -> dict[str, str]:
    families: dict[str, str] = {}
    for pair in pairs:
        rater, sep, name = pair.partition("=")
        if not sep or not rater or not name:
            raise typer.BadParameter(f"{pair!r} is not RATER=FAMILY", param_hint="--family")
        families[rater] = name
    return families


def _finite(value: float) -> float | None:
    return None if value != value else value  # NaN (undefined kappa) is stored as NULL


def _now() -> datetime:
    return datetime.now(UTC)
