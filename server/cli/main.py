"""The ``proctor`` command (Typer): the root and the table of what it runs.

Each entry of :data:`COMMANDS` names a module of :mod:`server.cli` that joins the root the
one way every group module does (:mod:`server.cli.groups`). The root imports a module only
when its command is run or its help page is shown (:class:`server.cli.lazy.LazyCommands`),
so ``proctor --help`` imports none of them and ``proctor bank import`` imports the bank's
commands alone, not the app, the judge or SciPy.
"""

from __future__ import annotations

import typer

from server.cli.groups import example
from server.cli.lazy import HELP_ONLY, Lazy, LazyCommands

COMMANDS = (
    Lazy("serve", "server.cli.serve", "Run the HTTP API (OpenAPI at /docs)."),
    Lazy(
        "leaderboard",
        "server.cli.leaderboard",
        "The ranking from the database: table, JSON or CSV.",
    ),
    Lazy("analyze", "server.cli.analyze", "Relative scores and diagnostics of a score table."),
    Lazy("simulate", "server.cli.simulate", "Replay adaptive sessions on recorded responses."),
    Lazy("run", "server.cli.run", "Drive a model endpoint through Proctor sessions."),
    Lazy(
        "runs",
        "server.cli.runs",
        "Runs the server drives: start, show, list, pause, cancel.",
    ),
    Lazy(
        "run-worker",
        "server.cli.run_worker",
        "Drive runs until SIGTERM or Ctrl-C (with PostgreSQL).",
    ),
    Lazy(
        "endpoints",
        "server.cli.endpoints",
        "How the server calls a model: set, show, delete, check.",
    ),
    Lazy("demo", "server.cli.demo", "The whole system on this machine, no services needed."),
    Lazy("db", "server.cli.db", "Database schema, backups and restores."),
    Lazy("admin", "server.cli.admin", "Organisations, keys and the ranking anchor."),
    Lazy("bank", "server.cli.bank", "The private question bank."),
    Lazy("judge", "server.cli.judge", "Scoring: the judge, its workers and its calibration."),
    Lazy("review", "server.cli.review", "Work the human review queue: list, show, score, skip."),
    Lazy("audit", "server.cli.audit", "Verify the record: audit chain, samples, session bundles."),
    Lazy("fake-llm", "server.cli.fake_llm", "A stand-in OpenAI-compatible LLM provider."),
)
"""What ``proctor`` runs, in the order its help lists them; each summary is the one line the
command's own help page opens with (tests/server/cli/test_cli_help.py holds them to it)."""


class _Proctor(LazyCommands):
    commands_table = COMMANDS


app: typer.Typer = typer.Typer(
    name="proctor",
    help="Proctor: a live, dynamic evaluation server for LLMs.",
    epilog=example("proctor demo", "proctor bank --help"),
    no_args_is_help=True,
    rich_markup_mode="rich",
    cls=_Proctor,
)


@app.callback()
def _refuse_invalid_settings(ctx: typer.Context) -> None:
    # Every command refuses settings the server would refuse (a weak secret, say), one
    # line per problem and exit status 2, before it does anything; a help page is shown
    # whatever the settings.
    if ctx.meta.get(HELP_ONLY):
        return
    from bank.sealing import BankKeyError
    from server.bank_keys import install_for_command
    from server.cli.output import fail
    from server.config import InvalidSettings, get_settings

    try:
        settings = get_settings()
    except InvalidSettings as error:
        fail(*error.lines, code=2)
    try:
        install_for_command(settings)  # the keys sealing the bank at rest (server.bank_keys)
    except BankKeyError as error:
        fail(str(error), code=2)
