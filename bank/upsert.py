"""``INSERT ... ON CONFLICT`` for whichever dialect the session is bound to."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import model_table
from bank.database import Base


async def insert_ignore(
    session: AsyncSession, model: type[Base], rows: list[dict[str, Any]]
) -> None:
    """Insert ``rows``, silently skipping those that hit a unique or primary key."""
    if not rows:
        return
    statement = _insert(session, model_table(model)).values(rows).on_conflict_do_nothing()
    await session.execute(statement)


async def insert_or_add(
    session: AsyncSession,
    model: type[Base],
    rows: list[dict[str, Any]],
    *,
    keys: list[str],
    counter: str,
) -> None:
    """Insert ``rows``; where ``keys`` exist already, add the row's ``counter`` to the stored
    value."""
    if not rows:
        return
    table = model_table(model)
    statement = _insert(session, table).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={counter: table.c[counter] + statement.excluded[counter]},
    )
    await session.execute(statement)


def _insert(session: AsyncSession, table: Table) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"no upsert for dialect {dialect!r}")
