"""A command group whose sub-commands are imported only when one is needed.

A ``proctor`` start pays for what it runs: ``proctor db upgrade`` imports the ``db`` module
and what it needs, not every command's dependencies (the app, SciPy, the judge). The group
knows each sub-command by a :class:`Lazy` entry (name, module, summary); it imports the
module when the command is resolved, and lists the summaries on its own help page without
importing anything.

Click's own recipe for this is a ``Group`` overriding ``list_commands`` and
``get_command`` (click.palletsprojects.com, "Lazily Loading Subcommands"); this is that
recipe on Typer's group, plus two things the recipe leaves out: the help listing, which
would otherwise import every module for its one-line summary, and :data:`HELP_ONLY`, which
tells the root's callback that the command line only asks for a help page.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from server.cli.groups import MARKUP

if TYPE_CHECKING:  # Typer's own copy of Click, whose classes its groups are typed with
    from typer._click import Command, Context, HelpFormatter

HELP_ONLY = "proctor.help_only"
"""``ctx.meta`` key: true when the command line asks for a help page (``--help`` before any
``--``), so that nothing but the help page will run."""


class Lazy(NamedTuple):
    """A sub-command by its ``name``, the ``module`` whose ``register(root)`` adds it
    (:mod:`server.cli.groups`) and its one-line ``summary``."""

    name: str
    module: str
    summary: str


class LazyCommands(TyperGroup):
    """A Typer group of :class:`Lazy` sub-commands; subclasses set :attr:`commands_table`."""

    commands_table: ClassVar[Sequence[Lazy]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Loaded(self.commands_table)
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # Typer's own reads the items, loading every command

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if self._listing and isinstance(self.commands, _Loaded):
            entry = self.commands.entry(cmd_name)
            return None if entry is None else TyperCommand(entry.name, help=entry.summary)
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        ctx.meta[HELP_ONLY] = asks_for_help(args, ctx.help_option_names)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True  # the command list shows summaries: nothing to import
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


class _Loaded(MutableMapping[str, "Command"]):
    """The group's commands by name: every name of the table is a key (so listings and
    "Did you mean ...?" need no import); a command is loaded when it is first looked up."""

    def __init__(self, table: Sequence[Lazy]) -> None:
        self._table = {entry.name: entry for entry in table}
        self._loaded: dict[str, Command] = {}

    def entry(self, name: str) -> Lazy | None:
        return self._table.get(name)

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            self._loaded[name] = load(self._table[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command
        self._table.setdefault(name, Lazy(name, "", command.get_short_help_str()))

    def __delitem__(self, name: str) -> None:
        del self._table[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


def load(entry: Lazy) -> Command:
    """Import ``entry.module`` and return the command its ``register`` adds."""
    module = importlib.import_module(entry.module)
    holder = typer.Typer(rich_markup_mode=MARKUP, add_completion=False)
    holder.callback()(_no_options)  # a callback makes the holder a group, whatever it holds
    module.register(holder)
    group = typer.main.get_group(holder)
    command = group.commands.get(entry.name)
    if command is None:
        raise LookupError(f"{entry.module}.register adds no command {entry.name!r}")
    return command


def asks_for_help(args: Sequence[str], help_options: Sequence[str]) -> bool:
    """Whether a help option comes among ``args`` before a ``--`` (after which every word is
    an argument)."""
    for arg in args:
        if arg == "--":
            return False
        if arg in help_options:
            return True
    return False


def _no_options() -> None:
    """The holder's callback."""
