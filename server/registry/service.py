"""Registering and finding evaluated models."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.permissions import Permission, Principal
from server.errors import Conflict, Forbidden
from server.orgs.service import get_org, get_visible
from server.registry.models import RegisteredModel
from server.registry.schemas import ModelCreate
from server.sessions.models import EvalSession
from server.sessions.states import OPEN_STATE_VALUES, SCORED_STATE_VALUES


async def register_model(
    db: AsyncSession, *, principal: Principal, model: ModelCreate
) -> RegisteredModel:
    """Register ``model`` for the caller's organisation (with ``Permission.ANY_ORG``, for
    the organisation ``model.org`` names); the prices (USD per million tokens) are optional
    and only feed the leaderboard's cost. ``Conflict`` if the name and snapshot are taken."""
    org_id = principal.org_id
    if model.org is not None:
        if not principal.can(Permission.ANY_ORG):
            raise Forbidden("only admins may register a model for another organisation")
        org_id = (await get_org(db, name=model.org)).id
    existing = await db.scalar(
        select(RegisteredModel.id).where(
            RegisteredModel.org_id == org_id,
            RegisteredModel.name == model.name,
            RegisteredModel.api_snapshot == model.api_snapshot,
        )
    )
    if existing is not None:
        raise Conflict(
            f"model {model.name!r} snapshot {model.api_snapshot!r} is registered already: "
            f"{existing}"
        )
    row = RegisteredModel(org_id=org_id, **model.model_dump(exclude={"org"}))
    db.add(row)
    await db.flush()
    return row


async def get_model(
    db: AsyncSession, *, principal: Principal, model_id: uuid.UUID
) -> RegisteredModel:
    """The model if ``principal`` may see it, else ``NotFound``."""
    return await get_visible(db, RegisteredModel, model_id, principal=principal, noun="model")


async def list_models(
    db: AsyncSession, *, principal: Principal, limit: int | None = None, offset: int = 0
) -> list[RegisteredModel]:
    """Models visible to ``principal``, oldest first (``limit`` of them from ``offset``;
    no limit: all)."""
    statement = select(RegisteredModel).order_by(RegisteredModel.created_at, RegisteredModel.id)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(RegisteredModel.org_id == principal.org_id)
    if limit is not None:
        statement = statement.limit(limit).offset(offset)
    return list((await db.execute(statement)).scalars().all())


@dataclass(frozen=True, slots=True)
class SessionCounts:
    """How many sessions of one model ``principal`` may see: all of them, the scored ones
    (``scored`` or ``reviewed``) and the open ones; when the newest began."""

    total: int
    scored: int
    open: int
    latest_at: datetime | None


async def model_session_counts(
    db: AsyncSession, *, principal: Principal, model_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, SessionCounts]:
    """``SessionCounts`` per model of ``model_ids`` (one grouped statement; a model
    without visible sessions is absent)."""
    if not model_ids:
        return {}
    statement = (
        select(
            EvalSession.model_id, EvalSession.state, func.count(), func.max(EvalSession.created_at)
        )
        .where(EvalSession.model_id.in_(model_ids))
        .group_by(EvalSession.model_id, EvalSession.state)
    )
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    totals: dict[uuid.UUID, list[int]] = {}
    latest: dict[uuid.UUID, datetime] = {}
    for model_id, state, count, newest in (await db.execute(statement)).tuples():
        figures = totals.setdefault(model_id, [0, 0, 0])
        figures[0] += count
        figures[1] += count if state in SCORED_STATE_VALUES else 0
        figures[2] += count if state in OPEN_STATE_VALUES else 0
        if newest is not None and (model_id not in latest or newest > latest[model_id]):
            latest[model_id] = newest
    return {
        model_id: SessionCounts(total, scored, open_, latest.get(model_id))
        for model_id, (total, scored, open_) in totals.items()
    }


async def model_sessions(
    db: AsyncSession, *, principal: Principal, model_id: uuid.UUID, limit: int, offset: int = 0
) -> list[EvalSession]:
    """Sessions of model ``model_id`` that ``principal`` may see, newest first (``limit``
    of them from ``offset``); ``NotFound`` if the model may not be seen."""
    await get_model(db, principal=principal, model_id=model_id)
    statement = (
        select(EvalSession)
        .where(EvalSession.model_id == model_id)
        .order_by(EvalSession.created_at.desc(), EvalSession.id.desc())
        .limit(limit)
        .offset(offset)
    )
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(EvalSession.org_id == principal.org_id)
    return list((await db.execute(statement)).scalars().all())
