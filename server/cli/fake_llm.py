"""``proctor fake-llm``: the stand-in LLM provider (:mod:`fakellm.cli`), which must not
import the server, joins the ``proctor`` command here."""

from __future__ import annotations

import typer

from fakellm.cli import fake_llm_app
from server.cli.groups import example


def register(root: typer.Typer) -> None:
    """Add ``proctor fake-llm``."""
    root.add_typer(
        fake_llm_app,
        name="fake-llm",
        epilog=example("proctor fake-llm serve --port 8090 --answer-key answers.jsonl"),
    )
