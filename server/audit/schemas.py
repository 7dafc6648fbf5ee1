"""The audit log as the API shows it."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict


class AuditOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    subject: str | None
    org_id: uuid.UUID | None
    session_id: uuid.UUID | None
    method: str
    route: str
    status: int
    client: str | None
    repeats: int
    """Requests this row stands for (more than 1: repeated refusals of one client address,
    subject, method, route and status, folded into one row per window)."""
