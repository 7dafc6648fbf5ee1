"""``/v1/models/{model_id}/endpoint``: set, read, remove and check how the server calls a
model. Secret headers go in and never come out."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Response

from server.api.dependencies import DbSession, ModelsReader, ModelsWriter, RuntimeDep
from server.api.openapi import answers
from server.errors import NotFound
from server.model_endpoints import service
from server.model_endpoints.calls import check_endpoint
from server.model_endpoints.schemas import EndpointCheckOut, EndpointIn, EndpointOut
from server.model_endpoints.service import EndpointRecord

router = APIRouter(tags=["models"])
ModelId = Annotated[uuid.UUID, Path(description="The registered model's id.")]
ENDPOINT = "/v1/models/{model_id}/endpoint"


def endpoint_out(record: EndpointRecord) -> EndpointOut:
    """The response for ``record``: the endpoint, the model's prices, the secret headers'
    names."""
    from_model = {"usd_per_mtok_in", "usd_per_mtok_out"}
    fields = {
        name: getattr(record.model if name in from_model else record.endpoint, name)
        for name in EndpointOut.model_fields
        if name != "secret_headers"
    }
    return EndpointOut.model_validate({**fields, "secret_headers": record.secret_header_names})


@router.put(ENDPOINT, response_model=EndpointOut, operation_id="models.set_endpoint")
@answers(NotFound)
async def set_endpoint(
    model_id: ModelId, body: EndpointIn, db: DbSession, principal: ModelsWriter
) -> EndpointOut:
    """Set the model's endpoint (replacing the one it had). The secret headers are sealed
    and never returned; left out, the stored ones stay. Nothing is called here: where the
    URL may point is decided when the server connects (``.../endpoint/check``)."""
    record = await service.set_endpoint(db, principal=principal, model_id=model_id, endpoint=body)
    return endpoint_out(record)


@router.get(ENDPOINT, response_model=EndpointOut, operation_id="models.get_endpoint")
@answers(NotFound)
async def get_endpoint(model_id: ModelId, db: DbSession, principal: ModelsReader) -> EndpointOut:
    """The model's endpoint, with the names of its secret headers (404 if it has none)."""
    return endpoint_out(await service.get_endpoint(db, principal=principal, model_id=model_id))


@router.delete(ENDPOINT, status_code=204, operation_id="models.delete_endpoint")
@answers(NotFound)
async def delete_endpoint(model_id: ModelId, db: DbSession, principal: ModelsWriter) -> Response:
    """Remove the model's endpoint and its secrets."""
    await service.delete_endpoint(db, principal=principal, model_id=model_id)
    return Response(status_code=204)


@router.post(
    ENDPOINT + "/check", response_model=EndpointCheckOut, operation_id="models.check_endpoint"
)
@answers(NotFound)
async def check(
    model_id: ModelId, db: DbSession, principal: ModelsWriter, runtime: RuntimeDep
) -> EndpointCheckOut:
    """Call the endpoint once with a fixed prompt (nothing of the bank) and say whether it
    answered: the latency and the start of the reply, or the kind of failure (an address the
    server may not call, a refused key, a timeout...) with its message, secrets redacted."""
    record = await service.get_endpoint(db, principal=principal, model_id=model_id)
    return await check_endpoint(record, runtime.settings)
