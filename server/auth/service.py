"""API keys, token exchange and revocation against the database (keyword-only services)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.upsert import insert_ignore
from server.auth.console_logins import close_logins_of_key
from server.auth.key_check import live_api_key
from server.auth.keys import display_prefix, generate_api_key, hash_api_key
from server.auth.models import ApiKey, RevokedToken
from server.auth.permissions import PLATFORM_ROLES, Principal, Role
from server.auth.revocation_cache import REVOCATIONS
from server.auth.tokens import TokenClaims, TokenCodec
from server.errors import InvalidInput, NotFound, Unauthorized
from server.observability import metrics
from server.orgs.models import Organisation
from server.orgs.service import find_operator_org
from server.sessions.service import get_session


async def create_api_key(
    session: AsyncSession, *, org_id: uuid.UUID, role: str
) -> tuple[ApiKey, str]:
    """A new key for ``org_id`` with ``role``; returns the row and the key (shown once).

    ``InvalidInput`` for an unknown role, or for a platform role (``PLATFORM_ROLES``: admin,
    auditor, which act on every organisation) when ``org_id`` is not the operator's
    organisation; the message names the operator organisation, or says how to create one.
    ``NotFound`` if a platform role is asked for an organisation that does not exist."""
    try:
        checked = Role(role)
    except ValueError:
        raise InvalidInput(
            f"role must be one of {', '.join(r.value for r in Role)}, got {role!r}"
        ) from None
    if checked in PLATFORM_ROLES:
        org = await session.get(Organisation, org_id)
        if org is None:
            raise NotFound(f"no organisation {org_id}")
        if not org.is_operator:
            operator = await find_operator_org(session)
            where = (
                f"the operator organisation is {operator.name!r}"
                if operator is not None
                else "no operator organisation exists yet (create it with: "
                "proctor admin create-org NAME --operator)"
            )
            raise InvalidInput(
                f"role {checked.value!r} is a platform role: it acts on every organisation, so "
                f"only keys of the operator organisation may have it; {org.name!r} is not the "
                f"operator ({where})"
            )
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
    session); ``Unauthorized`` otherwise, without saying which part was wrong.

    A key with a platform role (admin, auditor) whose organisation is not the operator's (a
    key made before that rule) is refused like a revoked one: same 401 and wording, so it
    counts as a failed exchange, and the server logs a warning naming the key's id and
    organisation so the operator can revoke it."""
    row = await live_api_key(session, api_key=api_key)
    return codec.issue(subject=str(row.id), org_id=row.org_id, role=row.role, session_id=session_id)


async def require_scope_visible(
    session: AsyncSession, *, claims: TokenClaims, session_id: uuid.UUID
) -> None:
    """``NotFound`` unless the key ``claims`` were issued for may see session
    ``session_id`` (its own organisation's, or any with ``Permission.ANY_ORG``): a token is
    scoped only to a session its key could read."""
    await get_session(session, principal=principal_from(claims), session_id=session_id)


async def revoke(session: AsyncSession, *, jti: str | None, key_id: uuid.UUID | None) -> bool:
    """Revoke token ``jti``, or API key ``key_id`` with every token issued for it (exactly
    one of the two, else ``InvalidInput``); False if the token was revoked already."""
    if (jti is None) == (key_id is None):
        raise InvalidInput("give exactly one of jti and key_id")
    if jti is not None:
        return await revoke_token(session, jti=jti)
    assert key_id is not None
    await revoke_api_key(session, key_id=key_id)
    return True


async def is_revoked(session: AsyncSession, *, claims: TokenClaims) -> bool:
    """Whether the token was revoked, or the API key it was issued for was revoked or no
    longer exists, or (for a platform role) its organisation is not the operator: a token
    issued before that rule must not live on through refreshes (one query)."""
    try:
        key_id = uuid.UUID(claims.sub)
    except ValueError:
        return True
    token_revoked = exists().where(RevokedToken.jti == claims.jti)
    key_live = exists().where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
    refused = [token_revoked, ~key_live]
    if claims.role in PLATFORM_ROLES:
        operator = exists().where(Organisation.id == claims.org, Organisation.is_operator)
        refused.append(~operator)
    return bool(await session.scalar(select(or_(*refused))))


