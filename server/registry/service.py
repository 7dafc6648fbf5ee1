"""Registering and finding evaluated models."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.permissions import Permission, Principal
from server.errors import Conflict, Forbidden, NotFound
from server.orgs.service import get_org
from server.registry.models import RegisteredModel


async def register_model(
    db: AsyncSession,
    *,
    principal: Principal,
    name: str,
    api_snapshot: str,
    family: str | None,
    params_b: float | None,
    org_name: str | None = None,
    usd_per_mtok_in: float | None = None,
    usd_per_mtok_out: float | None = None,
) -> RegisteredModel:
    """Register a model of the caller's organisation (admins may name another ``org``);
    the prices (USD per million tokens) are optional and only feed the leaderboard's cost."""
    org_id = principal.org_id
    if org_name is not None:
        if not principal.can(Permission.ANY_ORG):
            raise Forbidden("only admins may register a model for another organisation")
        org_id = (await get_org(db, name=org_name)).id
    existing = await db.scalar(
        select(RegisteredModel.id).where(
            RegisteredModel.org_id == org_id,
            RegisteredModel.name == name,
            RegisteredModel.api_snapshot == api_snapshot,
        )
    )
    if existing is not None:
        raise Conflict(
            f"model {name!r} snapshot {api_snapshot!r} is registered already: {existing}"
        )
    model = RegisteredModel(
        org_id=org_id,
        name=name,
        api_snapshot=api_snapshot,
        family=family,
        params_b=params_b,
        usd_per_mtok_in=usd_per_mtok_in,
        usd_per_mtok_out=usd_per_mtok_out,
    )
    db.add(model)
    await db.flush()
    return model


async def get_model(
    db: AsyncSession, *, principal: Principal, model_id: uuid.UUID
) -> RegisteredModel:
    """The model if ``principal`` may see it, else ``NotFound``."""
    model = await db.get(RegisteredModel, model_id)
    if model is None or not principal.sees_org(model.org_id):
        raise NotFound(f"no model {model_id}")
    return model


async def list_models(db: AsyncSession, *, principal: Principal) -> list[RegisteredModel]:
    """Models visible to ``principal``, oldest first."""
    statement = select(RegisteredModel).order_by(RegisteredModel.created_at)
    if not principal.can(Permission.ANY_ORG):
        statement = statement.where(RegisteredModel.org_id == principal.org_id)
    return list((await db.execute(statement)).scalars().all())
