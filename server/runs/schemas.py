"""Bodies of the run routes (``/v1/runs``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clients.sdk.types import RunState, SessionMode, SessionState
from server.api.bodies import RequestBody

MAX_RUN_SESSIONS = 1000

RunMode = Literal[SessionMode.FIXED, SessionMode.ADAPTIVE]
"""The modes a run drives: a fixed sample, or adaptive sessions (their default options)."""


class RunIn(RequestBody):
    """A run to start: drive the model's endpoint through ``sessions`` new sessions."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_id: uuid.UUID
    sessions: int = Field(1, ge=1, le=MAX_RUN_SESSIONS)
    mode: RunMode = SessionMode.FIXED
    n_items: int | None = Field(None, ge=1, le=100_000)
    """Items per session, where the caller may choose (admins and evaluators)."""
    cost_cap_usd: float | None = Field(None, gt=0, le=1_000_000)
    """The run stops before its spending would pass this (USD, at the model's prices)."""


class RunSessionOut(BaseModel):
    """One session of the run: items answered of its size (never a correctness figure)."""

    session_id: uuid.UUID | None
    done: int
    total: int | None
    state: SessionState | None


class RunOut(BaseModel):
    """A run and its progress."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    model_id: uuid.UUID
    state: RunState
    mode: SessionMode
    sessions: int
    n_items: int | None
    cost_cap_usd: float | None
    items_done: int
    items_total: int | None
    """Items of the sessions opened so far (None before the first opens)."""
    answers_per_minute: float | None
    eta_s: float | None
    """Seconds to the end at the pace so far (None before there is a pace)."""
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    failures: dict[str, int]
    """Failed model calls by kind (``CallFailure``): items answered empty, sessions stopped."""
    progress: list[RunSessionOut]
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    stop_reason: str | None
