"""Service fixtures: real, throwaway PostgreSQL and Redis servers for the test session.

``postgres_server`` / ``redis_server`` start one server process each per test session from
the installed binaries (see ``tests.support.services``) and stop + delete it at session end.
Tests using them (directly or via another fixture) are marked ``postgres`` / ``redis``
automatically, so ``pytest -m "not postgres"`` deselects them.

If the binaries are missing the tests are SKIPPED with an install hint -- unless
PROCTOR_REQUIRE_SERVICES=1 (set by .ci/run), which turns that into a FAILURE. Start-up
errors of installed binaries are always errors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import services

REQUIRE_SERVICES_ENV = "PROCTOR_REQUIRE_SERVICES"

# fixture name -> marker added to every test whose fixture closure includes it
SERVICE_MARKERS = {
    "postgres_bindir": "postgres",
    "postgres_server": "postgres",
    "redis_binary": "redis",
    "redis_server": "redis",
}


def _installed(found: Path | None, what: str, package: str) -> Path:
    """``found``; if it is ``None``, skip the test (fail it when
    ``PROCTOR_REQUIRE_SERVICES=1``) with an install hint."""
    if found is not None:
        return found
    reason = (
        f"{what} not found (apt-get install {package}); tests needing it are skipped "
        f"unless {REQUIRE_SERVICES_ENV}=1, which makes this a failure"
    )
    if os.environ.get(REQUIRE_SERVICES_ENV, "").lower() in {"1", "true", "yes"}:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_bindir() -> Path:
    """Directory with the PostgreSQL server binaries (skips/fails if absent)."""
    return _installed(services.find_postgres_bindir(), "PostgreSQL binaries", "postgresql")


@pytest.fixture(scope="session")
def redis_binary() -> Path:
    """Path of ``redis-server`` (skips/fails if absent)."""
    return _installed(services.find_redis_server(), "Redis server binary", "redis-server")


@pytest.fixture(scope="session")
def postgres_server(postgres_bindir: Path) -> Iterator[services.PostgresServer]:
    """A PostgreSQL server for the whole session; superuser ``postgres``, trust auth.

    Use ``postgres_server.create_database(name)`` for an isolated database and
    ``postgres_server.url(name)`` / ``.dsn(name)`` to connect.
    """
    with services.postgres_server(postgres_bindir) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server(redis_binary: Path) -> Iterator[services.RedisServer]:
    """A Redis server for the whole session; connect with ``redis_server.url``."""
    with services.redis_server(redis_binary) as server:
        yield server


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection sees the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use the service fixtures ``postgres`` / ``redis``.

    The marker is also recorded as a ``service`` property in the JUnit XML so
    that .ci/run can detect skipped service tests.
    """
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        markers = {m for name, m in SERVICE_MARKERS.items() if name in fixturenames}
        for marker in sorted(markers):
            item.add_marker(marker)
            item.user_properties.append(("service", marker))
