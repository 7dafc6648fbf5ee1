"""The one convention by which every module of :mod:`server.cli` joins the ``proctor``
command.

Each module (``db``, ``admin``, ``bank``, ...) exposes ``register(root)``, which adds its
group (:func:`group`, :func:`group_registrar`) or its single command
(:func:`command_registrar`) to the root. A summary shown in a command list is one short
line: a command's first docstring line, a group's ``help``. Every help page ends with an
example (:func:`example`).

The root imports a module only when its command runs or its help is shown
(:mod:`server.cli.lazy`), so a module imports at its top only what its options and help
need (Typer, the standard library, the enums its options take); what a command does (the
database, the services, SciPy) it imports in the command's body. ``proctor GROUP --help``
then starts in well under a second (tests/benchmarks/bench_cli_start.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import typer
from rich.markup import escape

MARKUP: Literal["rich"] = "rich"
"""How help text is rendered, the same for every group."""

Registrar = Callable[[typer.Typer], None]
"""A module's ``register``: adds its group or command to the root."""


def example(*commands: str) -> str:
    """An epilog showing ``commands``, one ``Example: ...`` line each."""
    return "\n\n".join(f"Example: {escape(command)}" for command in commands)


def group(name: str, summary: str, *examples: str) -> typer.Typer:
    """The command group ``proctor NAME``: its help is ``summary`` and ends with
    ``examples``; without a sub-command it prints that help."""
    return typer.Typer(
        name=name,
        help=summary,
        epilog=example(*examples),
        no_args_is_help=True,
        rich_markup_mode=MARKUP,
    )


def group_registrar(app: typer.Typer) -> Registrar:
    """The ``register`` of a module whose commands form the group ``app``."""

    def register(root: typer.Typer) -> None:
        root.add_typer(app)

    return register


def command_registrar(name: str, command: Callable[..., Any], *examples: str) -> Registrar:
    """The ``register`` of a module that is one command, ``proctor NAME``, whose help ends
    with ``examples``."""

    def register(root: typer.Typer) -> None:
        root.command(name, epilog=example(*examples))(command)

    return register
