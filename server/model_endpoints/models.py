"""The ``model_endpoints`` table: how the server calls a registered model (one endpoint a
model)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, JSONType, utcnow
from bank.sealing import SealedText


class ModelEndpoint(Base):
    """An OpenAI-compatible endpoint of one registered model, with what ``proctor run``
    takes about calling it (paradigm, adapter, template, generation parameters, limits).

    ``secret_headers`` is a JSON object of header names and values, sealed at rest under
    the bank's keyring (the same keys and rotation as the reference answers); no route
    returns it."""

    __tablename__ = "model_endpoints"

    model_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    base_url: Mapped[str] = mapped_column(String(2000))
    model: Mapped[str] = mapped_column(String(200))
    api: Mapped[str] = mapped_column(String(16))
    paradigm: Mapped[str] = mapped_column(String(16))
    adapter: Mapped[str] = mapped_column(String(32))
    template: Mapped[str | None] = mapped_column(String(32), nullable=True)
    system_prompt: Mapped[str | None] = mapped_column(Text, nullable=True)
    temperature: Mapped[float] = mapped_column(Float)
    max_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stop: Mapped[list[str]] = mapped_column(JSONType, default=list)
    connect_timeout_s: Mapped[float] = mapped_column(Float)
    read_timeout_s: Mapped[float] = mapped_column(Float)
    concurrency: Mapped[int] = mapped_column(Integer)
    requests_per_minute: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokens_per_minute: Mapped[int | None] = mapped_column(Integer, nullable=True)
    secret_headers: Mapped[str | None] = mapped_column(
        SealedText("model_endpoints.secret_headers"), nullable=True
    )
    updated_by: Mapped[str] = mapped_column(String(64))
    """The API key id that last set it."""
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
