"""The runner's local JSONL transcript: what was asked, answered and measured, line by line.

Every line is one JSON object with an ``event``:

* ``session``: a session this run opened or adopted (``session_id``, ``model_id``,
  ``n_items``, ``adopted``), written as soon as the server created it, so a crash right
  after cannot lose track of it;
* ``item``: one accepted answer (``session_id``, ``position``, ``item_id``,
  ``discipline``, ``qtype``, ``paradigm``, ``prompt``, ``answer``, ``reasoning``,
  ``model_latency_s``, ``end_to_end_s``, ``prompt_tokens``, ``completion_tokens``,
  ``attempts``, ``already_answered``, ``at``);
* ``session_end``: a session this run finished driving (``state``, ``answered``) or had to
  stop (``error``).

Lines are flushed one by one; a torn last line (a crash mid-write) is skipped on reading.
The transcript is what the run knows; where a session stands is the server's word
(``clients.runner.runner`` asks it on resume).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


@dataclass
class TranscriptState:
    """What an existing transcript says about its sessions."""

    sessions: list[str] = field(default_factory=list)
    """Session ids in the order they were opened or adopted."""
    answered: dict[str, int] = field(default_factory=dict)
    """Session id -> answers recorded."""


class Transcript:
    """An append-only JSONL file; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def __enter__(self) -> Transcript:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def write(self, event: str, **fields: Any) -> None:
        """Append one line and flush it to the operating system."""
        if self._file is None:
            raise RuntimeError("the transcript is not open")
        self._file.write(json.dumps({"event": event, **fields}, ensure_ascii=False) + "\n")
        self._file.flush()
        if event != "item":  # session lines must survive a crash; items are re-derivable
            os.fsync(self._file.fileno())


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The transcript's events; a missing file is empty, an unreadable line is skipped."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and isinstance(data.get("event"), str):
                yield data


def read_state(path: Path, *, model_id: str) -> TranscriptState:
    """The sessions of ``model_id`` an earlier run of this transcript opened or adopted."""
    state = TranscriptState()
    for data in read_lines(path):
        session_id = data.get("session_id")
        if not isinstance(session_id, str):
            continue
        if data["event"] == "session" and data.get("model_id") == model_id:
            if session_id not in state.answered:
                state.sessions.append(session_id)
                state.answered[session_id] = 0
        elif data["event"] == "item" and session_id in state.answered:
            state.answered[session_id] += 1
    return state
