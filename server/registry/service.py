"""Registering and finding evaluated models."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.permissions import Permission, Principal
from server.errors import Conflict, Forbidden
from server.orgs.service import get_org, get_visible
from server.registry.models import RegisteredModel
from server.registry.schemas import ModelCreate


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


async def list_models(db: AsyncSession, *, principal: Principal) -> list[RegisteredModel]:
    """Models visible to ``principal``, oldest first."""
    statement = select(RegisteredModel).order_by(RegisteredModel.created_at)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(RegisteredModel.org_id == principal.org_id)
    return list((await db.execute(statement)).scalars().all())
