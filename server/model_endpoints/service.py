"""Setting, reading and removing a model's endpoint (keyword-only services; the routes,
the console and ``proctor endpoints`` go through these).

Who may: whoever may write models (vendors and evaluators for their organisation's
models, admins for any) sets and removes; whoever may see the model reads it. A model of
another organisation is ``NotFound``, as everywhere.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from server.auth.permissions import Principal
from server.errors import NotFound
from server.model_endpoints.models import ModelEndpoint
from server.model_endpoints.schemas import EndpointIn
from server.registry.models import RegisteredModel
from server.registry.service import get_model

_PRICE_FIELDS = ("usd_per_mtok_in", "usd_per_mtok_out")
_SECRET = "secret_headers"


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    """A model's endpoint with its model (which holds the prices)."""

    endpoint: ModelEndpoint
    model: RegisteredModel

    @property
    def secret_header_names(self) -> list[str]:
        return sorted(secret_headers(self.endpoint))


def secret_headers(endpoint: ModelEndpoint) -> dict[str, str]:
    """The endpoint's secret headers, opened (for the call only: never for a response)."""
    return dict(json.loads(endpoint.secret_headers)) if endpoint.secret_headers else {}


async def set_endpoint(
    db: AsyncSession, *, principal: Principal, model_id: uuid.UUID, endpoint: EndpointIn
) -> EndpointRecord:
    """Set model ``model_id``'s endpoint to ``endpoint`` (replacing one it had; its
    secret headers stay unless ``endpoint.secret_headers`` is given) and the model's
    prices that ``endpoint`` names."""
    model = await get_model(db, principal=principal, model_id=model_id)
    row = await db.get(ModelEndpoint, model_id)
    if row is None:
        row = ModelEndpoint(model_id=model_id)
        db.add(row)
    fields = endpoint.model_dump(exclude={_SECRET, *_PRICE_FIELDS})
    for name, value in fields.items():
        setattr(row, name, value)
    if endpoint.secret_headers is not None:
        given = endpoint.secret_headers
        row.secret_headers = json.dumps(given) if given else None
    for name in _PRICE_FIELDS:
        if (price := getattr(endpoint, name)) is not None:
            setattr(model, name, price)
    row.updated_by = principal.subject
    row.updated_at = utcnow()
    await db.flush()
    return EndpointRecord(row, model)


async def get_endpoint(
    db: AsyncSession, *, principal: Principal, model_id: uuid.UUID
) -> EndpointRecord:
    """Model ``model_id``'s endpoint; ``NotFound`` if the model may not be seen or has
    none."""
    model = await get_model(db, principal=principal, model_id=model_id)
    row = await db.get(ModelEndpoint, model_id)
    if row is None:
        raise NotFound(f"model {model_id} has no endpoint")
    return EndpointRecord(row, model)


async def delete_endpoint(db: AsyncSession, *, principal: Principal, model_id: uuid.UUID) -> None:
    """Remove model ``model_id``'s endpoint and its secrets; ``NotFound`` as
    ``get_endpoint``."""
    record = await get_endpoint(db, principal=principal, model_id=model_id)
    await db.delete(record.endpoint)
    await db.flush()
