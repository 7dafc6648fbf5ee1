"""The ``registered_models`` table: the models an organisation evaluates."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Float, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class RegisteredModel(Base):
    """An evaluated model pinned to one API snapshot (fixed versions, as in LLMEval-Fair,
    Zhang et al., §2.2)."""

    __tablename__ = "registered_models"
    __table_args__ = (UniqueConstraint("org_id", "name", "api_snapshot"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    api_snapshot: Mapped[str] = mapped_column(String(200))
    family: Mapped[str | None] = mapped_column(String(100), nullable=True)
    params_b: Mapped[float | None] = mapped_column(Float, nullable=True)
    usd_per_mtok_in: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Price of a million prompt tokens, for the leaderboard's cost per model."""
    usd_per_mtok_out: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Price of a million completion tokens."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
