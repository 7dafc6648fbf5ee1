"""Browser fixtures: Debian's Chromium driven by Playwright, and a live console to drive.

``chromium`` launches ``/usr/bin/chromium`` (``apt-get install chromium``; Playwright never
downloads a browser here) once per test session; a missing binary skips the browser tests,
or fails them under ``PROCTOR_REQUIRE_SERVICES=1`` (``.ci/run``). ``console_site`` runs
``proctor serve`` as a real process on 127.0.0.1 over a seeded PostgreSQL database with
Redis, once per module. Screenshots go to ``SCREENSHOTS`` (a test artifact).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, async_playwright

from tests.support.api import JWT_SECRET, LiveServer, World, live_server, seed_world
from tests.support.database import new_postgres_database
from tests.support.scored import JUDGE
from tests.support.service_fixtures import _installed
from tests.support.services import PostgresServer, RedisServer

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".ci" / "artifacts" / "console"
CHROMIUM_ARGS = (
    # as root in a container, and with no network beyond loopback: no sandbox, no GPU, and
    # none of Chromium's background connections (refused here, and slow to give up on)
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_chromium() -> Path | None:
    """Debian's Chromium (``/usr/bin/chromium``), or whatever ``chromium`` is on PATH."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    """Headless Chromium for the whole test session."""
    path = _installed(find_chromium(), "Chromium", "chromium")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(path), headless=True, args=list(CHROMIUM_ARGS)
        )
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class ConsoleSite:
    """A running server with its database and seeded organisations."""

    server: LiveServer
    db_url: str
    world: World

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
async def console_site(
    postgres_server: PostgresServer,
    postgres_template: str,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ConsoleSite]:
    """``proctor serve`` over a fresh seeded PostgreSQL database, with Redis."""
    db_url = await new_postgres_database(postgres_server, postgres_template)
    world = await seed_world(db_url)
    env = {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_REDIS_URL": redis_server.url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "1000000",
        "PROCTOR_AUTH_FAILURES_PER_MINUTE": "100000",
        "PROCTOR_MAX_CONCURRENT_SESSIONS": "50",
        "PROCTOR_MAX_SESSIONS_PER_PERIOD": "1000",
        "PROCTOR_LEADERBOARD_RESAMPLES": "200",
        # runs started from the console are driven by the server itself, calling the fake
        # LLM server the flows start on 127.0.0.1
        "PROCTOR_RUNS_IN_PROCESS": "true",
        "PROCTOR_RUN_POLL_S": "0.5",
        "PROCTOR_EGRESS_ALLOW": '["127.0.0.1"]',
        # a judge whose verdicts tests write themselves (nothing scores: with Redis and no
        # ``proctor judge worker`` running, answers wait in the outbox)
        "PROCTOR_JUDGES": json.dumps(
            [{"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}]
        ),
    }
    with live_server(env, tmp_path_factory.mktemp("console")) as server:
        yield ConsoleSite(server=server, db_url=db_url, world=world)


@pytest.fixture
async def browser_context(
    chromium: Browser, console_site: ConsoleSite
) -> AsyncIterator[BrowserContext]:
    """A fresh browser profile (no cookies) pointed at ``console_site``."""
    context = await chromium.new_context(
        base_url=console_site.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(15_000)
    try:
        yield context
    finally:
        await context.close()


def screenshot_path(name: str) -> Path:
    """Where the screenshot ``name`` (without extension) goes."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
