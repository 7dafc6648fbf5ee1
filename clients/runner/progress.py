"""Rich progress bars over the items a :class:`~clients.runner.runner.Runner` answers."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from clients.runner.runner import SessionOutcome, SilentListener


def item_progress(console: Console) -> Progress:
    """A progress display whose bars count items: label, bar, done of total, elapsed and
    remaining time."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


class SessionBars:
    """A runner listener that draws one bar per session."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def session_started(self, session_id: str, total: int, done: int, resumed: bool) -> None:
        label = f"{'resumed ' if resumed else ''}session {session_id[:8]}"
        self.tasks[session_id] = self.progress.add_task(label, total=total, completed=done)

    def item_answered(self, session_id: str, position: int) -> None:
        self.progress.update(self.tasks[session_id], completed=position + 1)

    def session_ended(self, outcome: SessionOutcome) -> None:
        task = self.tasks.get(outcome.session_id)
        if task is not None and outcome.error:
            self.progress.update(task, description=f"session {outcome.session_id[:8]} FAILED")

    def waiting(self, session_id: str, reason: str) -> None:
        task = self.tasks.get(session_id)
        if task is not None:
            self.progress.update(task, description=f"session {session_id[:8]} waiting: {reason}")


class RunBar(SilentListener):
    """A runner listener that advances one bar (``task``) over every session's items."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task

    def item_answered(self, session_id: str, position: int) -> None:
        self.progress.advance(self.task)