async def is_revoked_recently_checked(session: AsyncSession, *, claims: TokenClaims) -> bool:
    """``is_revoked``, answered without the database for a token this process found live
    less than ``revocation_cache.LIVE_FOR_S`` seconds ago (5 s): a revocation made through
    this process counts at once, one made by another process within that bound (see
    ``server.auth.revocation_cache``). The memory is keyed by the whole claim set."""
    if REVOCATIONS.is_known_live(claims):
        return False
    generation = REVOCATIONS.generation
    if await is_revoked(session, claims=claims):
        return True
    REVOCATIONS.remember_live(claims, generation=generation)
    return False


def _forget_live_tokens(session: AsyncSession) -> None:
    """A revocation is being written: this process trusts no remembered token now and
    again once it commits (a request that read "live" meanwhile remembers nothing)."""
    REVOCATIONS.forget_all()
    metrics.on_commit(session, REVOCATIONS.forget_all)


async def revoke_token(
    session: AsyncSession, *, jti: str, expires_at: datetime | None = None
) -> bool:
    """Refuse token ``jti`` from now on; returns False if it was revoked already."""
    until = expires_at or datetime.max.replace(tzinfo=UTC)
    _forget_live_tokens(session)
    inserted = await insert_ignore(
        session,
        RevokedToken,
        [{"jti": jti, "expires_at": until, "revoked_at": utcnow()}],
        returning="jti",
    )
    return bool(inserted)


async def revoke_api_key(session: AsyncSession, *, key_id: uuid.UUID) -> None:
    """Revoke key ``key_id`` and, with it, every token issued for it."""
    _forget_live_tokens(session)
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    if not result.rowcount and await session.get(ApiKey, key_id) is None:  # type: ignore[attr-defined]
        raise NotFound(f"no API key {key_id}")
    await close_logins_of_key(session, key_id=key_id)


async def refresh_token(
    session: AsyncSession, *, codec: TokenCodec, principal: Principal
) -> tuple[str, TokenClaims]:
    """A fresh token for the same key, organisation, role and session scope as
    ``principal``'s, which is revoked: a client renews its token before it expires without
    presenting its API key again, and only one of the two tokens stays usable.

    Single use under any race: the revocation is an insert on the token id's primary key,
    so of concurrent refreshes of one token exactly one inserts it (the others wait for its
    commit on PostgreSQL, or for the write lock on SQLite, and find it there); they get
    ``Unauthorized`` and no token."""
    if not await revoke_token(session, jti=principal.jti, expires_at=principal.expires_at):
        raise Unauthorized("token revoked")
    return codec.issue(
        subject=principal.subject,
        org_id=principal.org_id,
        role=principal.role.value,
        session_id=principal.session_id,
    )


def principal_from(claims: TokenClaims) -> Principal:
    """The ``Principal`` verified ``claims`` stand for."""
    return Principal(
        subject=claims.sub,
        org_id=claims.org,
        role=claims.role,
        jti=claims.jti,
        expires_at=datetime.fromtimestamp(claims.exp, UTC),
        session_id=claims.sid,
    )


async def list_api_keys(session: AsyncSession, *, org_id: uuid.UUID) -> list[ApiKey]:
    """Organisation ``org_id``'s API keys, newest first (hashes and prefixes, never keys)."""
    result = await session.execute(
        select(ApiKey).where(ApiKey.org_id == org_id).order_by(ApiKey.created_at.desc())
    )
    return list(result.scalars())


async def key_counts(session: AsyncSession) -> dict[uuid.UUID, tuple[int, int]]:
    """Per organisation: (live keys, all keys), in one statement."""
    rows = await session.execute(
        select(
            ApiKey.org_id, func.count().filter(ApiKey.revoked_at.is_(None)), func.count()
        ).group_by(ApiKey.org_id)
    )
    return {org_id: (live, total) for org_id, live, total in rows.tuples()}
