"""``/v1/models``: register and read evaluated models."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path

from server.api.dependencies import DbSession, require
from server.auth.permissions import Permission, Principal
from server.registry import service
from server.registry.schemas import ModelCreate, ModelOut

router = APIRouter(tags=["models"])


@router.post("/v1/models", response_model=ModelOut, status_code=201)
async def register_model(
    body: ModelCreate,
    db: DbSession,
    principal: Annotated[Principal, require(Permission.MODELS_WRITE)],
) -> ModelOut:
    """Register a model (name, pinned API snapshot, family, size) of your organisation."""
    model = await service.register_model(
        db,
        principal=principal,
        name=body.name,
        api_snapshot=body.api_snapshot,
        family=body.family,
        params_b=body.params_b,
        org_name=body.org,
        usd_per_mtok_in=body.usd_per_mtok_in,
        usd_per_mtok_out=body.usd_per_mtok_out,
    )
    return ModelOut.model_validate(model)


@router.get("/v1/models", response_model=list[ModelOut])
async def list_models(
    db: DbSession, principal: Annotated[Principal, require(Permission.MODELS_READ)]
) -> list[ModelOut]:
    """Models you may see."""
    return [ModelOut.model_validate(m) for m in await service.list_models(db, principal=principal)]


@router.get("/v1/models/{model_id}", response_model=ModelOut)
async def get_model(
    model_id: Annotated[uuid.UUID, Path()],
    db: DbSession,
    principal: Annotated[Principal, require(Permission.MODELS_READ)],
) -> ModelOut:
    """One model (404 if it is not yours to see)."""
    return ModelOut.model_validate(
        await service.get_model(db, principal=principal, model_id=model_id)
    )
