"""Placeholder: filled in by the verifiable-evaluation work."""

from __future__ import annotations

import typer


def add_commands(app: typer.Typer) -> None:
    """Add this module's commands to the proctor audit group."""
