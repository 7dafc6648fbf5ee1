"""Request and response bodies of the auth routes (explicit allow-lists)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

from clients.sdk.types import Role
from server.api.bodies import RequestBody


class TokenRequest(RequestBody):
    api_key: str = Field(min_length=1, max_length=128)
    session_id: uuid.UUID | None = None
    """Scope the token to this session only."""


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class RevokeRequest(RequestBody):
    jti: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    key_id: uuid.UUID | None = None


class RevokeResponse(BaseModel):
    revoked: bool


class WhoAmI(BaseModel):
    subject: str
    org_id: uuid.UUID
    role: Role
    session_id: uuid.UUID | None
