"""``/v1/auth/token``, ``/v1/auth/refresh``, ``/v1/whoami`` and ``/v1/admin/tokens/revoke``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from server.api.dependencies import DbSession, RuntimeDep, SelfReader, TokensRevoker
from server.api.openapi import answers
from server.auth import service
from server.auth.schemas import RevokeRequest, RevokeResponse, TokenRequest, TokenResponse, WhoAmI
from server.auth.throttle import (
    client_address,
    exchange_limit,
    failure_limit,
    refusals_counted,
)
from server.errors import NotFound, TooManyRequests, Unauthorized

router = APIRouter(tags=["auth"])


@router.post("/v1/auth/token", response_model=TokenResponse, operation_id="auth.token")
@answers(Unauthorized, TooManyRequests)
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
        await service.require_scope_visible(db, claims=claims, session_id=body.session_id)
    return TokenResponse(access_token=token, expires_in=claims.exp - claims.iat)


@router.post("/v1/auth/refresh", response_model=TokenResponse, operation_id="auth.refresh")
async def refresh(db: DbSession, runtime: RuntimeDep, principal: SelfReader) -> TokenResponse:
    """Trade a valid token for a fresh one with the same scope. The old one is revoked, and
    with it the leases it held on sessions: the new token (or, if this response is lost, a
    token exchanged from the key again) drives on without "session in use"."""
    token, claims = await service.refresh_token(db, codec=runtime.codec, principal=principal)
    return TokenResponse(access_token=token, expires_in=claims.exp - claims.iat)


@router.get("/v1/whoami", response_model=WhoAmI, operation_id="auth.whoami")
async def whoami(principal: SelfReader) -> WhoAmI:
    """Who the bearer token stands for."""
    return WhoAmI.model_validate(principal, from_attributes=True)


@router.post("/v1/admin/tokens/revoke", response_model=RevokeResponse, operation_id="auth.revoke")
@answers(NotFound)
async def revoke(body: RevokeRequest, db: DbSession, _: TokensRevoker) -> RevokeResponse:
    """Revoke one token (``jti``) or an API key with every token issued for it (``key_id``)."""
    return RevokeResponse(revoked=await service.revoke(db, jti=body.jti, key_id=body.key_id))
