"""The FastAPI application: routers, problem+json errors, audit, lifespan.

``create_app(settings)`` builds it; the lifespan creates the engine, Redis (or the
in-process stand-in), the token codec and the audit writer, refuses to start on a
database that would not keep acknowledged answers (``fsync`` or ``synchronous_commit``
off), runs the sweeper that expires sessions past their deadline, picks the default judge,
and either runs the scoring worker in process or wakes ``proctor judge worker`` processes
through arq.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
from arq.connections import ArqRedis
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from server.api.guard import BodyLimits, RequestGuard
from server.api.openapi import install_openapi
from server.api.outcomes import route_template
from server.api.problems import install_problem_handlers
from server.api.runtime import Runtime, build_runtime
from server.audit.endpoints import router as audit_router
from server.audit.middleware import AuditMiddleware
from server.auth.console_logins import delete_ended_logins
from server.auth.endpoints import router as auth_router
from server.bank_items.endpoints import router as bank_items_router
from server.bundles.endpoints import router as bundles_router
from server.calibration.drift import drift_forever
from server.calibration.endpoints import router as calibration_router
from server.config import Settings, get_settings
from server.console.app import install_console
from server.console.dependencies import login_limits
from server.database import unit_of_work, warn_if_privileged
from server.health.endpoints import router as health_router
from server.health.job import health_forever
from server.item_sets.endpoints import router as item_sets_router
from server.leaderboard.endpoints import router as leaderboard_router
from server.ledger.endpoints import router as ledger_router
from server.model_endpoints.endpoints import router as model_endpoints_router
from server.observability import metrics
from server.observability.endpoints import router as operations_router
from server.observability.logs import configure_logging
from server.observability.middleware import ObservedFastAPI
from server.registry.endpoints import router as registry_router
from server.review.endpoints import router as review_router
from server.runs.driver import IN_PROCESS_URL, ApiTarget
from server.runs.endpoints import router as runs_router
from server.runs.process import RUN_QUEUE, RUN_WAKE_FUNCTION
from server.runs.worker import RunWorker
from server.sample_audit.endpoints import router as sample_audit_router
from server.scoring.assignment import assign_judges
from server.scoring.endpoints import router as scoring_router
from server.scoring.wakeup import ArqWaker, EventWaker
from server.scoring.worker import ScoringWorker
from server.sessions.endpoints import router as sessions_router
from server.sessions.service import expire_overdue

log = logging.getLogger(__name__)


class UnsafeDatabase(RuntimeError):
    """The database is configured so that an acknowledged commit could be lost."""


async def check_durability(engine: AsyncEngine) -> None:
    """Refuse PostgreSQL with ``fsync`` or ``synchronous_commit`` off."""
    if engine.dialect.name != "postgresql":
        return
    async with engine.connect() as connection:
        fsync = (await connection.exec_driver_sql("SHOW fsync")).scalar_one()
        commit = (await connection.exec_driver_sql("SHOW synchronous_commit")).scalar_one()
    if fsync != "on" or commit == "off":
        raise UnsafeDatabase(
            f"PostgreSQL has fsync={fsync}, synchronous_commit={commit}: acknowledged answers "
            "could be lost; turn both on"
        )


async def sweep_forever(runtime: Runtime) -> None:
    """Every ``sweep_interval_s`` seconds: expire sessions past their deadline, refresh
    the judges of new answers (a calibration or a drift may have changed them) and delete
    ended console logins."""
    while True:
        await asyncio.sleep(runtime.settings.sweep_interval_s)
        try:
            async with unit_of_work(runtime.engine) as db:
                now = datetime.now(UTC)
                n = await expire_overdue(db, now=now)
                runtime.judging = await assign_judges(db, runtime.settings)
                await delete_ended_logins(db, now=now, limits=login_limits(runtime.settings))
            if n:
                log.info("expired %d sessions past their deadline", n)
        except Exception:
            log.exception("session sweep failed")


@contextlib.asynccontextmanager
async def scoring(runtime: Runtime) -> AsyncIterator[None]:
    """Pick the default judge and set up wake-ups: an in-process worker (embedded default),
    or arq jobs for ``proctor judge worker`` processes (with Redis)."""
    settings = runtime.settings
    async with unit_of_work(runtime.engine) as db:
        runtime.judging = await assign_judges(db, settings)
    if not settings.runs_scoring_in_process:
        if settings.redis_url:
            pool = ArqRedis.from_url(
                settings.redis_url,
                socket_timeout=settings.redis_timeout_s,
                socket_connect_timeout=settings.redis_timeout_s,
            )
            runtime.waker = ArqWaker(pool)
            try:
                yield
            finally:
                await pool.aclose()
        else:
            yield
        return
    event = asyncio.Event()
    worker = ScoringWorker(engine=runtime.engine, settings=settings)
    runtime.waker = EventWaker(event)
    task = asyncio.create_task(worker.run_forever(event), name="scoring-worker")
    health = asyncio.create_task(health_forever(runtime.engine, settings), name="health-job")
    drift = asyncio.create_task(drift_forever(runtime.engine, settings), name="judge-drift")
    try:
        yield
    finally:
        for background in (task, health, drift):
            background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await background
        await worker.aclose()


@contextlib.asynccontextmanager
async def running_runs(runtime: Runtime, app: FastAPI) -> AsyncIterator[None]:
    """Drive runs in process (the embedded default: through the app's own ASGI
    transport), or wake ``proctor run-worker`` processes through arq (with Redis)."""
    settings = runtime.settings
    if not settings.drives_runs_in_process:
        if settings.redis_url is None:
            yield
            return
        pool = ArqRedis.from_url(
            settings.redis_url,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
        )
        runtime.run_waker = ArqWaker(pool, RUN_WAKE_FUNCTION, RUN_QUEUE)
        try:
            yield
        finally:
            await pool.aclose()
        return
    event = asyncio.Event()
    api = ApiTarget(IN_PROCESS_URL, httpx.ASGITransport(app=app))
    worker = RunWorker(
        engine=runtime.engine,
        settings=settings,
        codec=runtime.codec,
        api=api,
        counters=runtime.limiter.counters,
    )
    runtime.run_waker = EventWaker(event)
    task = asyncio.create_task(worker.run_forever(event), name="run-worker")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API for ``settings`` (default: from the environment)."""
    settings = settings or get_settings()
    configure_logging(settings.log_format, settings.log_level)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = build_runtime(settings)
        metrics.instrument_pool(runtime.engine)
        try:
            await check_durability(runtime.engine)
            await warn_if_privileged(runtime.engine)  # owner or superuser: say so
            runtime.audit.start()
            app.state.runtime = runtime
            sweeper = asyncio.create_task(sweep_forever(runtime), name="session-sweeper")
            try:
                async with scoring(runtime), running_runs(runtime, app):
                    yield
            finally:
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
        finally:
            await runtime.close()
            metrics.process_exiting()

    app = ObservedFastAPI(
        title="Proctor",
        summary="Live, dynamic evaluation of large language models.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_problem_handlers(app)
    for router in (
        operations_router,
        auth_router,
        registry_router,
        model_endpoints_router,
        runs_router,
        sessions_router,
        scoring_router,
        leaderboard_router,
        audit_router,
        ledger_router,
        bundles_router,
        bank_items_router,
        item_sets_router,
        sample_audit_router,
        health_router,
        calibration_router,
        review_router,
    ):
        app.include_router(router)
    install_console(app)
    install_openapi(app, max_session_items=settings.max_session_items)
    # Added first, so it runs inside the audit middleware: refused requests are audited too.
    app.add_middleware(
        RequestGuard,
        limits=BodyLimits(
            max_body_bytes=settings.max_body_bytes, max_json_depth=settings.max_json_depth
        ),
    )
    app.add_middleware(
        AuditMiddleware,
        runtime_of=lambda: app.state.runtime,
        route_of=lambda scope: route_template(app, scope),
    )
    return app
