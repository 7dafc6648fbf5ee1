"""Request dependencies: the unit of work, the authenticated principal, permissions.

Use the ``Annotated`` aliases in routes: ``db: DbSession``, ``runtime: RuntimeDep`` and, for
the authenticated principal holding a permission, the alias named after what it may do
(``principal: SessionsReader``); ``require(Permission.X)`` builds one for a new permission.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from server.api.runtime import Runtime
from server.auth.permissions import Permission, Principal
from server.auth.service import is_revoked_recently_checked, principal_from
from server.auth.throttle import (
    client_address,
    failure_limit,
    refusals_counted,
    request_limits,
)
from server.auth.tokens import InvalidToken
from server.errors import Forbidden, Unauthorized


async def get_runtime(request: Request) -> Runtime:
    # async: FastAPI would run a plain function in its thread pool, a thread hand-off
    # per request
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_db(runtime: RuntimeDep) -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed when the route returns, rolled back if it
    raises. Scoped to the route function, so the commit happens before the response is
    sent: an acknowledged write is a committed write."""
    async with runtime.sessions() as session, session.begin():
        yield session


DbSession = Annotated[AsyncSession, Depends(get_db, scope="function")]

SessionId = Annotated[uuid.UUID, Path(description="Session id (a UUID).")]
"""The ``{session_id}`` of a route's path (a session-scoped token may touch only its own)."""


SELF_ROUTES = frozenset({"/v1/whoami", "/v1/auth/refresh"})
"""Routes about the token itself, which a session-scoped token may call too."""


BEARER = HTTPBearer(
    auto_error=False,  # a missing token is our own 401 problem, not FastAPI's 403
    description="An access token from `POST /v1/auth/token` (exchange an API key).",
)
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]


async def authenticate(
    request: Request, runtime: RuntimeDep, db: DbSession, credentials: BearerCredentials
) -> Principal:
    """The principal of the request's bearer token: 429 (before anything is verified) if
    the client address has had too many refused authentications; 401 if the token is
    missing, invalid, expired or revoked (counted against the address); 429 past the API
    key's or the organisation's rate limit; 403 if the token is scoped to another session
    (except on ``SELF_ROUTES``)."""
    failures = failure_limit(runtime.settings, client_address(request))
    async with refusals_counted(runtime.limiter, failures):
        principal = await _verified_principal(credentials, runtime, db)
    request.state.principal = principal
    await runtime.limiter.hit(*request_limits(runtime.settings, principal))
    route = request.scope.get("route")
    if principal.session_id is not None and getattr(route, "path", None) not in SELF_ROUTES:
        path_session = request.path_params.get("session_id")
        if path_session != str(principal.session_id):
            raise Forbidden("this token is scoped to another session")
    return principal


async def _verified_principal(
    credentials: HTTPAuthorizationCredentials | None, runtime: Runtime, db: AsyncSession
) -> Principal:
    """The principal of a valid, unrevoked bearer token; ``Unauthorized`` otherwise."""
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise Unauthorized("a bearer token is required (POST /v1/auth/token)")
    try:
        claims = runtime.codec.verify(token)
    except InvalidToken:
        raise Unauthorized("invalid or expired token") from None
    if await is_revoked_recently_checked(db, claims=claims):
        raise Unauthorized("token revoked")
    return principal_from(claims)


def require(
    permission: Permission,
) -> Any:
    """A dependency giving the authenticated principal if its role has ``permission``."""

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not principal.can(permission):
            raise Forbidden(f"role {principal.role.value} may not do this ({permission.value})")
        return principal

    check.__name__ = f"require_{permission.name.lower()}"
    return Depends(check)


SelfReader = Annotated[Principal, require(Permission.SELF_READ)]
TokensRevoker = Annotated[Principal, require(Permission.TOKENS_REVOKE)]
ModelsReader = Annotated[Principal, require(Permission.MODELS_READ)]
ModelsWriter = Annotated[Principal, require(Permission.MODELS_WRITE)]
SessionsReader = Annotated[Principal, require(Permission.SESSIONS_READ)]
SessionsCreator = Annotated[Principal, require(Permission.SESSIONS_CREATE)]
SessionsDriver = Annotated[Principal, require(Permission.SESSIONS_DRIVE)]
SessionsAborter = Annotated[Principal, require(Permission.SESSIONS_ABORT)]
OwnSessionsAborter = Annotated[Principal, require(Permission.SESSIONS_ABORT_OWN)]
AllSessionsLister = Annotated[Principal, require(Permission.SESSIONS_LIST_ALL)]
LeaderboardReader = Annotated[Principal, require(Permission.LEADERBOARD_READ)]
AnchorDesignator = Annotated[Principal, require(Permission.LEADERBOARD_ANCHOR)]
AuditReader = Annotated[Principal, require(Permission.AUDIT_READ)]
BankHealthReader = Annotated[Principal, require(Permission.BANK_HEALTH_READ)]
BankReviewer = Annotated[Principal, require(Permission.BANK_REVIEW)]
JudgeManager = Annotated[Principal, require(Permission.JUDGE_MANAGE)]
AnswerReviewer = Annotated[Principal, require(Permission.REVIEW_ANSWERS)]
JudgeReader = Annotated[Principal, require(Permission.JUDGE_READ)]
