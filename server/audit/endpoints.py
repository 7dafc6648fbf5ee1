"""``GET /v1/admin/audit``: read the audit log (there is no route that changes it)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from server.api.dependencies import AuditReader, DbSession
from server.audit.schemas import AuditOut
from server.audit.service import AuditFilters
from server.audit.service import read_audit as read_audit_rows

router = APIRouter(tags=["audit"])


@router.get("/v1/admin/audit", response_model=list[AuditOut], operation_id="audit.log")
async def read_audit(
    db: DbSession,
    _: AuditReader,
    session_id: uuid.UUID | None = None,
    org_id: uuid.UUID | None = None,
    before_id: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditOut]:
    """Newest first; page with ``before_id``."""
    rows = await read_audit_rows(
        db,
        filters=AuditFilters(session_id=session_id, org_id=org_id),
        limit=limit,
        before_id=before_id,
    )
    return [AuditOut.model_validate(r) for r in rows]
