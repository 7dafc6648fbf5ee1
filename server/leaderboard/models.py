"""The ranking anchor's history (LLMEval-Fair, Zhang et al., eq. 2: R = S / S_anchor x 100)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, utcnow


class RankingAnchor(Base):
    """One designation of the anchor model; the newest row is the current anchor.

    ``model_id`` None means "the top model" (the default). Rows are never changed, so the
    history of anchors is kept and every relative score can be recomputed for any of them.
    """

    __tablename__ = "ranking_anchors"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    """Increasing: the newest designation has the highest id."""
    model_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("registered_models.id"), nullable=True
    )
    set_by: Mapped[str] = mapped_column(String(64))
    set_at: Mapped[datetime] = mapped_column(default=utcnow)
