"""What the Proctor API returns, as frozen dataclasses.

Ids are strings (as on the wire); timestamps are timezone-aware ``datetime``. Fields a newer
server adds are ignored, so an older SDK keeps working against it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

__all__ = ["Accepted", "Item", "Model", "ScoringProgress", "Session", "Usage"]

FINISHED_STATES = frozenset({"answered", "scored", "expired", "aborted"})
"""Session states in which no item is delivered or answered any more."""


def _datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _known(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of dataclass ``cls``."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True, slots=True)
class Model:
    """A registered model, pinned to an API snapshot; prices in USD per million tokens."""

    id: str
    org_id: str
    name: str
    api_snapshot: str
    family: str | None = None
    params_b: float | None = None
    usd_per_mtok_in: float | None = None
    usd_per_mtok_out: float | None = None
    created_at: datetime | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["created_at"] = _datetime(fields.get("created_at"))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Session:
    """An evaluation session: its state and item counts when it was read."""

    id: str
    org_id: str
    model_id: str
    mode: str
    state: str
    """``created``, ``active``, ``answered``, ``scored``, ``expired`` or ``aborted``."""
    n_items: int
    allocated: int
    """Items not delivered yet."""
    pending: int
    """Items delivered and not answered."""
    completed: int
    released: int
    """Undelivered items returned to the pool by an abort or expiry."""
    deadline_at: datetime
    created_at: datetime
    ended_at: datetime | None = None
    pending_window: int = 1
    """How many items may be pending at once."""
    adaptive: dict[str, Any] | None = None
    """An adaptive session's policy, estimate and half-width (score points), and why it
    stopped; on single-session reads only."""

    @property
    def done(self) -> bool:
        """No item will be delivered or accepted any more (answered, scored, expired,
        aborted)."""
        return self.state in FINISHED_STATES

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        for name in ("deadline_at", "created_at", "ended_at"):
            fields[name] = _datetime(fields.get(name))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Item:
    """An item to answer: question content only (never its answer)."""

    position: int
    item_id: str
    question: str
    options: list[str] | None
    qtype: str
    discipline: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields.setdefault("options", None)
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Usage:
    """What the model spent on one answer, as the client measured it."""

    prompt_tokens: int
    completion_tokens: int

    def to_json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(frozen=True, slots=True)
class Accepted:
    """An accepted answer. ``already_answered``: a retry of this very submission found
    the position answered, i.e. an earlier attempt whose response was lost was committed;
    ``submitted_at`` is then unknown (None)."""

    session_id: str
    position: int
    item_id: str
    submitted_at: datetime | None
    already_answered: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["submitted_at"] = _datetime(fields.get("submitted_at"))
        fields["already_answered"] = False
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class ScoringProgress:
    """How far the scoring of a session has come (counts only, never per-item verdicts)."""

    session_id: str
    state: str
    """The session's state."""
    judge: str
    prompt_version: str
    answers: int
    judged: int
    """Answers the scoring is done with (scored or left to a human reviewer)."""
    waiting: int
    """Answers queued or being scored."""
    scored: int | None = None
    """Answers with a score. None until the session is scored (except for admins and
    auditors): figures that move with single verdicts are not shown while it runs."""
    needs_review: int | None = None
    """Answers the judge left to a human reviewer; None as ``scored``."""
    points: int | None = None
    """Sum of the 0-3 scores; None until the session is scored (except for admins and
    auditors)."""

    @property
    def complete(self) -> bool:
        """Nothing more will be scored automatically: the session no longer takes answers
        (scored, expired or aborted) and no answer is queued or being scored."""
        return self.state in FINISHED_STATES - {"answered"} and self.waiting == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(**_known(cls, data))
