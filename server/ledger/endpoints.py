"""``GET /v1/audit/checkpoints`` and ``GET /v1/audit/signing-key``: what an auditor keeps
to verify the chained logs later (``proctor audit verify``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from server.api.dependencies import AuditReader, DbSession, RuntimeDep
from server.api.openapi import answers
from server.errors import NotFound
from server.ledger.chain import Log
from server.ledger.models import ChainCheckpoint
from server.ledger.schemas import CheckpointOut, SigningKeyOut

router = APIRouter(tags=["audit"])


@router.get(
    "/v1/audit/checkpoints", response_model=list[CheckpointOut], operation_id="audit.checkpoints"
)
async def read_checkpoints(
    db: DbSession,
    _: AuditReader,
    log: Log | None = None,
    chain: Annotated[str | None, Query(min_length=1, max_length=40, pattern=r"^[\w.-]+$")] = None,
    after_id: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[CheckpointOut]:
    """Signed checkpoints, oldest first; page with ``after_id`` (the last id seen)."""
    statement = select(ChainCheckpoint).where(ChainCheckpoint.id > after_id)
    if log is not None:
        statement = statement.where(ChainCheckpoint.log == log.value)
    if chain is not None:
        statement = statement.where(ChainCheckpoint.chain == chain)
    rows = (await db.scalars(statement.order_by(ChainCheckpoint.id).limit(limit))).all()
    return [CheckpointOut.model_validate(row) for row in rows]


@router.get("/v1/audit/signing-key", response_model=SigningKeyOut, operation_id="audit.signing_key")
@answers(NotFound)
async def read_signing_key(runtime: RuntimeDep, _: AuditReader) -> SigningKeyOut:
    """The public key that verifies the checkpoints and session bundles (save it as a
    ``--public-key`` file). Auditors and admins only, like the checkpoints: every other
    role reaches only what its work needs."""
    key = runtime.audit.signing_key
    if key is None:
        raise NotFound("this server signs no checkpoints")
    return SigningKeyOut(key_id=key.public.key_id, public_key=key.public.raw_b64)
