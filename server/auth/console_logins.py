"""Console logins: the server-side sessions behind the admin console's cookie.

``open_login`` exchanges an API key (the same check as ``POST /v1/auth/token``) for a
login row and a cookie secret; ``resolve_login`` turns a cookie secret back into the
principal at every request, refusing it once the key is revoked, the login idle past
``console_idle_s`` or older than ``console_max_age_s``; ``close_login`` is logout. Only the
SHA-256 of the secret is stored, so a database dump opens no browser session.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.key_check import live_api_key
from server.auth.models import ApiKey, ConsoleLogin
from server.auth.permissions import Principal, Role
from server.errors import Forbidden, Unauthorized

CONSOLE_ROLES: frozenset[Role] = frozenset(
    {Role.ADMIN, Role.AUDITOR, Role.EVALUATOR, Role.REVIEWER}
)
"""Roles that may log in to the console; vendors use the API and SDK only."""
TOUCH_EVERY = timedelta(seconds=30)
"""``last_seen_at`` is written at most this often per login (idle expiry is that coarse)."""
SECRET_BYTES = 32


class LoginEnded(Unauthorized):
    """A console login that existed but has ended (idle, too old, or its key revoked)."""

    def __init__(self, login: str) -> None:
        super().__init__("your console login has ended; log in again")
        self.login = login


@dataclass(frozen=True, slots=True)
class LoginLimits:
    idle: timedelta
    max_age: timedelta


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """Who a console request comes from: the key's principal and the login's CSRF token."""

    principal: Principal
    login_id: str
    csrf_token: str
    key_prefix: str


def login_id(secret: str) -> str:
    """The stored id of cookie secret ``secret`` (its SHA-256)."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


async def open_login(db: AsyncSession, *, api_key: str, now: datetime) -> str:
    """A new login for ``api_key``; returns the cookie secret (shown to the browser only).

    ``Unauthorized`` for a key that is unknown, revoked, too long or a platform-role key
    outside the operator organisation (one wording for all, as the API says it);
    ``Forbidden`` for a vendor key, which works with the API only."""
    key = await live_api_key(db, api_key=api_key)
    if Role(key.role) not in CONSOLE_ROLES:
        raise Forbidden("vendor keys cannot log in to the console; use the API or the SDK")
    secret = secrets.token_urlsafe(SECRET_BYTES)
    db.add(
        ConsoleLogin(
            id=login_id(secret),
            key_id=key.id,
            csrf_token=secrets.token_urlsafe(SECRET_BYTES),
            created_at=now,
            last_seen_at=now,
        )
    )
    await db.flush()
    return secret


async def resolve_login(
    db: AsyncSession, *, secret: str, now: datetime, limits: LoginLimits, touch: bool = True
) -> ConsoleUser:
    """The user of cookie secret ``secret``; ``Unauthorized`` if there is no such login;
    ``LoginEnded`` if it is idle past ``limits.idle``, older than ``limits.max_age`` or its
    key was revoked (``delete_ended_logins``, run by the server's sweeper, removes such
    rows). Refreshes ``last_seen_at`` (at most every ``TOUCH_EVERY``) unless ``touch`` is
    false (a live page's stream checks the login without keeping it alive)."""
    if not secret or len(secret) > 2 * SECRET_BYTES:
        raise Unauthorized("not logged in")
    found = (
        await db.execute(
            select(ConsoleLogin, ApiKey)
            .join(ApiKey, ApiKey.id == ConsoleLogin.key_id)
            .where(ConsoleLogin.id == login_id(secret))
        )
    ).one_or_none()
    if found is None:
        raise Unauthorized("not logged in")
    login, key = found
    expired = now - login.last_seen_at > limits.idle or now - login.created_at > limits.max_age
    if expired or key.revoked_at is not None:
        raise LoginEnded(login.id)
    if touch and now - login.last_seen_at > TOUCH_EVERY:
        await db.execute(
            update(ConsoleLogin).where(ConsoleLogin.id == login.id).values(last_seen_at=now)
        )
    principal = Principal(
        subject=str(key.id),
        org_id=key.org_id,
        role=Role(key.role),
        jti=f"console:{login.id[:16]}",
        expires_at=login.created_at + limits.max_age,
    )
    return ConsoleUser(
        principal=principal, login_id=login.id, csrf_token=login.csrf_token, key_prefix=key.prefix
    )


async def close_login(db: AsyncSession, *, login: str) -> None:
    """Log out: delete login ``login`` (its id, not its secret)."""
    await db.execute(delete(ConsoleLogin).where(ConsoleLogin.id == login))


async def close_logins_of_key(db: AsyncSession, *, key_id: uuid.UUID) -> None:
    """End every console login of key ``key_id`` (when it is revoked)."""
    await db.execute(delete(ConsoleLogin).where(ConsoleLogin.key_id == key_id))


async def delete_ended_logins(db: AsyncSession, *, now: datetime, limits: LoginLimits) -> int:
    """Delete the logins that ``resolve_login`` would refuse for their age or idleness
    (housekeeping: they are refused either way); returns how many."""
    result = await db.execute(
        delete(ConsoleLogin).where(
            (ConsoleLogin.last_seen_at < now - limits.idle)
            | (ConsoleLogin.created_at < now - limits.max_age)
        )
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
