"""What the running API holds: engine, Redis or its stand-in, keys, limits, audit writer.

Built in the application's lifespan (``server.app``) and reached by dependencies through
``request.app.state.runtime``.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bank import sealing
from server.audit.refusals import RefusalFolder
from server.audit.writer import AuditWriter
from server.auth.tokens import (
    HMAC_ALGORITHMS,
    KeyConfigurationError,
    SigningKeys,
    TokenCodec,
    TokenPolicy,
)
from server.bank_keys import install_keyring
from server.config import Settings
from server.database import create_engine, session_factory
from server.key_files import create_owner_only
from server.ledger.signing import load_signing_key, shared_key_warning
from server.ratelimit import Counters, MemoryCounters, RateLimiter, RedisCounters
from server.scoring.assignment import JudgeAssignment
from server.scoring.wakeup import NoWaker, Waker
from server.sessions.limits import SessionLimits

log = logging.getLogger(__name__)
SECRET_FILE = "jwt-secret"


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    codec: TokenCodec
    limiter: RateLimiter
    """Every rate limit (``server.auth.throttle`` says which a request counts against)."""
    limits: SessionLimits
    audit: AuditWriter
    refusals: RefusalFolder
    """Folds repeated unauthenticated refusals into one audit row per window."""
    redis: Redis | None
    judging: JudgeAssignment = field(default_factory=JudgeAssignment)
    """The judges new answers are queued for (refreshed by the sweeper)."""
    waker: Waker = field(default_factory=NoWaker)
    """Wakes the scoring workers after answers (set up in the lifespan)."""
    run_waker: Waker = field(default_factory=NoWaker)
    """Wakes the run workers after a run is queued (set up in the lifespan)."""
    keyring_replaced: sealing.Installed | None = None
    """The process's keyring before this runtime installed its own (put back on close)."""

    @property
    def default_judge(self) -> str:
        return self.judging.default

    async def close(self) -> None:
        for row in self.refusals.flush():
            await self.audit.write(row)
        await self.audit.stop()
        if self.audit.engine is not self.engine:
            await self.audit.engine.dispose()
        if self.redis is not None:
            await self.redis.aclose()
        await self.engine.dispose()
        if self.keyring_replaced is not None:
            sealing.restore(self.keyring_replaced)


def signing_keys(settings: Settings) -> SigningKeys:
    """The configured keys; refuses to go on with anything unsafe (``KeyConfigurationError``)."""
    algorithm = settings.jwt_algorithm
    if algorithm not in HMAC_ALGORITHMS:
        if settings.jwt_private_key_file is None or settings.jwt_public_key_file is None:
            raise KeyConfigurationError(
                f"PROCTOR_JWT_ALGORITHM={algorithm} needs PROCTOR_JWT_PRIVATE_KEY_FILE and "
                "PROCTOR_JWT_PUBLIC_KEY_FILE"
            )
        return SigningKeys.asymmetric(
            algorithm, settings.jwt_private_key_file, settings.jwt_public_key_file
        )
    if settings.jwt_secret is not None:
        return SigningKeys.hmac(settings.jwt_secret.get_secret_value())
    if not settings.is_embedded:
        raise KeyConfigurationError("PROCTOR_JWT_SECRET is not set (required with PostgreSQL)")
    return SigningKeys.hmac(_embedded_secret(settings.data_dir))


def _embedded_secret(data_dir: Path) -> str:
    """The embedded default's secret: random, created once, readable by the owner only."""
    path = data_dir / SECRET_FILE
    if create_owner_only(path, lambda: secrets.token_urlsafe(48)):
        log.info("generated a JWT secret in %s", path)
    return path.read_text().strip()


def shared_counters(settings: Settings) -> tuple[Redis | None, Counters]:
    """The Redis client of ``settings`` (None without one) and the counters on it (in
    process without Redis): the API's rate limits, the run workers' pacing."""
    if not settings.redis_url:
        return None, MemoryCounters()
    redis = Redis.from_url(
        settings.redis_url,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
    )
    return redis, RedisCounters(redis)


def token_codec(settings: Settings) -> TokenCodec:
    """The codec of the configured keys and token policy (the API's, a run worker's)."""
    return TokenCodec(
        signing_keys(settings),
        TokenPolicy(
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            ttl_s=settings.token_ttl_s,
            max_age_s=settings.token_max_age_s,
            leeway_s=settings.token_leeway_s,
        ),
    )


def build_runtime(settings: Settings) -> Runtime:
    """Everything the API needs, from ``settings`` (no I/O beyond reading key files).
    Installs the keyring sealing the bank (``server.bank_keys``) for the process, or
    raises ``BankKeyError`` saying what is missing; ``SigningKeyError`` if the audit
    signing key is configured but unusable (``server.ledger.signing``)."""
    codec = token_codec(settings)
    keyring_replaced = install_keyring(settings)
    url = settings.effective_database_url
    # No pre-ping (it costs a round trip per checkout): a connection found dead fails one
    # request with 503 and the pool is invalidated and refilled. No overflow: under load an
    # overflow connection was opened and closed per checkout (a PostgreSQL backend started
    # each time); the same 40 connections at most, kept open.
    pool: dict[str, Any] = (
        {}
        if settings.is_embedded
        else {"pool_size": 40, "max_overflow": 0, "pool_pre_ping": False, "pool_recycle": 1800}
    )
    engine = create_engine(url, **pool)
    # The audit writer commits batches on its own small pool, never queued behind requests.
    audit_engine = (
        engine
        if settings.is_embedded
        else create_engine(url, pool_size=2, max_overflow=2, pool_pre_ping=False)
    )
    redis, counters = shared_counters(settings)
    if (warning := shared_key_warning(settings)) is not None:
        log.warning(warning)
    return Runtime(
        settings=settings,
        engine=engine,
        sessions=session_factory(engine),
        codec=codec,
        limiter=RateLimiter(counters),
        limits=SessionLimits.from_settings(settings),
        audit=AuditWriter(
            audit_engine,
            settings.effective_audit_spool_dir,
            signing_key=load_signing_key(settings),
            checkpoint_rows=settings.audit_checkpoint_rows,
            checkpoint_s=settings.audit_checkpoint_s,
        ),
        refusals=RefusalFolder(window_s=settings.audit_refusal_window_s),
        redis=redis,
        keyring_replaced=keyring_replaced,
    )
