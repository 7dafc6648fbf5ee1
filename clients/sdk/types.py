"""What the Proctor API says: its vocabulary as enums, its responses as frozen dataclasses.

This module is the published contract. The enums below are the wire vocabulary (session
and item states, session modes, roles, adaptive policies, bounds and stop reasons); the
server imports them, so each name is written once. They are ``StrEnum``: a member *is*
its string, so ``session.state == "scored"`` holds and JSON carries the plain value.

Ids are strings (as on the wire); timestamps are timezone-aware ``datetime``. Fields a newer
server adds are ignored, so an older SDK keeps working against it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

__all__ = [
    "ALL_ANSWERED_STATES",
    "CLOSED_STATES",
    "ENDED_EARLY_STATES",
    "FINAL_STATES",
    "OPEN_STATES",
    "Accepted",
    "AdaptiveBound",
    "AdaptiveOptions",
    "AdaptivePolicy",
    "AdaptiveSummary",
    "Item",
    "ItemState",
    "Model",
    "Role",
    "ScoringProgress",
    "Session",
    "SessionMode",
    "SessionState",
    "StopReason",
    "Usage",
]


class SessionState(StrEnum):
    """Where a session is in its lifecycle (``created`` → ``active`` → ``answered`` →
    ``scored``; or ``expired`` / ``aborted`` while open)."""

    CREATED = "created"
    """Items allocated, none delivered yet."""
    ACTIVE = "active"
    ANSWERED = "answered"
    """Every item answered; waiting for scores."""
    SCORED = "scored"
    EXPIRED = "expired"
    ABORTED = "aborted"


OPEN_STATES: frozenset[SessionState] = frozenset({SessionState.CREATED, SessionState.ACTIVE})
"""States in which items are delivered and answered."""
CLOSED_STATES: frozenset[SessionState] = frozenset(SessionState) - OPEN_STATES
"""States in which no item is delivered or answered any more."""
ALL_ANSWERED_STATES: frozenset[SessionState] = frozenset(
    {SessionState.ANSWERED, SessionState.SCORED}
)
"""States of a session whose every item was answered (it ran to its end)."""
ENDED_EARLY_STATES: frozenset[SessionState] = frozenset(
    {SessionState.EXPIRED, SessionState.ABORTED}
)
"""States of a session closed before every item was answered."""
FINAL_STATES: frozenset[SessionState] = CLOSED_STATES - {SessionState.ANSWERED}
"""States no session leaves: nothing more will be scored automatically."""


class ItemState(StrEnum):
    """Where one item of a session is."""

    ALLOCATED = "allocated"
    PENDING = "pending"
    """Delivered, not yet answered."""
    COMPLETED = "completed"
    RELEASED = "released"
    """Allocated, never delivered, returned to the pool when the session ended early."""


class SessionMode(StrEnum):
    """The kind of session: ``fixed`` (a stratified sample, ranked), ``adaptive`` (the
    server picks items and stops early), ``replay`` and ``anchor`` (contamination checks,
    admins and evaluators only)."""

    FIXED = "fixed"
    REPLAY = "replay"
    ANCHOR = "anchor"
    ADAPTIVE = "adaptive"


class Role(StrEnum):
    """The role of an API key (and of the tokens exchanged from it)."""

    ADMIN = "admin"
    EVALUATOR = "evaluator"
    VENDOR = "vendor"
    AUDITOR = "auditor"


class AdaptivePolicy(StrEnum):
    """How an adaptive session allocates its items across strata."""

    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    NEYMAN = "neyman"
    NEYMAN_IRT = "neyman-irt"


class AdaptiveBound(StrEnum):
    """The interval an adaptive session's stopping rule uses."""

    HOEFFDING_SERFLING = "hoeffding-serfling"
    BERNSTEIN_SERFLING = "bernstein-serfling"
    NORMAL = "normal"


class StopReason(StrEnum):
    """Why an adaptive session stopped delivering."""

    PRECISE = "precise"
    """The interval's half-width fell to the target."""
    BUDGET = "budget"
    """Every item of the budget was delivered."""


def _datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _known(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of dataclass ``cls``."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _with_datetimes(fields: dict[str, Any], *names: str) -> dict[str, Any]:
    """``fields`` with the timestamps ``names`` parsed (absent ones become None)."""
    for name in names:
        fields[name] = _datetime(fields.get(name))
    return fields


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
        return cls(**_with_datetimes(_known(cls, data), "created_at"))


@dataclass(frozen=True, slots=True)
class Session:
    """An evaluation session: its state and item counts when it was read."""

    id: str
    org_id: str
    model_id: str
    mode: SessionMode
    state: SessionState
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
    adaptive: AdaptiveSummary | None = None
    """An adaptive session's policy, estimate and half-width (score points), and why it
    stopped; on single-session reads only."""

    @property
    def done(self) -> bool:
        """No item will be delivered or accepted any more (``CLOSED_STATES``)."""
        return self.state in CLOSED_STATES

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _with_datetimes(_known(cls, data), "deadline_at", "created_at", "ended_at")
        fields["mode"] = SessionMode(fields["mode"])
        fields["state"] = SessionState(fields["state"])
        adaptive = fields.get("adaptive")
        fields["adaptive"] = None if adaptive is None else AdaptiveSummary.from_json(adaptive)
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class AdaptiveOptions:
    """What an ``adaptive`` session may choose; None leaves it to the server's default."""

    policy: AdaptivePolicy | None = None
    bound: AdaptiveBound | None = None
    target_halfwidth: float | None = None
    """Half-width (score points, 0-100) at which the session stops."""
    delta: float | None = None
    """Error probability of the interval, over every check of the stopping rule."""

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None
        }


@dataclass(frozen=True, slots=True)
class AdaptiveSummary:
    """Where an adaptive session stands: its estimate (score points, 0-100) over every
    score so far, with the half-width of its stopping rule's interval. The figures that
    move with single verdicts (``n_scored``, ``estimate``, ``halfwidth``, ``checks``,
    ``stop_reason``) are None for roles other than admin and auditor until the session is
    scored."""

    policy: AdaptivePolicy
    bound: AdaptiveBound
    delta: float
    target_halfwidth: float
    budget: int
    history_models: int
    """Other models whose past verdicts gave the item parameters (``neyman-irt``)."""
    n_scored: int | None = None
    estimate: float | None = None
    halfwidth: float | None = None
    checks: int | None = None
    stop_reason: StopReason | None = None

    def __getitem__(self, name: str) -> Any:
        """``summary["estimate"]``: the field ``name`` (the SDK returned a dict before)."""
        if name not in {f.name for f in dataclasses.fields(self)}:
            raise KeyError(name)
        return getattr(self, name)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["policy"] = AdaptivePolicy(fields["policy"])
        fields["bound"] = AdaptiveBound(fields["bound"])
        stop = fields.get("stop_reason")
        fields["stop_reason"] = None if stop is None else StopReason(stop)
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
        fields = _with_datetimes(_known(cls, data), "submitted_at")
        fields["already_answered"] = False
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class ScoringProgress:
    """How far the scoring of a session has come (counts only, never per-item verdicts)."""

    session_id: str
    state: SessionState
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
        return self.state in FINAL_STATES and self.waiting == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["state"] = SessionState(fields["state"])
        return cls(**fields)
