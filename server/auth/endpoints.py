"""``/v1/auth/token``, ``/v1/auth/refresh``, ``/v1/whoami`` and ``/v1/admin/tokens/revoke``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from sqlalchemy import select

from server.api.dependencies import DbSession, RuntimeDep, require
from server.auth import service
from server.auth.permissions import Permission, Principal
from server.auth.schemas import RevokeRequest, RevokeResponse, TokenRequest, TokenResponse, WhoAmI
from server.auth.throttle import (
    client_address,
    exchange_limit,
    failure_limit,
    refusals_counted,
)
from server.errors import InvalidInput, NotFound
from server.sessions.models import EvalSession

router = APIRouter(tags=["auth"])


@router.post("/v1/auth/token", response_model=TokenResponse)
async def issue_token(
    body: TokenRequest, request: Request, runtime: RuntimeDep, db: DbSession
) -> TokenResponse:
    """Exchange an API key for a short-lived bearer token (optionally scoped to a session)."""
    address = client_address(request)
    async with refusals_counted(runtime.limiter, failure_limit(runtime.settings, address)):
        await runtime.limiter.hit(exchange_limit(runtime.settings, address))
        token, claims = await service.exchange_api_key(
            db, codec=runtime.codec, api_key=body.api_key, session_id=body.session_id
        )
    if body.session_id is not None:
        owner = await db.scalar(select(EvalSession.org_id).where(EvalSession.id == body.session_id))
        every_org = service.principal_from(claims).can(Permission.ANY_ORG)
        if owner is None or (owner != claims.org and not every_org):
            raise NotFound(f"no session {body.session_id}")
    return TokenResponse(access_token=token, expires_in=claims.exp - claims.iat)


@router.post("/v1/auth/refresh", response_model=TokenResponse)
async def refresh(
    db: DbSession,
    runtime: RuntimeDep,
    principal: Annotated[Principal, require(Permission.SELF_READ)],
) -> TokenResponse:
    """Trade a valid token for a fresh one with the same scope. The old one is revoked, and
    with it the leases it held on sessions: the new token (or, if this response is lost, a
    token exchanged from the key again) drives on without "session in use"."""
    token, claims = await service.refresh_token(db, codec=runtime.codec, principal=principal)
    return TokenResponse(access_token=token, expires_in=claims.exp - claims.iat)


@router.get("/v1/whoami", response_model=WhoAmI)
async def whoami(principal: Annotated[Principal, require(Permission.SELF_READ)]) -> WhoAmI:
    """Who the bearer token stands for."""
    return WhoAmI(
        subject=principal.subject,
        org_id=principal.org_id,
        role=principal.role.value,
        session_id=principal.session_id,
    )


@router.post("/v1/admin/tokens/revoke", response_model=RevokeResponse)
async def revoke(
    body: RevokeRequest,
    db: DbSession,
    _: Annotated[Principal, require(Permission.TOKENS_REVOKE)],
) -> RevokeResponse:
    """Revoke one token (``jti``) or an API key with every token issued for it (``key_id``)."""
    if (body.jti is None) == (body.key_id is None):
        raise InvalidInput("give exactly one of jti and key_id")
    if body.jti is not None:
        return RevokeResponse(revoked=await service.revoke_token(db, jti=body.jti))
    assert body.key_id is not None
    await service.revoke_api_key(db, key_id=body.key_id)
    return RevokeResponse(revoked=True)
