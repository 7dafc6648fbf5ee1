"""The FastAPI application: routers, problem+json errors, audit, lifespan.

``create_app(settings)`` builds it; the lifespan creates the engine, Redis (or the
in-process stand-in), the token codec and the audit writer, refuses to start on a
database that would not keep acknowledged answers (``fsync`` or ``synchronous_commit``
off), and runs the sweeper that expires sessions past their deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from server.api.problems import install_problem_handlers
from server.api.runtime import Runtime, build_runtime
from server.audit.endpoints import router as audit_router
from server.audit.middleware import AuditMiddleware
from server.auth.endpoints import router as auth_router
from server.config import Settings, get_settings
from server.database import unit_of_work
from server.registry.endpoints import router as registry_router
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
    """Expire sessions past their deadline every ``sweep_interval_s`` seconds."""
    while True:
        await asyncio.sleep(runtime.settings.sweep_interval_s)
        try:
            async with unit_of_work(runtime.engine) as db:
                n = await expire_overdue(db, now=datetime.now(UTC))
            if n:
                log.info("expired %d sessions past their deadline", n)
        except Exception:
            log.exception("session sweep failed")


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API for ``settings`` (default: from the environment)."""
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = build_runtime(settings)
        try:
            await check_durability(runtime.engine)
            runtime.audit.start()
            app.state.runtime = runtime
            sweeper = asyncio.create_task(sweep_forever(runtime), name="session-sweeper")
            try:
                yield
            finally:
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
        finally:
            await runtime.close()

    app = FastAPI(
        title="Proctor",
        summary="Live, dynamic evaluation of large language models.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_problem_handlers(app)
    for router in (auth_router, registry_router, sessions_router, audit_router):
        app.include_router(router)
    app.add_middleware(AuditMiddleware, writer_of=lambda: app.state.runtime.audit)
    return app
