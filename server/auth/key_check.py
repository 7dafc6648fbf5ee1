"""Checking a presented API key: the one rule behind token exchange and console login."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.keys import MAX_KEY_LENGTH, hash_api_key
from server.auth.models import ApiKey
from server.auth.permissions import PLATFORM_ROLES
from server.errors import Unauthorized
from server.orgs.models import Organisation

log = logging.getLogger(__name__)


async def live_api_key(session: AsyncSession, *, api_key: str) -> ApiKey:
    """The stored key ``api_key`` is, if it may be used; ``Unauthorized`` otherwise,
    without saying which part was wrong (unknown, revoked, too long).

    A key with a platform role (admin, auditor, reviewer) whose organisation is not the
    operator's (a key made before that rule) is refused like a revoked one: same 401 and
    wording, and a warning names the key's id and organisation so the operator can revoke
    it."""
    if len(api_key) > MAX_KEY_LENGTH:
        raise Unauthorized("invalid API key")
    found = (
        await session.execute(
            select(ApiKey, Organisation.is_operator)
            .join(Organisation, Organisation.id == ApiKey.org_id)
            .where(ApiKey.key_hash == hash_api_key(api_key))
        )
    ).one_or_none()
    if found is None:
        raise Unauthorized("invalid API key")
    key: ApiKey = found[0]
    is_operator: bool = found[1]
    if key.revoked_at is not None:
        raise Unauthorized("invalid API key")
    if key.role in PLATFORM_ROLES and not is_operator:
        log.warning(
            "refused API key %s (%s, role %s): its organisation %s is not the operator; "
            "platform roles belong to the operator organisation only, revoke this key",
            key.id,
            key.prefix,
            key.role,
            key.org_id,
        )
        raise Unauthorized("invalid API key")
    return key
