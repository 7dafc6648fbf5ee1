"""Folding repeated refusals into one audit row per window (pure, no I/O).

Every request is audited, but a flood of refused requests (bad tokens, a scanner, an
oversized body, a key past its rate limit) must not make the audit log a storage
amplifier. A foldable refusal (``is_foldable``) is written at once the first time its
*kind* (client address, subject, method, route, status) is seen in a window of
``window_s`` seconds; the repeats of the same kind in that window are only counted, and
written as one row with ``repeats`` = their count when the window closes. Nothing is lost:
the sum of ``repeats`` is the number of requests. Memory is bounded: past ``max_kinds``
kinds in one window, further ones are folded under the client ``*``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

OVERFLOW_CLIENT = "*"

Kind = tuple[str | None, str | None, str, str, int]
"""(client address, subject, method, route template, status)."""


def is_foldable(row: dict[str, Any]) -> bool:
    """Whether ``row`` is a refusal that floods can repeat: any 4xx without a principal,
    and a 429 of anyone (a key past its rate limit)."""
    status = row["status"]
    return status == 429 or (row["subject"] is None and 400 <= status < 500)


@dataclass
class _Repeats:
    count: int = 0
    last_at: datetime | None = None


class RefusalFolder:
    """Decides which refusal rows are written now, and gives the folded rest when due."""

    def __init__(self, *, window_s: float, max_kinds: int = 10_000) -> None:
        self.window_s = window_s
        self.max_kinds = max_kinds
        self._window: int | None = None
        self._seen: dict[Kind, _Repeats] = {}
        self._template: dict[Kind, dict[str, Any]] = {}

    def admit(self, row: dict[str, Any], *, now: float) -> tuple[bool, list[dict[str, Any]]]:
        """Whether to write ``row`` now (the first of its kind in this window), and the
        folded rows of earlier windows that are due to be written."""
        due = self.due(now=now)
        kind: Kind = (row["client"], row["subject"], row["method"], row["route"], row["status"])
        if kind not in self._seen and len(self._seen) >= self.max_kinds:
            kind = (OVERFLOW_CLIENT, None, *kind[2:])
            row = {**row, "client": OVERFLOW_CLIENT, "subject": None, "org_id": None}
        repeats = self._seen.get(kind)
        if repeats is None:
            self._seen[kind] = _Repeats()
            self._template[kind] = row
            return True, due
        repeats.count += 1
        repeats.last_at = row["at"]
        return False, due

    def due(self, *, now: float) -> list[dict[str, Any]]:
        """The folded rows of windows that have closed by ``now`` (each given once)."""
        window = math.floor(now / self.window_s)
        if self._window == window:
            return []
        self._window = window
        return self.flush()

    def flush(self) -> list[dict[str, Any]]:
        """Every folded row so far, whatever its window (at shutdown)."""
        rows = [
            {**self._template[kind], "at": repeats.last_at, "repeats": repeats.count}
            for kind, repeats in self._seen.items()
            if repeats.count
        ]
        self._seen.clear()
        self._template.clear()
        return rows
