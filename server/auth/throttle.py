"""Which rate limits a request counts against (the counting is ``server.ratelimit``).

* Authenticated requests: per API key (``PROCTOR_RATE_LIMIT_PER_MINUTE``), whichever of the
  key's tokens they carry, so refreshing or exchanging the key again starts no new count;
  and per organisation (``PROCTOR_RATE_LIMIT_ORG_PER_MINUTE``) over all its keys.
* Key exchanges: per client address, a tenth of the per-key rate (at least 10).
* Refused authentications (401: no, bad, expired or revoked token; a bad key): per client
  address (``PROCTOR_AUTH_FAILURES_PER_MINUTE``). An address past it is refused with 429
  before its token or key is even looked at; that check is a set lookup in the process
  (``RateLimiter.check``), so it costs a valid request nothing and a flood no database
  or Redis work.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.requests import Request

from server.auth.permissions import Principal
from server.config import Settings
from server.errors import Unauthorized
from server.ratelimit import Limit, RateLimiter

UNKNOWN_ADDRESS = "unknown"


def client_address(request: Request) -> str:
    """The client's address for per-address limits: the peer's (or, behind a trusted
    proxy, the one it forwards); an IPv6 address counts as its /64, since one host
    commonly holds a whole /64 and would otherwise get a fresh count per address."""
    host = request.client.host if request.client else UNKNOWN_ADDRESS
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def request_limits(settings: Settings, principal: Principal) -> tuple[Limit, Limit]:
    """The per-key and per-organisation limits of an authenticated request."""
    return (
        Limit(f"key:{principal.subject}", settings.rate_limit_per_minute, "this API key"),
        Limit(f"org:{principal.org_id}", settings.rate_limit_org_per_minute, "this organisation"),
    )


def exchange_limit(settings: Settings, address: str) -> Limit:
    """Key exchanges (``POST /v1/auth/token``) of one client address."""
    per_window = max(10, settings.rate_limit_per_minute // 10)
    return Limit(f"exchange:{address}", per_window, "key exchanges from this address")


def failure_limit(settings: Settings, address: str) -> Limit:
    """Refused authentications of one client address."""
    return Limit(
        f"authfail:{address}",
        settings.auth_failures_per_minute,
        "refused authentications from this address",
    )


@asynccontextmanager
async def refusals_counted(limiter: RateLimiter, failures: Limit) -> AsyncIterator[None]:
    """Refuse (429) an address already past ``failures`` before anything is verified, and
    count every ``Unauthorized`` the block raises against it."""
    limiter.check(failures)
    try:
        yield
    except Unauthorized:
        await limiter.count(failures)
        raise
