"""Bodies of the model registry routes."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from server.api.bodies import RequestBody


class ModelCreate(RequestBody):
    model_config = ConfigDict(protected_namespaces=())

    name: str = Field(min_length=1, max_length=200)
    api_snapshot: str = Field(min_length=1, max_length=200)
    """The pinned API version or checkpoint, so results stay attached to one model."""
    family: str | None = Field(None, max_length=100)
    params_b: float | None = Field(None, ge=0, le=1_000_000)
    usd_per_mtok_in: float | None = Field(None, ge=0, le=1_000_000)
    """Price per million prompt tokens (USD), for the leaderboard's cost figures."""
    usd_per_mtok_out: float | None = Field(None, ge=0, le=1_000_000)
    org: str | None = Field(None, min_length=1, max_length=200)
    """Admins only: register for this organisation instead of their own."""


class ModelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    org_id: uuid.UUID
    name: str
    api_snapshot: str
    family: str | None
    params_b: float | None
    usd_per_mtok_in: float | None
    usd_per_mtok_out: float | None
    created_at: datetime
