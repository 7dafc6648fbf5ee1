"""Fixtures of the review tests."""

from __future__ import annotations

import pytest

from tests.support.api import World, seed_world


@pytest.fixture
async def open_world_db(fresh_db_url: str) -> tuple[str, World]:
    """A fresh database whose bank holds short-answer items only: every answer goes to
    the judge, so a judge's behaviour decides what the review queue gets."""
    return fresh_db_url, await seed_world(fresh_db_url, qtypes=("short_answer",), per_cell=3)
