"""``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz``: 200 while the process answers at all (the liveness probe). ``/readyz``: 200
when the database answers and is migrated to the head revision and Redis, when
configured, answers PING; 503 otherwise, saying which check failed and nothing more (the
readiness probe). Neither needs a token. ``/metrics``: the Prometheus exposition, for a
scraper presenting ``Authorization: Bearer $PROCTOR_METRICS_TOKEN``; 404 while no token is
configured, 401 for a missing or wrong one. None of the three is rate limited or audited.
"""

from __future__ import annotations

import asyncio
import hmac
from enum import StrEnum
from functools import lru_cache

from alembic.script import ScriptDirectory
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel
from sqlalchemy import text

from server.api.dependencies import RuntimeDep
from server.api.runtime import Runtime
from server.database import alembic_config
from server.errors import NotFound, Unauthorized
from server.observability import metrics
from server.observability.collector import SnapshotCollector, read_snapshot
from server.observability.paths import HEALTHZ, METRICS, READYZ

router = APIRouter(tags=["operations"])
CHECK_TIMEOUT_S = 2.0


class CheckStatus(StrEnum):
    OK = "ok"
    FAILING = "failing"


class Liveness(BaseModel):
    status: CheckStatus = CheckStatus.OK


class Readiness(BaseModel):
    """Each check's outcome; ``redis`` is absent when no Redis is configured."""

    status: CheckStatus
    database: CheckStatus
    """The database answered."""
    migrations: CheckStatus
    """Its schema is at the head revision of this release."""
    redis: CheckStatus | None = None


@router.get(HEALTHZ, response_model=Liveness, operation_id="operations.healthz")
async def healthz() -> Liveness:
    """Liveness: 200 while the process answers."""
    return Liveness()


@router.get(
    READYZ,
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A check failed."}},
    operation_id="operations.readyz",
)
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Readiness: the database reachable and migrated, Redis (if configured) reachable."""
    result = await readiness(runtime)
    status = 200 if result.status is CheckStatus.OK else 503
    return JSONResponse(result.model_dump(mode="json", exclude_none=True), status_code=status)


async def readiness(runtime: Runtime) -> Readiness:
    """Run the checks of ``/readyz``, each under ``CHECK_TIMEOUT_S``."""
    revisions = await _revisions(runtime)
    database = _ok(revisions is not None)
    migrations = _ok(revisions is not None and revisions == head_revisions())
    redis = None if runtime.redis is None else _ok(await _pings(runtime))
    failing = CheckStatus.FAILING in (database, migrations, redis)
    return Readiness(status=_ok(not failing), database=database, migrations=migrations, redis=redis)


def _ok(passed: bool) -> CheckStatus:
    return CheckStatus.OK if passed else CheckStatus.FAILING


async def _revisions(runtime: Runtime) -> frozenset[str] | None:
    """The database's Alembic revisions (empty if never migrated); None if it failed."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S), runtime.engine.connect() as db:
            rows = await db.execute(text("SELECT version_num FROM alembic_version"))
            return frozenset(str(row[0]) for row in rows)
    except Exception:
        try:  # reachable, but without the version table: never migrated
            async with asyncio.timeout(CHECK_TIMEOUT_S), runtime.engine.connect() as db:
                await db.execute(text("SELECT 1"))
            return frozenset()
        except Exception:
            return None


async def _pings(runtime: Runtime) -> bool:
    assert runtime.redis is not None
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return bool(await runtime.redis.ping())
    except Exception:
        return False


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The head revision(s) of the migrations shipped with this release."""
    return frozenset(ScriptDirectory.from_config(alembic_config("")).get_heads())


@router.get(METRICS, include_in_schema=False)
async def scrape(request: Request, runtime: RuntimeDep) -> Response:
    """The Prometheus exposition (see the module docstring)."""
    _require_scraper(request, runtime)
    snapshot = await read_snapshot(runtime.engine, runtime.redis, timeout_s=CHECK_TIMEOUT_S)
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(SnapshotCollector(snapshot))
    registry = metrics.scrape_registry()
    # multiprocess mode reads every process's files: off the event loop
    body = await asyncio.to_thread(generate_latest, registry) + generate_latest(scraped)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def _require_scraper(request: Request, runtime: Runtime) -> None:
    token = runtime.settings.metrics_token
    if token is None:
        raise NotFound("not found")
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.encode(), expected):
        raise Unauthorized("a valid metrics token is required")
