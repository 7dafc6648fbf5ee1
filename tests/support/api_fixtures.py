"""API fixtures: a seeded database (``world_db``) and the running app on it (``api``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.support.api import World, running_api, seed_world, test_settings
from tests.support.services import RedisServer


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    """A fresh database with a bank, two organisations, keys and models."""
    return fresh_db_url, await seed_world(fresh_db_url)


@pytest.fixture
async def big_world(fresh_db_url: str) -> tuple[str, World]:
    """3 disciplines x 2 types x 2 sub-disciplines x 20 families, augmented: room for
    adaptive sessions of 150 items beside fixed ones."""
    return fresh_db_url, await seed_world(fresh_db_url, per_cell=20)


@pytest.fixture
async def api(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FastAPI]]:
    """The running app on the seeded database (Redis counters on PostgreSQL)."""
    db_url, world = world_db
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    async with running_api(test_settings(db_url, redis_url)) as (app, client):
        yield client, world, app
