"""Where the ``proctor`` commands write: the consoles, and errors as ``error: ...`` lines."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

stdout = Console(highlight=False, soft_wrap=True)
"""Results. Lines are never wrapped, so a piped line stays one line."""
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
"""Progress, warnings and errors."""


def table_console() -> Console:
    """A console for wide tables: piped output gets 160 columns, enough for their columns,
    rather than the 80-column default."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


class CommandInputError(Exception):
    """Problems with a command's input, one line each, for :func:`fail`."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


def fail(*lines: str, code: int = 1) -> NoReturn:
    """Print each line as ``error: LINE`` on stderr (verbatim, no markup) and exit with
    ``code``."""
    for line in lines:
        stderr.print(Text.assemble(("error:", "red"), " ", line))
    raise typer.Exit(code)


@contextmanager
def exit_on_input_error() -> Iterator[None]:
    """Turn a :class:`CommandInputError` raised inside into :func:`fail` (exit status 1)."""
    try:
        yield
    except CommandInputError as error:
        fail(*error.lines)
