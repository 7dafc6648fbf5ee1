"""Bodies of the session routes. Response models are explicit allow-lists: an item carries
its question content only, never its answer, explanation, family, source or variant."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bank.sampling.source import SampleSource, SourceKind, source_json
from clients.sdk.types import (
    AdaptiveBound,
    AdaptivePolicy,
    AdaptiveSummary,
    FinishReason,
    SessionMode,
    SessionState,
    StopReason,
)
from server.api.bodies import RequestBody
from server.sessions.models import EvalSession
from server.sessions.service import session_counts
from server.sessions.submission import AnswerSubmission

MAX_ANSWER = 65_536
MAX_REASONING = 262_144


class AdaptiveOptions(RequestBody):
    """Options of an ``adaptive`` session; what is left out takes the server's default
    (``PROCTOR_ADAPTIVE_*``). ``n_items`` is the session's budget."""

    policy: AdaptivePolicy | None = None
    bound: AdaptiveBound | None = None
    target_halfwidth: float | None = Field(None, gt=0, le=50)
    """Half-width (score points, 0-100) at which the session stops."""
    delta: float | None = Field(None, gt=0, lt=1)
    """Error probability of the interval, over every check of the stopping rule."""


class DisciplineEstimateOut(BaseModel):
    """One discipline's estimate (points, 0-100) and its pointwise half-width at delta."""

    model_config = ConfigDict(from_attributes=True)

    estimate: float
    halfwidth: float
    n_items: int


class AdaptiveOut(BaseModel):
    """Where an adaptive session stands: its estimate (score points, 0-100) over every
    score so far, with the half-width of its stopping rule's interval."""

    model_config = ConfigDict(from_attributes=True)

    policy: AdaptivePolicy
    bound: AdaptiveBound
    delta: float
    target_halfwidth: float
    budget: int
    n_scored: int | None
    """Items with a score; null, like the estimate, for roles other than admin and auditor
    until the session is scored."""
    estimate: float | None
    halfwidth: float | None
    checks: int | None
    stop_reason: StopReason | None
    history_models: int
    """Other models whose past verdicts gave the item parameters (``neyman-irt``)."""
    disciplines: dict[str, DisciplineEstimateOut] | None = None
    """``model-assisted``: per discipline of the pool, its estimate and pointwise interval
    (null like the estimate for roles other than admin and auditor until scored)."""


class SessionCreate(RequestBody):
    model_config = ConfigDict(protected_namespaces=())

    model_id: uuid.UUID
    n_items: int | None = Field(None, ge=1, le=100_000)
    """Admins and evaluators only; the default is the server's (1,000)."""
    mode: SessionMode = SessionMode.FIXED
    """``fixed`` or ``adaptive``; ``replay`` and ``anchor`` (contamination checks) and
    ``item_set`` for admins and evaluators only (``server.sessions.modes``)."""
    adaptive: AdaptiveOptions | None = None
    """Only with ``mode: adaptive``."""
    item_set: str | None = Field(None, min_length=1, max_length=100)
    """The name of a saved item set to draw the sample from (admins and evaluators only);
    naming one makes ``mode`` default to ``item_set``, and any other mode is refused."""

    @model_validator(mode="after")
    def _item_set_mode(self) -> SessionCreate:
        """``item_set`` without a mode means ``mode: item_set``; the two go together."""
        if self.item_set is not None and "mode" not in self.model_fields_set:
            self.mode = SessionMode.ITEM_SET
        if (self.item_set is not None) != (self.mode is SessionMode.ITEM_SET):
            raise ValueError("mode 'item_set' and an item_set name go together")
        return self


class SessionOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    org_id: uuid.UUID
    model_id: uuid.UUID
    mode: SessionMode
    state: SessionState
    n_items: int
    allocated: int
    pending: int
    completed: int
    released: int
    pending_window: int
    deadline_at: datetime
    created_at: datetime
    ended_at: datetime | None
    adaptive: AdaptiveOut | None = None
    """An adaptive session's policy and estimate (on the single-session routes only)."""
    commitment: str | None = None
    """SHA-256 commitment (hex) to the session's sample: its seed, a salt, what it was
    drawn from and its item ids in drawn order, given before any item is delivered and
    opened by ``GET /v1/sessions/{id}/commitment`` once the session is scored. Null for
    sessions whose sample was drawn before commitments existed."""

    @classmethod
    def of(
        cls,
        record: EvalSession,
        adaptive: AdaptiveSummary | None = None,
        commitment: str | None = None,
    ) -> SessionOut:
        fields: dict[str, Any] = {
            "id": record.id,
            "org_id": record.org_id,
            "model_id": record.model_id,
            "mode": record.mode,
            "state": record.state,
            "n_items": record.n_items,
            "pending_window": record.pending_window,
            "deadline_at": record.deadline_at,
            "created_at": record.created_at,
            "ended_at": record.ended_at,
        }
        return cls(
            **fields,
            **session_counts(record),
            adaptive=AdaptiveOut.model_validate(adaptive) if adaptive is not None else None,
            commitment=commitment,
        )


class SampleSourceOut(BaseModel):
    """What a sample was drawn from, exactly as committed to: sent with the keys it was
    recorded with and no others (the route leaves unset fields out: the commitment hashes
    this object)."""

    model_config = ConfigDict(extra="allow")

    kind: SourceKind
    disciplines: list[str] | None = None
    """``stratified``: the disciplines the sample's plan gave quotas."""
    item_set_id: str | None = None
    """``item_set``: the id of the item set drawn from."""


class CommitmentOut(BaseModel):
    """A session's sample commitment and, once the session is scored (or reviewed), what
    opens it; before that ``revealed`` is false and the rest is null. Recompute the hash
    with ``clients.sdk.verify_commitment``."""

    model_config = ConfigDict(from_attributes=True)

    commitment: str | None
    """SHA-256 (hex) of the canonical JSON of version, seed, salt, source and item ids;
    null for samples drawn before commitments existed."""
    revealed: bool
    seed: str | None = None
    salt: str | None = None
    source: SampleSourceOut | None = None
    """What the sample was drawn from: ``{"kind": "stratified", "disciplines": [...]}``,
    ``{"kind": "anchor"}`` or ``{"kind": "item_set", "item_set_id": ...}``."""
    item_ids: list[uuid.UUID] | None = None
    """The sample's items in drawn order (delivery may have reordered an adaptive
    session's)."""

    @field_validator("source", mode="before")
    @classmethod
    def _source_as_committed(cls, value: object) -> object:
        """A sample source (``server.sessions.commitment.Reveal``) as its committed JSON."""
        if isinstance(value, SampleSource):
            return source_json(value)
        return value


class ItemOut(BaseModel):
    position: int
    item_id: uuid.UUID
    question: str
    options: list[str] | None = None
    qtype: str
    discipline: str


class TokenUsage(RequestBody):
    """What the model spent on one answer, as the client measured it (feeds cost per model)."""

    prompt_tokens: int = Field(ge=0, le=100_000_000)
    completion_tokens: int = Field(ge=0, le=100_000_000)


MAX_REPORTED_LATENCY_S = 86_400.0
"""Longest model latency a client may report (a day)."""


class AnswerIn(RequestBody):
    position: int = Field(ge=0, le=1_000_000)
    item_id: uuid.UUID
    answer: str = Field(max_length=MAX_ANSWER)
    reasoning: str | None = Field(None, max_length=MAX_REASONING)
    usage: TokenUsage | None = None
    finish_reason: FinishReason | None = None
    """Why the model's reply ended: ``length`` (cut by ``max_tokens``: the answer may be
    incomplete), ``error`` (the call failed for this item; the answer is empty), ..."""
    model_latency_s: float | None = Field(None, ge=0, le=MAX_REPORTED_LATENCY_S)
    """The model's own time for the reply in seconds, as the client measured it; kept as
    reported, beside the server's delivery-to-answer time."""

    def submission(self) -> AnswerSubmission:
        """The body as the one value the answer service takes."""
        return AnswerSubmission(
            position=self.position,
            item_id=self.item_id,
            answer=self.answer,
            reasoning=self.reasoning,
            prompt_tokens=self.usage.prompt_tokens if self.usage else None,
            completion_tokens=self.usage.completion_tokens if self.usage else None,
            finish_reason=self.finish_reason.value if self.finish_reason else None,
            model_latency_s=self.model_latency_s,
        )


class AnswerAccepted(BaseModel):
    session_id: uuid.UUID
    position: int
    item_id: uuid.UUID
    submitted_at: datetime
