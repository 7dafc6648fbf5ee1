"""Seeded PostgreSQL databases: the usual world, and one whose bank holds open questions
only (every answer then goes to the judge)."""

from __future__ import annotations

import pytest

from tests.support import services
from tests.support.api import World, seed_world
from tests.support.database import new_postgres_database


@pytest.fixture
async def pg_world_db(
    postgres_server: services.PostgresServer, postgres_template: str
) -> tuple[str, World]:
    """A fresh seeded PostgreSQL database (for tests that run server processes)."""
    db_url = await new_postgres_database(postgres_server, postgres_template)
    return db_url, await seed_world(db_url)


@pytest.fixture
async def open_answers_db(
    postgres_server: services.PostgresServer, postgres_template: str
) -> tuple[str, World]:
    """A bank of open questions only: every answer goes to the judge."""
    db_url = await new_postgres_database(postgres_server, postgres_template)
    return db_url, await seed_world(db_url, qtypes=("short_answer",), augment=False)
