"""``GET /v1/admin/audit``: read the audit log (there is no route that changes it)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from server.api.dependencies import AuditReader, DbSession
from server.audit.models import AuditEntry
from server.audit.schemas import AuditOut

router = APIRouter(tags=["audit"])


@router.get("/v1/admin/audit", response_model=list[AuditOut])
async def read_audit(
    db: DbSession,
    _: AuditReader,
    session_id: uuid.UUID | None = None,
    org_id: uuid.UUID | None = None,
    before_id: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditOut]:
    """Newest first; page with ``before_id``."""
    statement = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if session_id is not None:
        statement = statement.where(AuditEntry.session_id == session_id)
    if org_id is not None:
        statement = statement.where(AuditEntry.org_id == org_id)
    if before_id is not None:
        statement = statement.where(AuditEntry.id < before_id)
    return [AuditOut.model_validate(r) for r in (await db.execute(statement)).scalars()]
