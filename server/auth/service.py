"""API keys, token exchange and revocation against the database (keyword-only services)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.upsert import insert_ignore
from server.auth.keys import MAX_KEY_LENGTH, display_prefix, generate_api_key, hash_api_key
from server.auth.models import ApiKey, RevokedToken
from server.auth.permissions import Principal, Role
from server.auth.tokens import TokenClaims, TokenCodec
from server.errors import InvalidInput, NotFound, Unauthorized


async def create_api_key(
    session: AsyncSession, *, org_id: uuid.UUID, role: str
) -> tuple[ApiKey, str]:
    """A new key for ``org_id`` with ``role``; returns the row and the key (shown once)."""
    try:
        checked = Role(role)
    except ValueError:
        raise InvalidInput(
            f"role must be one of {', '.join(r.value for r in Role)}, got {role!r}"
        ) from None
    key = generate_api_key()
    row = ApiKey(
        org_id=org_id, role=checked.value, key_hash=hash_api_key(key), prefix=display_prefix(key)
    )
    session.add(row)
    await session.flush()
    return row, key


async def exchange_api_key(
    session: AsyncSession,
    *,
    codec: TokenCodec,
    api_key: str,
    session_id: uuid.UUID | None = None,
) -> tuple[str, TokenClaims]:
    """A fresh access token for a valid, unrevoked ``api_key`` (optionally scoped to one
    session); ``Unauthorized`` otherwise, without saying which part was wrong."""
    if len(api_key) > MAX_KEY_LENGTH:
        raise Unauthorized("invalid API key")
    row = (
        await session.execute(select(ApiKey).where(ApiKey.key_hash == hash_api_key(api_key)))
    ).scalar_one_or_none()
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid API key")
    return codec.issue(subject=str(row.id), org_id=row.org_id, role=row.role, session_id=session_id)


async def is_revoked(session: AsyncSession, *, claims: TokenClaims) -> bool:
    """Whether the token was revoked, or the API key it was issued for was revoked or no
    longer exists (one query)."""
    try:
        key_id = uuid.UUID(claims.sub)
    except ValueError:
        return True
    token_revoked = exists().where(RevokedToken.jti == claims.jti)
    key_live = exists().where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
    return bool(await session.scalar(select(or_(token_revoked, ~key_live))))


async def revoke_token(
    session: AsyncSession, *, jti: str, expires_at: datetime | None = None
) -> bool:
    """Refuse token ``jti`` from now on; returns False if it was revoked already."""
    until = expires_at or datetime.max.replace(tzinfo=UTC)
    inserted = await insert_ignore(
        session,
        RevokedToken,
        [{"jti": jti, "expires_at": until, "revoked_at": utcnow()}],
        returning="jti",
    )
    return bool(inserted)


async def revoke_api_key(session: AsyncSession, *, key_id: uuid.UUID) -> None:
    """Revoke key ``key_id`` and, with it, every token issued for it."""
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    if not result.rowcount and await session.get(ApiKey, key_id) is None:  # type: ignore[attr-defined]
        raise NotFound(f"no API key {key_id}")


async def refresh_token(
    session: AsyncSession, *, codec: TokenCodec, principal: Principal
) -> tuple[str, TokenClaims]:
    """A fresh token for the same key, organisation, role and session scope as
    ``principal``'s, which is revoked: a client renews its token before it expires without
    presenting its API key again, and only one of the two tokens stays usable."""
    token, claims = codec.issue(
        subject=principal.subject,
        org_id=principal.org_id,
        role=principal.role.value,
        session_id=principal.session_id,
    )
    await revoke_token(session, jti=principal.jti, expires_at=principal.expires_at)
    return token, claims


def principal_from(claims: TokenClaims) -> Principal:
    """The ``Principal`` verified ``claims`` stand for."""
    return Principal(
        subject=claims.sub,
        org_id=claims.org,
        role=Role(claims.role),
        jti=claims.jti,
        expires_at=datetime.fromtimestamp(claims.exp, UTC),
        session_id=claims.sid,
    )
