"""The lease on a session: who drives it now, and whether it is still open.

Every function that changes a session first takes its row lock with one conditional
UPDATE that also takes the lease (``drive``): two requests on one session therefore run
one after the other, and a second client is refused while the lease is held by another
token.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, or_, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.models import RevokedToken
from server.auth.permissions import Permission, Principal
from server.errors import SessionClosed, SessionInUse
from server.orgs.service import get_visible
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.states import OPEN_STATE_VALUES


async def get_session(
    db: AsyncSession, *, principal: Principal, session_id: uuid.UUID
) -> EvalSession:
    """The session if ``principal`` may see it; otherwise ``NotFound`` (revealing nothing)."""
    return await get_visible(db, EvalSession, session_id, principal=principal, noun="session")


async def drive(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    limits: SessionLimits,
    now: datetime,
) -> EvalSession:
    """Lock session ``session_id`` and take (or renew) its lease for ``principal``'s token.

    One atomic conditional UPDATE: it succeeds only if nobody holds the lease, this token
    holds it, the holder has been idle longer than ``limits.lease_idle_s``, or the holder's
    token has been revoked."""
    conditions: list[Any] = [EvalSession.id == session_id]
    if not principal.can(Permission.ANY_ORG):
        conditions.append(EvalSession.org_id == principal.org_id)
    free = or_(
        EvalSession.lease_jti.is_(None),
        EvalSession.lease_jti == principal.jti,
        EvalSession.lease_expires_at < now,
        # a revoked token can no longer drive the session, so its lease holds nothing
        # (e.g. a client whose refresh response was lost, back with a token from its key)
        exists().where(RevokedToken.jti == EvalSession.lease_jti),
    )
    statement = (
        update(EvalSession)
        .where(and_(*conditions), free)
        .values(
            lease_jti=principal.jti, lease_expires_at=now + timedelta(seconds=limits.lease_idle_s)
        )
        .returning(EvalSession)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    record = (await db.execute(statement)).scalar_one_or_none()
    if record is not None:
        return record
    held = await get_session(db, principal=principal, session_id=session_id)
    wait = (held.lease_expires_at - now).total_seconds() if held.lease_expires_at else 0
    raise SessionInUse(
        f"session in use: another client is driving session {session_id}; "
        f"it becomes free after {max(1, int(wait) + 1)} s without activity"
    )


def is_open(state: str, deadline_at: datetime, now: datetime) -> bool:
    """Whether items may still be delivered and answered."""
    return state in OPEN_STATE_VALUES and deadline_at > now


def require_open(record: EvalSession, now: datetime) -> None:
    """``SessionClosed`` unless items may still be delivered and answered."""
    if record.state not in OPEN_STATE_VALUES:
        raise SessionClosed(f"session {record.id} is {record.state}")
    if record.deadline_at <= now:
        raise SessionClosed(f"session {record.id} passed its deadline and is expiring")
