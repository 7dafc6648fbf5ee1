"""What a client sends with an answer, as one value (``POST /v1/sessions/{id}/answers``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from judge.reasoning import split_reasoning


@dataclass(frozen=True, slots=True)
class AnswerSubmission:
    """The answer to the item at ``position`` and what the client reports with it:
    ``reasoning`` sent apart, the model's token usage (cost per model on the leaderboard),
    why its reply ended (a ``clients.sdk.types.FinishReason`` value) and its latency in
    seconds by the client's clock (stored as given)."""

    position: int
    item_id: uuid.UUID
    answer: str
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    model_latency_s: float | None = None

    def with_trace_apart(self) -> AnswerSubmission:
        """The submission as stored: a reasoning trace inside the answer
        (``<think>...</think>``) moves to ``reasoning``, after any trace sent apart;
        ``answer`` keeps the final answer, which is what gets judged."""
        final, trace = split_reasoning(self.answer)
        reasoning = "\n\n".join(part for part in (self.reasoning, trace) if part) or None
        return replace(self, answer=final, reasoning=reasoning)
