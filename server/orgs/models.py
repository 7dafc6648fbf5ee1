"""The ``organisations`` table."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class Organisation(Base):
    """A vendor, an evaluation team or the operator itself."""

    __tablename__ = "organisations"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    is_operator: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    """The operator's own organisation: the only one whose keys may be platform roles
    (admin, auditor), which act on every organisation. At most one."""
    max_concurrent_sessions: Mapped[int | None] = mapped_column(nullable=True)
    """This organisation's open-session quota; None: the ``max_concurrent_sessions`` setting."""
    max_sessions_per_period: Mapped[int | None] = mapped_column(nullable=True)
    """Sessions it may open per ``session_period_s``; None: ``max_sessions_per_period``."""

    __table_args__ = (
        Index(
            "uq_organisations_one_operator",
            "is_operator",
            unique=True,
            postgresql_where=text("is_operator"),
            sqlite_where=text("is_operator"),
        ),
    )
