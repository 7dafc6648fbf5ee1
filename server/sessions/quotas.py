"""An organisation's session quotas: open sessions at once and sessions per period."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from server.errors import QuotaExhausted, TooManyRequests
from server.orgs.models import Organisation
from server.sessions.limits import SessionLimits
from server.sessions.models import EvalSession
from server.sessions.states import OPEN_STATE_VALUES


async def org_limits(
    db: AsyncSession, *, org_id: uuid.UUID, limits: SessionLimits
) -> SessionLimits:
    """``limits`` with organisation ``org_id``'s own session quotas where it has them."""
    org = await db.get(Organisation, org_id)
    if org is None:
        return limits
    return replace(
        limits,
        max_concurrent=org.max_concurrent_sessions or limits.max_concurrent,
        max_per_period=org.max_sessions_per_period or limits.max_per_period,
    )


async def check_org_quotas(
    db: AsyncSession, *, org_id: uuid.UUID, limits: SessionLimits, now: datetime
) -> None:
    """409 past the organisation's open-session quota, 429 past its sessions per period:
    its own quotas (``Organisation.max_*``, set in the console) where set, else ``limits``."""
    limits = await org_limits(db, org_id=org_id, limits=limits)
    n_open = await db.scalar(
        select(func.count()).where(
            EvalSession.org_id == org_id, EvalSession.state.in_(OPEN_STATE_VALUES)
        )
    )
    if (n_open or 0) >= limits.max_concurrent:
        raise QuotaExhausted(
            f"quota exhausted: the organisation has {n_open} open sessions "
            f"(at most {limits.max_concurrent}); finish or abort one first"
        )
    since = now - timedelta(seconds=limits.period_s)
    recent = (
        await db.execute(
            select(func.count(), func.min(EvalSession.created_at)).where(
                EvalSession.org_id == org_id, EvalSession.created_at > since
            )
        )
    ).one()
    if recent[0] >= limits.max_per_period:
        retry = (recent[1] + timedelta(seconds=limits.period_s) - now).total_seconds()
        raise TooManyRequests(
            f"quota exhausted: {recent[0]} sessions in the last {limits.period_s} s "
            f"(at most {limits.max_per_period})",
            retry_after=int(retry) + 1,
        )
