"""The body of ``GET /v1/audit/sessions/{session_id}/sample``."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from bank.sampling.rederive import Outcome
from bank.sampling.source import SourceKind
from server.sessions.modes import SessionMode
from server.sessions.states import SessionState


class SampleDifferenceOut(BaseModel):
    """The first index, in drawn order, where the re-derived and stored samples differ."""

    model_config = ConfigDict(from_attributes=True)

    index: int
    """0-based, in drawn order."""
    position: int | None
    """The stored item's current position (None: the stored sample is shorter)."""
    expected: uuid.UUID | None
    """The item the re-derivation put there (None: the re-derived sample is shorter)."""
    stored: uuid.UUID | None


class SampleDeliveredOut(BaseModel):
    """Whether every delivered item is in the re-derived sample."""

    model_config = ConfigDict(from_attributes=True)

    n_delivered: int
    all_in_rederived: bool | None
    """None when the sample is not re-derivable."""
    first_missing_position: int | None
    first_missing_item: uuid.UUID | None
    missing_positions: list[int]
    """Every delivered position whose item is not in the re-derived sample."""


class SamplePositionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    position: int
    drawn_position: int | None
    item_id: uuid.UUID | None
    """Delivered positions only."""


class SamplePolicyStepOut(BaseModel):
    """How the item at ``position`` of a model-assisted session was drawn."""

    model_config = ConfigDict(from_attributes=True)

    position: int
    probability: float
    predicted: float
    unseen_predicted: float
    weight: float


class SampleAuditAdaptiveOut(BaseModel):
    """An adaptive session: the same set as the re-derived sample, in the policy's order."""

    model_config = ConfigDict(from_attributes=True)

    policy: str
    same_set: bool
    explanation: str
    positions: list[SamplePositionOut]
    policy_steps: list[SamplePolicyStepOut]
    """``adaptive_draws`` rows (model-assisted sessions), by position."""


class SampleAuditOut(BaseModel):
    """A session's sample drawn again from its seed on the bank and exposure state as of
    its ``drawn_at``, compared with the stored sample."""

    model_config = ConfigDict(from_attributes=True)

    session_id: uuid.UUID
    sample_id: uuid.UUID
    mode: SessionMode
    state: SessionState
    kind: SourceKind | None
    """The sample's source kind (None: not recorded, or unknown)."""
    drawn_at: datetime | None
    outcome: Outcome
    """``match``, ``mismatch`` or ``not_rederivable`` (``reason`` says why)."""
    reason: str | None
    n_stored: int
    n_rederived: int
    first_difference: SampleDifferenceOut | None
    same_set: bool | None
    shortfall_equal: bool | None
    delivered: SampleDeliveredOut
    history_breaks: list[uuid.UUID]
    """Items whose status history since the draw does not chain to their current status
    (their status at the draw is uncertain)."""
    adaptive: SampleAuditAdaptiveOut | None

    @property
    def ok(self) -> bool:
        """Whether the sample matches (``outcome`` is ``match``)."""
        return self.outcome is Outcome.MATCH
