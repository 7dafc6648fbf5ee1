"""``GET /v1/audit/sessions/{session_id}/bundle``: a session's signed record, for auditors
and admins (``server.bundles.format``; check it offline with ``proctor audit check``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from server.api.dependencies import AuditReader, DbSession, RuntimeDep, SessionId
from server.api.runtime import Runtime
from server.bundles import format as fmt
from server.bundles.service import bundle_source, session_bundle
from server.database import read_only_snapshot
from server.ledger.signing import SigningKey, load_signing_key

router = APIRouter(tags=["audit"])

CHUNK_BYTES = 64 * 1024
"""Lines are sent in chunks of about this size (one write per line would be slow)."""
EXAMPLE = (
    '{"created_at":"2026-11-24T10:00:00.000000Z","type":"header",...}\n'
    '{"item_id":"...","position":0,"question":"...","type":"item",...}\n'
    '{"key_id":"...","sha256":"...","signature":"...","type":"signature"}\n'
)


@router.get(
    "/v1/audit/sessions/{session_id}/bundle",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The bundle: JSON Lines (one canonical JSON object per line: "
            "header, items, answers, verdicts, commitment, signature), as an attachment "
            "named session-<id>.jsonl. Never holds reference answers or explanations.",
            "content": {fmt.MEDIA_TYPE: {"schema": {"type": "string"}, "example": EXAMPLE}},
        },
        404: {"description": "No such session."},
    },
    operation_id="audit.bundle",
)
async def session_bundle_route(
    session_id: SessionId, db: DbSession, runtime: RuntimeDep, _: AuditReader
) -> StreamingResponse:
    """Session ``session_id``'s record as a signed bundle, streamed: the delivered items
    (without reference answers or explanations), the answers, the verdicts (judges' and
    human reviewers', without the judges' replies), the sample commitment (opened once the
    session is scored) and an Ed25519 signature over all of it by the server's audit key.
    Check it offline with ``proctor audit check FILE --public-key KEY``."""
    await bundle_source(db, session_id)  # 404 before the response starts
    # The key the server loaded at start-up (a bad key refuses to start, never a 500 here).
    key = runtime.audit.signing_key or load_signing_key(runtime.settings)
    return StreamingResponse(
        _chunks(runtime, session_id, key),
        media_type=fmt.MEDIA_TYPE,
        headers={
            "content-disposition": f'attachment; filename="session-{session_id}.jsonl"',
            "x-accel-buffering": "no",
        },
    )


async def _chunks(runtime: Runtime, session_id: uuid.UUID, key: SigningKey) -> AsyncIterator[bytes]:
    """The bundle's lines, joined into chunks, read in one snapshot of the database that
    holds no write lock (``read_only_snapshot``): writers go on while it streams."""
    buffer: list[bytes] = []
    size = 0
    async with read_only_snapshot(runtime.engine) as db:
        async for line in session_bundle(db, session_id, key=key, now=datetime.now(UTC)):
            buffer.append(line)
            size += len(line)
            if size >= CHUNK_BYTES:
                yield b"".join(buffer)
                buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)
