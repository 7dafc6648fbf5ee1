"""The Alembic migrations build exactly the schema the models declare, on both databases."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from server.models import metadata
from tests.support.cli import proctor


def _differences(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_migrated_schema_matches_the_models(db_engine: AsyncEngine) -> None:
    async with db_engine.connect() as connection:
        assert await connection.run_sync(_differences) == []


def test_upgrade_to_an_unknown_revision_says_so_without_a_traceback(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    run = proctor("db", "upgrade", "nope", env={"PROCTOR_DATABASE_URL": url})
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        run.stderr.strip()
        == "error: proctor db upgrade: Can't locate revision identified by 'nope'"
    )
    assert "Traceback" not in run.stdout + run.stderr
