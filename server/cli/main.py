"""The ``proctor`` command (Typer): the root, which every group module joins the same way
(:mod:`server.cli.groups`)."""

from __future__ import annotations

import typer

from server.cli import (
    admin,
    analyze,
    bank,
    db,
    demo,
    fake_llm,
    judge,
    leaderboard,
    run,
    serve,
    simulate,
)
from server.cli.groups import group

app: typer.Typer = group(
    "proctor",
    "Proctor: a live, dynamic evaluation server for LLMs.",
    "proctor demo",
    "proctor bank --help",
)

for module in (serve, db, admin, bank, judge, leaderboard, analyze, simulate, run, fake_llm, demo):
    module.register(app)
