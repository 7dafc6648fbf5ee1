"""``INSERT ... ON CONFLICT`` for whichever dialect the session is bound to.

Statements are chunked so that no statement carries more than ``MAX_PARAMETERS`` bound
values (asyncpg allows 32,767, SQLite 32,766).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import model_table
from bank.database import Base

MAX_PARAMETERS = 30_000


async def insert_ignore(
    session: AsyncSession,
    model: type[Base],
    rows: Sequence[dict[str, Any]],
    *,
    returning: str | None = None,
) -> list[Any]:
    """Insert ``rows``, skipping those that hit a unique or primary key.

    Returns the ``returning`` column of the rows actually inserted (empty without it).
    """
    table = model_table(model)
    inserted: list[Any] = []
    for chunk in _chunks(table, rows):
        statement = _insert(session, table).values(chunk).on_conflict_do_nothing()
        if returning is None:
            await session.execute(statement)
        else:
            result = await session.execute(statement.returning(table.c[returning]))
            inserted.extend(result.scalars())
    return inserted


async def insert_or_add(
    session: AsyncSession,
    model: type[Base],
    rows: Sequence[dict[str, Any]],
    *,
    keys: list[str],
    counter: str,
) -> None:
    """Insert ``rows``; where ``keys`` exist already, add the row's ``counter`` to the stored
    value."""
    table = model_table(model)
    for chunk in _chunks(table, rows):
        statement = _insert(session, table).values(chunk)
        statement = statement.on_conflict_do_update(
            index_elements=keys,
            set_={counter: table.c[counter] + statement.excluded[counter]},
        )
        await session.execute(statement)


def _chunks(table: Table, rows: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    if not rows:
        return
    size = max(1, MAX_PARAMETERS // len(table.columns))  # defaults are parameters too
    for start in range(0, len(rows), size):
        yield list(rows[start : start + size])


def _insert(session: AsyncSession, table: Table) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"no upsert for dialect {dialect!r}")
