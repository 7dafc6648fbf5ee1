"""``GET /v1/audit/sessions/{session_id}/sample``: re-derive a session's sample (auditors
and admins)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from server.api.dependencies import AuditReader, DbSession, RuntimeDep
from server.database import read_only_snapshot
from server.sample_audit import service
from server.sample_audit.schemas import SampleAuditOut

router = APIRouter(tags=["audit"])


@router.get(
    "/v1/audit/sessions/{session_id}/sample",
    response_model=SampleAuditOut,
    operation_id="audit.sample",
)
async def audit_sample(
    session_id: uuid.UUID, db: DbSession, runtime: RuntimeDep, principal: AuditReader
) -> SampleAuditOut:
    """Draw the session's sample again from its seed on the bank and the organisation's
    exposure as of the instant it was drawn, with the live draw's code, and compare: the
    same items in drawn order (adaptive sessions: the same set), every delivered item among
    them. ``outcome`` is ``match``, ``mismatch`` (the first differing position) or
    ``not_rederivable`` (why). 404 for an unknown session."""
    # The request's transaction (authentication) ends before the long read, which runs in
    # a read-only snapshot: on SQLite it holds no write lock, so writers go on meanwhile.
    await db.commit()
    async with read_only_snapshot(runtime.engine) as snapshot:
        return await service.audit_session_sample(
            snapshot, principal=principal, session_id=session_id
        )
