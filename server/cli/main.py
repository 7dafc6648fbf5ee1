"""The ``proctor`` command (Typer): the root, which every group module joins the same way
(:mod:`server.cli.groups`)."""

from __future__ import annotations

import typer

from bank.sealing import BankKeyError
from server.bank_keys import install_for_command
from server.cli import (
    admin,
    analyze,
    audit,
    bank,
    db,
    demo,
    fake_llm,
    judge,
    leaderboard,
    review,
    run,
    serve,
    simulate,
)
from server.cli.groups import group
from server.cli.output import fail
from server.config import InvalidSettings, get_settings

app: typer.Typer = group(
    "proctor",
    "Proctor: a live, dynamic evaluation server for LLMs.",
    "proctor demo",
    "proctor bank --help",
)

for module in (
    serve,
    db,
    admin,
    bank,
    judge,
    leaderboard,
    review,
    audit,
    analyze,
    simulate,
    run,
    fake_llm,
    demo,
):
    module.register(app)


@app.callback()
def _refuse_invalid_settings() -> None:
    # Every command refuses settings the server would refuse (a weak secret, say), one
    # line per problem and exit status 2, before it does anything.
    try:
        settings = get_settings()
    except InvalidSettings as error:
        fail(*error.lines, code=2)
    try:
        install_for_command(settings)  # the keys sealing the bank at rest (server.bank_keys)
    except BankKeyError as error:
        fail(str(error), code=2)
