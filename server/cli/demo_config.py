"""What ``proctor demo`` is asked to run (its options), apart from the demo itself so the
command's ``--help`` loads nothing heavy (:mod:`server.cli.demo_runner` runs it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class DemoDriver(StrEnum):
    """Who drives the demo's models through their sessions (``server.cli.demo_drivers``)."""

    RUNNER = "runner"
    """The evaluator runner on the client side, as ``proctor run``."""
    SERVER = "server"
    """The server: an endpoint and a run per model."""


@dataclass(frozen=True, slots=True)
class DemoConfig:
    items: int = 150
    sessions: int = 3
    models: int = 4
    seed: int = 0
    workdir: Path | None = None
    report: Path = Path("proctor-demo-report.html")
    keep: bool = False
    """Keep the work directory (database, transcripts) after the run."""
    api_in_process: bool = False
    """Serve the API from a thread of this process, as the demo did before it had a process
    of its own (one interpreter lock for everything: the benchmark's baseline)."""
    driver: DemoDriver = DemoDriver.RUNNER
    """Who drives the models: the client-side runner, or the server (a run per model)."""
