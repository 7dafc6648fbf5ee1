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


CHANGE_SLOTS = 16
"""Rows of ``leaderboard_changes``: concurrent writers bump different rows (see there)."""


class LeaderboardChange(Base):
    """A counter of the changes to the leaderboard's inputs, kept by the database.

    On PostgreSQL, triggers (migration ``e1f2a3b4c5d6``) add one to a row whenever a
    verdict is written or removed, a session's state, model or mode changes (or a scored
    session is inserted or deleted), a review task is opened, closed or removed, an anchor
    is designated, a model or organisation is added, changed or removed, or an item's
    discipline changes. The sum over the rows is the leaderboard's data version
    (``server.leaderboard.cache.data_version``): one read of ``CHANGE_SLOTS`` rows,
    whatever the number of verdicts, and every process on the database sees it. Each
    writing connection bumps the row ``pg_backend_pid() % CHANGE_SLOTS``, so concurrent
    scoring transactions rarely wait for one another's row lock.
    """

    __tablename__ = "leaderboard_changes"

    slot: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), default=0)
