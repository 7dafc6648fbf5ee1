"""What the Proctor API says: its vocabulary as enums, its responses as frozen dataclasses.

This module is the published contract. The enums below are the wire vocabulary (session
and item states, session modes, roles, adaptive policies, bounds and stop reasons); the
server imports them, so each name is written once. They are ``StrEnum``: a member *is*
its string, so ``session.state == "scored"`` holds and JSON carries the plain value.

Ids are strings (as on the wire); timestamps are timezone-aware ``datetime``. Fields a newer
server adds are ignored, and a state, mode, role, policy, bound or stop reason this SDK
does not know arrives as its plain string, so an older SDK keeps working against it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self, TypeVar, cast

__all__ = [
    "ALL_ANSWERED_STATES",
    "CLOSED_STATES",
    "ENDED_EARLY_STATES",
    "ENDED_RUN_STATES",
    "FINAL_STATES",
    "OPEN_STATES",
    "Accepted",
    "AdaptiveBound",
    "AdaptiveOptions",
    "AdaptivePolicy",
    "AdaptiveSummary",
    "Anchor",
    "BaselineRating",
    "Baselines",
    "CallFailure",
    "CommitmentReveal",
    "Contamination",
    "Cost",
    "Diagnostics",
    "DisciplineBoard",
    "DisciplineEntry",
    "DisciplineEstimate",
    "DisciplineLeaderboard",
    "DisciplineScore",
    "EndpointCheck",
    "EndpointSettings",
    "GeneralisationGap",
    "Identity",
    "Item",
    "ItemState",
    "JudgeCalibration",
    "Latency",
    "Leaderboard",
    "LeaderboardRow",
    "Model",
    "ModelApi",
    "ModelEndpoint",
    "ReplayRate",
    "Role",
    "Run",
    "RunSessionProgress",
    "RunState",
    "SampleSource",
    "ScoreSummary",
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
    REVIEWED = "reviewed"
    """Scored, and every human review the scoring opened has been done (a session that
    opened none stays ``scored``). Shown as ``scored`` to roles that do not see live
    scores: what reviewers do is not visible to vendors."""
    EXPIRED = "expired"
    ABORTED = "aborted"


OPEN_STATES: frozenset[SessionState] = frozenset({SessionState.CREATED, SessionState.ACTIVE})
"""States in which items are delivered and answered."""
CLOSED_STATES: frozenset[SessionState] = frozenset(SessionState) - OPEN_STATES
"""States in which no item is delivered or answered any more."""
ALL_ANSWERED_STATES: frozenset[SessionState] = frozenset(
    {SessionState.ANSWERED, SessionState.SCORED, SessionState.REVIEWED}
)
"""States of a session whose every item was answered (it ran to its end)."""
ENDED_EARLY_STATES: frozenset[SessionState] = frozenset(
    {SessionState.EXPIRED, SessionState.ABORTED}
)
"""States of a session closed before every item was answered."""
FINAL_STATES: frozenset[SessionState] = CLOSED_STATES - {SessionState.ANSWERED}
"""States in which nothing more is scored automatically: the ones no session leaves, and
``scored``, which becomes ``reviewed`` only when people finish its reviews."""


class ItemState(StrEnum):
    """Where one item of a session is."""

    ALLOCATED = "allocated"
    PENDING = "pending"
    """Delivered, not yet answered."""
    COMPLETED = "completed"
    RELEASED = "released"
    """Allocated, never delivered, returned to the pool when the session ended early."""


class FinishReason(StrEnum):
    """Why the model's reply ended, as the client reports it with the answer: the values
    OpenAI-compatible servers send, and ``error`` when the call failed for this item (the
    prompt did not fit the model's context, the provider refused it) and the answer is
    empty."""

    STOP = "stop"
    LENGTH = "length"
    """Cut by ``max_tokens`` (or the context): the answer may be incomplete."""
    CONTENT_FILTER = "content_filter"
    TOOL_CALLS = "tool_calls"
    ERROR = "error"


class SessionMode(StrEnum):
    """The kind of session: ``fixed`` (a stratified sample, ranked), ``adaptive`` (the
    server picks items and stops early), ``replay`` and ``anchor`` (contamination checks,
    admins and evaluators only), ``item_set`` (drawn from a named item set an admin saved;
    admins and evaluators only, not ranked)."""

    FIXED = "fixed"
    REPLAY = "replay"
    ANCHOR = "anchor"
    ADAPTIVE = "adaptive"
    ITEM_SET = "item_set"


class Role(StrEnum):
    """The role of an API key (and of the tokens exchanged from it)."""

    ADMIN = "admin"
    EVALUATOR = "evaluator"
    VENDOR = "vendor"
    AUDITOR = "auditor"
    REVIEWER = "reviewer"
    """An outside expert: sees and scores the answers of the human review queue, nothing
    else."""


class AdaptivePolicy(StrEnum):
    """How an adaptive session allocates its items across strata."""

    UNIFORM = "uniform"
    PROPORTIONAL = "proportional"
    NEYMAN = "neyman"
    NEYMAN_IRT = "neyman-irt"
    MODEL_ASSISTED = "model-assisted"


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
    SETTLED = "settled"
    """The model's place among its leaderboard neighbours was settled."""


class ModelApi(StrEnum):
    """How the server calls a model's endpoint: chat messages to ``/chat/completions``, or
    prompts rendered in a chat template to ``/completions`` (a base model)."""

    CHAT = "chat"
    COMPLETIONS = "completions"


class RunState(StrEnum):
    """Where an evaluation run driven by the server is (``queued`` → ``running`` →
    ``finished``; ``paused`` and back; or ``failed`` / ``cancelled``)."""

    QUEUED = "queued"
    """Waiting for a worker (again, after a pause)."""
    RUNNING = "running"
    PAUSED = "paused"
    """No item is sent to the model; its sessions stay open until resumed."""
    FINISHED = "finished"
    """Every session driven to its end (or the cost cap reached: ``stop_reason``)."""
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED_RUN_STATES: frozenset[RunState] = frozenset(
    {RunState.FINISHED, RunState.FAILED, RunState.CANCELLED}
)
"""States a run never leaves."""


class CallFailure(StrEnum):
    """Why a call to a model's endpoint failed."""

    EGRESS_REFUSED = "egress_refused"
    """The address is not one the server may call (loopback, private, metadata...)."""
    RESPONSE_TOO_LARGE = "response_too_large"
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt does not fit the model's context."""
    REJECTED = "rejected"
    """A status no retry mends (a bad key, an unknown model, a refused request)."""
    RETRIES_EXHAUSTED = "retries_exhausted"
    DEFERRED = "deferred"
    """The provider asked to wait longer than the server waits in one call."""
    PROTOCOL = "protocol"
    """A 2xx whose body is not a completion."""
    TIMEOUT = "timeout"


def _datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


VocabularyT = TypeVar("VocabularyT", bound=StrEnum)


def _vocabulary(cls: type[VocabularyT], value: Any) -> VocabularyT | str:
    """``value`` as a member of ``cls``, or as its plain string when this SDK does not know
    it (a state, mode or role a newer server added): an older SDK keeps reading responses.
    ``TypeError`` if ``value`` is not a string."""
    if not isinstance(value, str):
        raise TypeError(f"{cls.__name__}: expected a string, got {type(value).__name__}")
    try:
        return cls(value)
    except ValueError:
        return value


def _object(data: Any, what: str) -> dict[str, Any]:
    """``data`` if it is a JSON object; ``TypeError`` naming ``what`` otherwise."""
    if not isinstance(data, dict):
        raise TypeError(f"{what}: expected a JSON object, got {type(data).__name__}")
    return data


def _array(data: Any, what: str) -> list[Any]:
    """``data`` if it is a JSON array; ``TypeError`` naming ``what`` otherwise."""
    if not isinstance(data, list):
        raise TypeError(f"{what}: expected a JSON array, got {type(data).__name__}")
    return data


def _known(cls: type[Any], data: Any) -> dict[str, Any]:
    """The entries of the JSON object ``data`` that are fields of dataclass ``cls``.

    ``TypeError`` if ``data`` is not an object, ``ValueError`` naming the fields without a
    default that it lacks."""
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    known = {k: v for k, v in _object(data, cls.__name__).items() if k in names}
    missing = [
        f.name
        for f in fields
        if f.name not in known
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"{cls.__name__}: missing {', '.join(missing)}")
    return known


def _with_datetimes(fields: dict[str, Any], *names: str) -> dict[str, Any]:
    """``fields`` with the timestamps ``names`` parsed (absent ones become None)."""
    for name in names:
        fields[name] = _datetime(fields.get(name))
    return fields


class _Body:
    """A response body (the base of frozen dataclasses): ``from_json`` and dict-style reads."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Any:
        """``body["name"]``: the field ``name`` (the SDK returned dicts before)."""
        if name not in {f.name for f in dataclasses.fields(cast(Any, self))}:
            raise KeyError(name)
        return getattr(self, name)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The body read from its JSON object (``TypeError`` / ``ValueError`` if malformed)."""
        body: Self = cast(Any, cls)(**_known(cls, data))
        return body


_B = TypeVar("_B", bound=_Body)


def _each(cls: type[_B], data: Any, what: str) -> list[_B]:
    """Every object of the JSON array ``data`` read as ``cls``."""
    return [cls.from_json(entry) for entry in _array(data, what)]


def _by_name(cls: type[_B], data: Any, what: str) -> dict[str, _B]:
    """Every value of the JSON object ``data`` read as ``cls``, under its key."""
    return {key: cls.from_json(value) for key, value in _object(data, what).items()}


def _optional(cls: type[_B], data: Any) -> _B | None:
    """``data`` read as ``cls``; None if it is null or absent."""
    return None if data is None else cls.from_json(data)


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
class ModelEndpoint(_Body):
    """How the server calls a model (``PUT /v1/models/{id}/endpoint``). The secret headers'
    values are never sent back: ``secret_headers`` lists their names."""

    model_id: str
    base_url: str
    model: str
    """The model's name at the endpoint."""
    api: ModelApi | str
    paradigm: str
    adapter: str
    template: str | None
    system_prompt: str | None
    temperature: float
    max_tokens: int | None
    stop: list[str]
    connect_timeout_s: float
    read_timeout_s: float
    concurrency: int
    requests_per_minute: int | None
    tokens_per_minute: int | None
    usd_per_mtok_in: float | None
    usd_per_mtok_out: float | None
    secret_headers: list[str]
    updated_at: datetime | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _with_datetimes(_known(cls, data), "updated_at")
        fields["api"] = _vocabulary(ModelApi, fields.get("api"))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class EndpointSettings:
    """An endpoint to set on a model (``set_endpoint``). Every field left None takes the
    server's default; ``secret_headers`` None keeps the stored ones, ``{}`` removes them
    (they are sealed by the server and never read back)."""

    base_url: str
    model: str
    api: ModelApi | None = None
    template: str | None = None
    paradigm: str | None = None
    adapter: str | None = None
    system_prompt: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    connect_timeout_s: float | None = None
    read_timeout_s: float | None = None
    concurrency: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    usd_per_mtok_in: float | None = None
    usd_per_mtok_out: float | None = None
    secret_headers: dict[str, str] | None = dataclasses.field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The request body: the fields that are set."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True, slots=True)
class EndpointCheck(_Body):
    """One small request to a model's endpoint, made by the server: whether it answered,
    how fast, and otherwise why not (secrets redacted)."""

    ok: bool
    latency_s: float | None
    failure: CallFailure | str | None
    detail: str | None
    reply: str | None
    """The start of the model's reply."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        if fields.get("failure") is not None:
            fields["failure"] = _vocabulary(CallFailure, fields["failure"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class RunSessionProgress(_Body):
    """One session of a run: items answered of its size (no correctness before scoring)."""

    session_id: str | None
    """None until the run has opened it."""
    done: int
    total: int | None
    state: SessionState | str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        if fields.get("state") is not None:
            fields["state"] = _vocabulary(SessionState, fields["state"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Run(_Body):
    """An evaluation run the server drives (``start_run``): its state and progress."""

    id: str
    model_id: str
    state: RunState | str
    mode: SessionMode | str
    sessions: int
    n_items: int | None
    cost_cap_usd: float | None
    items_done: int
    items_total: int | None
    answers_per_minute: float | None
    eta_s: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    failures: dict[str, int]
    """Failed calls by kind (a ``CallFailure`` value): items answered empty, sessions stopped."""
    progress: list[RunSessionProgress]
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    stop_reason: str | None = None

    @property
    def done(self) -> bool:
        return self.state in ENDED_RUN_STATES

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _with_datetimes(_known(cls, data), "created_at", "started_at", "ended_at")
        fields["state"] = _vocabulary(RunState, fields["state"])
        fields["mode"] = _vocabulary(SessionMode, fields["mode"])
        fields["progress"] = _each(RunSessionProgress, fields.get("progress", []), "progress")
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Session:
    """An evaluation session: its state and item counts when it was read."""

    id: str
    org_id: str
    model_id: str
    mode: SessionMode | str
    state: SessionState | str
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
    commitment: str | None = None
    """The server's SHA-256 commitment to the session's sample, given when the session is
    created, before any item: keep it, and once the session is scored check it with
    :func:`clients.sdk.verify_commitment`. None for sessions drawn before commitments."""

    @property
    def done(self) -> bool:
        """No item will be delivered or accepted any more (``CLOSED_STATES``)."""
        return self.state in CLOSED_STATES

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _with_datetimes(_known(cls, data), "deadline_at", "created_at", "ended_at")
        fields["mode"] = _vocabulary(SessionMode, fields["mode"])
        fields["state"] = _vocabulary(SessionState, fields["state"])
        adaptive = fields.get("adaptive")
        fields["adaptive"] = None if adaptive is None else AdaptiveSummary.from_json(adaptive)
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class SampleSource(_Body):
    """What a session's sample was drawn from, as committed to: ``kind`` ``stratified``
    (with the ``disciplines`` its plan gave quotas), ``anchor`` or ``item_set`` (with the
    ``item_set_id``)."""

    kind: str
    disciplines: list[str] | None = None
    item_set_id: str | None = None
    recorded: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The object exactly as the server sent it (what the commitment hashes); empty when
    built by hand, and then ``to_json`` gives the fields that are not None."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields.pop("recorded", None)
        return cls(**fields, recorded=dict(data))

    def to_json(self) -> dict[str, Any]:
        """The source as committed to (``recorded``, or the fields that are set)."""
        if self.recorded:
            return dict(self.recorded)
        return {
            name: value
            for name in ("kind", "disciplines", "item_set_id")
            if (value := getattr(self, name)) is not None
        }


@dataclass(frozen=True, slots=True)
class CommitmentReveal(_Body):
    """``GET /v1/sessions/{id}/commitment``: the commitment to the session's sample and,
    once the session is scored (``revealed``), the seed, salt, source and item ids (in
    drawn order) that open it. Check it with :func:`clients.sdk.verify_commitment`."""

    commitment: str | None
    revealed: bool
    seed: str | None = None
    salt: str | None = None
    source: SampleSource | None = None
    """What the sample was drawn from."""
    item_ids: list[str] | None = None
    """The sample's items in drawn order."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["source"] = _optional(SampleSource, fields.get("source"))
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
class DisciplineEstimate(_Body):
    """An adaptive session's estimate of one discipline's score on its pool (points,
    0-100), the half-width of its pointwise interval at the session's delta, and the
    scored items behind it."""

    estimate: float
    halfwidth: float
    n_items: int


@dataclass(frozen=True, slots=True)
class AdaptiveSummary(_Body):
    """Where an adaptive session stands: its estimate (score points, 0-100) over every
    score so far, with the half-width of its stopping rule's interval. The figures that
    move with single verdicts (``n_scored``, ``estimate``, ``halfwidth``, ``checks``,
    ``stop_reason``) are None for roles other than admin and auditor until the session is
    scored."""

    policy: AdaptivePolicy | str
    bound: AdaptiveBound | str
    delta: float
    target_halfwidth: float
    budget: int
    history_models: int
    """Other models whose past verdicts gave the item parameters (``neyman-irt``)."""
    n_scored: int | None = None
    estimate: float | None = None
    halfwidth: float | None = None
    checks: int | None = None
    stop_reason: StopReason | str | None = None
    disciplines: dict[str, DisciplineEstimate] | None = None
    """``model-assisted`` only: per discipline, hidden like ``estimate``."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["policy"] = _vocabulary(AdaptivePolicy, fields["policy"])
        fields["bound"] = _vocabulary(AdaptiveBound, fields["bound"])
        stop = fields.get("stop_reason")
        fields["stop_reason"] = None if stop is None else _vocabulary(StopReason, stop)
        disciplines = fields.get("disciplines")
        if disciplines is not None:
            fields["disciplines"] = _by_name(DisciplineEstimate, disciplines, "disciplines")
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
        return cls(**_known(cls, {"options": None, **_object(data, cls.__name__)}))


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
    state: SessionState | str
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
    judges: list[str] = dataclasses.field(default_factory=list)
    """Every judge whose verdicts count (several: a panel)."""

    @property
    def complete(self) -> bool:
        """Nothing more will be scored automatically: the session no longer takes answers
        (scored, expired or aborted) and no answer is queued or being scored."""
        return self.state in FINAL_STATES and self.waiting == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["state"] = _vocabulary(SessionState, fields["state"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Identity(_Body):
    """Who a bearer token stands for (``whoami``)."""

    subject: str
    """The id of the API key the token was exchanged for."""
    org_id: str
    role: Role | str
    session_id: str | None = None
    """The one session a session-scoped token may drive; None for an unscoped token."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["role"] = _vocabulary(Role, fields["role"])
        return cls(**fields)


# --------------------------------------------------------------------------- leaderboard
#
# A vendor sees the public fields only (the server's PROCTOR_LEADERBOARD_PUBLIC_FIELDS):
# the others are absent from its rows, and read as None here. Scores are on the 0-100
# scale of the sessions (per discipline: 10 points); every score comes with its interval.


@dataclass(frozen=True, slots=True)
class ScoreSummary(_Body):
    """A score over a model's sessions: mean, bootstrap 95% interval, variance and
    standard error, and the score of every session. None where it cannot be computed."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    variance: float | None
    standard_error: float | None
    session_values: list[float | None]


@dataclass(frozen=True, slots=True)
class DisciplineScore(_Body):
    """A model's score in one discipline (10-point scale), pooled over its sessions."""

    score: float | None
    standard_error: float | None
    items: int


@dataclass(frozen=True, slots=True)
class Latency(_Body):
    """Seconds from delivering an item to receiving its answer (the server's clock), and
    the median of the model latencies clients reported with their answers."""

    median_s: float | None
    p95_s: float | None
    reported_median_s: float | None = None
    reported_n: int = 0


@dataclass(frozen=True, slots=True)
class Cost(_Body):
    """Tokens per item, and USD per 1000 items at the model's registered prices."""

    prompt_tokens_per_item: float | None
    completion_tokens_per_item: float | None
    usd_per_1k_items: float | None


@dataclass(frozen=True, slots=True)
class ReplayRate(_Body):
    """The share of replayed ``items`` the model completed near-exactly, with its
    Clopper-Pearson interval."""

    items: int
    near_exact: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True, slots=True)
