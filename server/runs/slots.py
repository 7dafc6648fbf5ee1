"""What a worker holds of a run: a claimed slot's work, and how driving it ended."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from server.runs.states import SlotState


@dataclass(frozen=True, slots=True)
class SlotWork:
    """A claimed slot and what driving it needs from the run."""

    run_id: uuid.UUID
    index: int
    session_id: uuid.UUID | None
    model_id: uuid.UUID
    org_id: uuid.UUID
    created_by: str
    created_role: str
    mode: str
    n_items: int | None
    cost_cap_usd: float | None


@dataclass(slots=True)
class SlotEnd:
    """How driving a slot ended: its next state and why."""

    state: SlotState
    error: str | None = None
    stop: str | None = None
