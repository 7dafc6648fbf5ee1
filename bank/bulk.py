"""Bulk inserts: PostgreSQL ``COPY`` through asyncpg, executemany elsewhere.

SQLAlchemy's insertmanyvalues is correct everywhere but several times slower than
``COPY`` for the hundreds of thousands of rows a bank import writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import Base

COPY_CHUNK = 50_000


async def insert_rows(
    session: AsyncSession, model: type[Base], rows: Sequence[dict[str, Any]]
) -> None:
    """Insert ``rows`` (dicts keyed by column name) into ``model``'s table, in the session's
    transaction.

    Columns a row leaves out get their Python-side defaults.
    """
    if not rows:
        return
    table = model_table(model)
    rows = [_with_defaults(table, row) for row in rows]
    connection = await session.connection()
    if connection.dialect.name != "postgresql":
        await session.execute(insert(table), list(rows))
        return
    columns = list(rows[0])
    json_columns = {c.name for c in table.columns if isinstance(c.type, JSON)}
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None
    for start in range(0, len(rows), COPY_CHUNK):
        records = [
            tuple(
                json.dumps(row[c]) if c in json_columns and row[c] is not None else row[c]
                for c in columns
            )
            for row in rows[start : start + COPY_CHUNK]
        ]
        await driver.copy_records_to_table(table.name, records=records, columns=columns)


def _with_defaults(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    missing = [c for c in table.columns if c.name not in row and c.default is not None]
    if not missing:
        return row
    full = dict(row)
    for column in missing:
        default = column.default
        arg = getattr(default, "arg", None)
        if callable(arg):
            full[column.name] = arg(None) if getattr(default, "is_callable", False) else arg
        else:
            full[column.name] = arg
    return full


def model_table(model: type[Base]) -> Table:
    """The ``Table`` behind a mapped class."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
