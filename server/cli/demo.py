"""``proctor demo``: the whole system on this machine, in one command (what it runs is
:mod:`server.cli.demo_runner`, imported only when the demo starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from server.cli.demo_config import DemoConfig, DemoDriver
from server.cli.groups import command_registrar
from server.cli.output import table_console


def demo_command(
    items: Annotated[int, typer.Option("--items", min=5, help="Items per session.")] = 150,
    sessions: Annotated[int, typer.Option("--sessions", min=1, help="Sessions per model.")] = 3,
    models: Annotated[
        int, typer.Option("--models", min=1, max=5, help="How many demo models.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seeds answers and abilities.")] = 0,
    report: Annotated[
        Path, typer.Option("--report", help="Where to write the HTML report.")
    ] = Path("proctor-demo-report.html"),
    workdir: Annotated[
        Path | None,
        typer.Option("--workdir", help="Keep the database and transcripts here."),
    ] = None,
    driver: Annotated[
        DemoDriver,
        typer.Option(
            "--driver",
            help="Who drives the models: runner (client side, as proctor run) or server "
            "(a run per model, driven by the server).",
        ),
    ] = DemoDriver.RUNNER,
) -> None:
    """The whole system on this machine, no services needed.

    Imports the sample bank, serves Proctor and local models of different abilities with a
    local judge, runs every model through its sessions (or, with --driver server, has the
    server run them), scores, and prints the leaderboard (and writes an HTML report).
    Exits 1 if a session fails or the ranking does not follow the models' configured
    abilities."""
    from server.cli.demo_runner import run_demo

    config = DemoConfig(
        items=items,
        sessions=sessions,
        models=models,
        seed=seed,
        report=report,
        workdir=workdir,
        driver=driver,
    )
    result = run_demo(config, table_console())
    if result.failures or not result.ranking_matches:
        raise typer.Exit(1)


register = command_registrar("demo", demo_command, "proctor demo --models 3 --sessions 2")
