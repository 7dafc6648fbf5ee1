"""``/v1/models``: register and read evaluated models."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path

from server.api.dependencies import DbSession, ModelsReader, ModelsWriter
from server.api.openapi import answers
from server.errors import Conflict, NotFound
from server.registry import service
from server.registry.schemas import ModelCreate, ModelOut

router = APIRouter(tags=["models"])


@router.post("/v1/models", response_model=ModelOut, status_code=201, operation_id="models.register")
@answers(Conflict, NotFound)
async def register_model(body: ModelCreate, db: DbSession, principal: ModelsWriter) -> ModelOut:
    """Register a model (name, pinned API snapshot, family, size) of your organisation."""
    return ModelOut.model_validate(
        await service.register_model(db, principal=principal, model=body)
    )


@router.get("/v1/models", response_model=list[ModelOut], operation_id="models.list")
async def list_models(db: DbSession, principal: ModelsReader) -> list[ModelOut]:
    """Models you may see."""
    return [ModelOut.model_validate(m) for m in await service.list_models(db, principal=principal)]


@router.get("/v1/models/{model_id}", response_model=ModelOut, operation_id="models.get")
async def get_model(
    model_id: Annotated[uuid.UUID, Path()], db: DbSession, principal: ModelsReader
) -> ModelOut:
    """One model (404 if it is not yours to see)."""
    return ModelOut.model_validate(
        await service.get_model(db, principal=principal, model_id=model_id)
    )