class GeneralisationGap(_Body):
    """The model's score on the public items minus its score on the private anchor set
    (``gap``), and that gap minus the median gap (``excess``); ``flagged``: potential
    overfitting, and ``reported_score`` is then the lower bound of the public score."""

    public: float | None
    anchor_set: float | None
    gap: float | None
    excess: float | None
    flagged: bool
    reported_score: float | None


@dataclass(frozen=True, slots=True)
class Contamination(_Body):
    """The model's contamination checks (None: not measured)."""

    replay: ReplayRate | None
    generalisation_gap: GeneralisationGap | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["replay"] = _optional(ReplayRate, fields["replay"])
        fields["generalisation_gap"] = _optional(GeneralisationGap, fields["generalisation_gap"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class LeaderboardRow(_Body):
    """One model of the leaderboard. Every field but ``model_id`` is None when the reader
    may not see it (or the server did not send it)."""

    model_id: str | None
    position: int | None = None
    group: int | None = None
    """The tie group: models the data cannot order share one."""
    rank_range: list[int] | None = None
    """The best and worst rank the model's interval allows."""
    beats_next: float | None = None
    """Share of bootstrap replicates in which the model beats the next one down (None for
    the last row)."""
    name: str | None = None
    family: str | None = None
    organisation: str | None = None
    absolute: ScoreSummary | None = None
    relative: ScoreSummary | None = None
    """The score relative to the anchor model's."""
    sessions: int | None = None
    """Sessions the score counts: fixed ones by their items, adaptive ones by their
    estimates."""
    adaptive_sessions: int | None = None
    """How many of ``sessions`` are adaptive (counted by their estimates)."""
    disciplines: dict[str, DisciplineScore] | None = None
    latency: Latency | None = None
    cost: Cost | None = None
    contamination: Contamination | None = None
    under_review: int | None = None
    """Scored sessions whose open human reviews could still change the score (staff)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        for name, part in (
            ("absolute", ScoreSummary),
            ("relative", ScoreSummary),
            ("latency", Latency),
            ("cost", Cost),
            ("contamination", Contamination),
        ):
            fields[name] = _optional(part, fields.get(name))
        disciplines = fields.get("disciplines")
        if disciplines is not None:
            fields["disciplines"] = _by_name(DisciplineScore, disciplines, "disciplines")
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Anchor(_Body):
    """The model relative scores are measured against (``designated`` by an admin, or the
    top model); ``name`` is None when the reader may not see names."""

    model_id: str | None
    name: str | None
    designated: bool
    note: str | None


@dataclass(frozen=True, slots=True)
class BaselineRating(_Body):
    """A model's Elo rating and Bradley-Terry log-strength from per-item comparisons."""

    model_id: str
    name: str | None
    elo: float | None
    bt_log_strength: float | None


@dataclass(frozen=True, slots=True)
class Baselines(_Body):
    """Elo and Bradley-Terry ratings (``leaderboard(baselines=True)``), in leaderboard
    order."""

    n_comparisons: int
    note: str | None
    models: list[BaselineRating]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["models"] = _each(BaselineRating, fields["models"], "Baselines.models")
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Diagnostics(_Body):
    """ReLE's capability diagnostics (``leaderboard(diagnostics=True)``), per model name (per
    model id when the reader may not see names); a statistic that could not be computed is
    None, with its reason in ``unavailable`` (statistic -> reason)."""

    models: list[str]
    anisotropy_index: float | None
    rsa: dict[str, float | None] | None
    capability_inconsistency: dict[str, float | None] | None
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JudgeCalibration(_Body):
    """The default judge's agreement with human scores on the calibration set: Cohen's
    kappa and quadratic-weighted kappa with their 95% intervals."""

    calibration_set: str
    set_version: int
    n: int
    weighted_kappa: float | None
    weighted_ci_low: float | None
    weighted_ci_high: float | None
    kappa: float | None
    kappa_ci_low: float | None
    kappa_ci_high: float | None


@dataclass(frozen=True, slots=True)
class Leaderboard(_Body):
    """The ranking, one row per model, best first (``leaderboard()``).

    ``groups`` lists the tie groups by model name (by model id when the reader may not see
    names); ``baselines`` and ``diagnostics`` are None unless asked for; ``judges`` are the
    judges whose verdicts count (several: a panel combined by ``panel_rule``)."""

    judge: str
    prompt_version: str
    anchor: Anchor
    confidence_level: float
    tie_threshold: float
    groups: list[list[str]]
    models: list[LeaderboardRow]
    judges: list[str] = dataclasses.field(default_factory=list)
    panel_rule: str | None = None
    judge_calibration: JudgeCalibration | None = None
    """None: the default judge has no calibration on a calibration set."""
    baselines: Baselines | None = None
    diagnostics: Diagnostics | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["anchor"] = Anchor.from_json(fields["anchor"])
        fields["judge_calibration"] = _optional(JudgeCalibration, fields.get("judge_calibration"))
        fields["groups"] = [
            _array(group, "Leaderboard.groups[]")
            for group in _array(fields["groups"], "Leaderboard.groups")
        ]
        fields["models"] = _each(LeaderboardRow, fields["models"], "Leaderboard.models")
        fields["baselines"] = _optional(Baselines, fields.get("baselines"))
        fields["diagnostics"] = _optional(Diagnostics, fields.get("diagnostics"))
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """The board as a JSON object, the parts not asked for (None) left out as the server
        leaves them out; fields hidden from the reader are null."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class DisciplineEntry(_Body):
    """A model's score in one discipline (10-point scale); ``name`` is None when the reader
    may not see names."""

    model_id: str | None
    name: str | None
    score: float | None
    standard_error: float | None
    items: int


@dataclass(frozen=True, slots=True)
class DisciplineBoard(_Body):
    """The models scored in one discipline, best first."""

    discipline: str
    models: list[DisciplineEntry]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["models"] = _each(DisciplineEntry, fields["models"], "DisciplineBoard.models")
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class DisciplineLeaderboard(_Body):
    """The per-discipline view (``leaderboard(view="disciplines")``); scores on a
    ``scale``-point scale."""

    judge: str
    prompt_version: str
    scale: int
    disciplines: list[DisciplineBoard]
    judges: list[str] = dataclasses.field(default_factory=list)
    panel_rule: str | None = None
    judge_calibration: JudgeCalibration | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        fields = _known(cls, data)
        fields["judge_calibration"] = _optional(JudgeCalibration, fields.get("judge_calibration"))
        fields["disciplines"] = _each(
            DisciplineBoard, fields["disciplines"], "DisciplineLeaderboard.disciplines"
        )
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """The view as a JSON object (names hidden from the reader are null)."""
        return dataclasses.asdict(self)
