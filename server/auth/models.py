"""API keys (stored hashed) and revoked token ids."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class ApiKey(Base):
    """A long-lived credential of one organisation and role, exchanged for short JWTs.

    Only ``key_hash`` (SHA-256 of the key) is stored; ``prefix`` lets a person recognise a
    key in listings without revealing it."""

    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(nullable=True)


class RevokedToken(Base):
    """A token id (``jti``) refused from ``revoked_at`` on, kept until it would expire."""

    __tablename__ = "revoked_tokens"

    jti: Mapped[str] = mapped_column(String(64), primary_key=True)
    revoked_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
