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


class ConsoleLogin(Base):
    """A browser's login to the admin console (``server.console``): the server-side session a
    cookie refers to. Only the SHA-256 of the cookie's secret is stored (``id``); the row
    dies with its API key (``ON DELETE CASCADE``; a revoked key is refused at every request),
    at logout (deleted), after ``console_idle_s`` without a request and after
    ``console_max_age_s`` whatever happens."""

    __tablename__ = "console_logins"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64))
    """The synchronizer token every state-changing form of this login must carry."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
