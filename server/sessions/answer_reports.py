"""What a client reports with an answer besides its tokens."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AnswerReports:
    """Why the model's reply ended (a ``clients.sdk.types.FinishReason`` value) and the
    model's own latency in seconds, both as the client reports them (stored as given)."""

    finish_reason: str | None = None
    model_latency_s: float | None = None
