"""The test bank key for these tests (the bank's reference answers are sealed at rest), and
a seeded PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bank import sealing
from tests.support import services
from tests.support.api import World, seed_world
from tests.support.bank_keys import test_keyring
from tests.support.database import new_postgres_database


@pytest.fixture(autouse=True)
def bank_keyring() -> Iterator[None]:
    with sealing.using(test_keyring()):
        yield


@pytest.fixture
async def pg_world_db(
    postgres_server: services.PostgresServer, postgres_template: str
) -> tuple[str, World]:
    """A fresh seeded PostgreSQL database (for tests that run server processes)."""
    db_url = await new_postgres_database(postgres_server, postgres_template)
    return db_url, await seed_world(db_url)
