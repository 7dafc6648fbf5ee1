"""Bulk statements: PostgreSQL ``COPY`` and array parameters through asyncpg, plain
executemany and ``IN`` lists elsewhere.

SQLAlchemy's insertmanyvalues is correct everywhere but several times slower than
``COPY`` for the hundreds of thousands of rows a bank import writes, and an ``IN`` list of
thousands of values costs more to render than to run; ``= ANY(:array)`` is one parameter.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from sqlalchemy import JSON, ColumnElement, Table, any_, bindparam, insert
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import Base
from bank.sealing import SealedText

COPY_CHUNK = 50_000
BINARY_PIECE = 1 << 20
SQLITE_IN_CHUNK = 10_000
POSTGRES_IN_CHUNK = 100_000


async def insert_rows(
    session: AsyncSession, model: type[Base], rows: Sequence[dict[str, Any]]
) -> None:
    """Insert ``rows`` (dicts keyed by column name, all with the same keys) into ``model``'s
    table, in the session's transaction. Columns the rows leave out get their Python-side
    defaults."""
    if not rows:
        return
    table = model_table(model)
    defaults = _defaults(table, rows[0])
    connection = await session.connection()
    if connection.dialect.name != "postgresql":
        filled = [{**row, **{n: make() for n, make in defaults.items()}} for row in rows]
        await session.execute(insert(table), filled)
        return
    columns = list(rows[0])
    json_columns = {c.name for c in table.columns if isinstance(c.type, JSON)} & set(columns)
    records = [_record(row, columns, json_columns, defaults) for row in rows]
    await insert_tuples(session, model, columns + list(defaults), records)


async def insert_tuples(
    session: AsyncSession,
    model: type[Base],
    columns: Sequence[str],
    records: Sequence[tuple[Any, ...]],
    *,
    presealed: bool = False,
) -> None:
    """Insert ``records`` (tuples in the order of ``columns``, JSON already encoded) into
    ``model``'s table: the cheapest path for narrow rows by the hundred thousand.
    ``presealed``: the sealed columns' values are sealed already (PostgreSQL only)."""
    if not records:
        return
    table = model_table(model)
    connection = await session.connection()
    if connection.dialect.name != "postgresql":
        await session.execute(insert(table), [dict(zip(columns, r, strict=True)) for r in records])
        return
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None
    for start in range(0, len(records), COPY_CHUNK):
        chunk = records[start : start + COPY_CHUNK]
        await driver.copy_records_to_table(
            table.name,
            records=chunk if presealed else _sealed(table, columns, chunk),
            columns=list(columns),
        )


async def copy_binary(
    session: AsyncSession, model: type[Base], columns: Sequence[str], payload: bytes
) -> None:
    """``COPY`` a complete binary-format payload (header, tuples, trailer) into ``model``'s
    table (PostgreSQL only): for rows encoded in bulk, e.g. with NumPy."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None

    async def pieces() -> AsyncIterator[bytes]:
        view = memoryview(payload)
        for start in range(0, len(payload), BINARY_PIECE):
            yield bytes(view[start : start + BINARY_PIECE])

    await driver.copy_to_table(
        model_table(model).name, source=pieces(), columns=list(columns), format="binary"
    )


def _sealed(
    table: Table, columns: Sequence[str], records: Sequence[tuple[Any, ...]]
) -> Sequence[tuple[Any, ...]]:
    """``records`` with their sealed columns' values sealed: ``COPY`` bypasses the column
    types, so it would otherwise write reference answers in clear."""
    seals = [
        (index, kind)
        for index, name in enumerate(columns)
        if isinstance(kind := table.columns[name].type, SealedText)
    ]
    if not seals:
        return records
    sealed: list[tuple[Any, ...]] = []
    for record in records:
        values = list(record)
        for index, kind in seals:
            values[index] = kind.seal(values[index])
        sealed.append(tuple(values))
    return sealed


def _record(
    row: dict[str, Any],
    columns: list[str],
    json_columns: set[str],
    defaults: dict[str, Callable[[], Any]],
) -> tuple[Any, ...]:
    values = [row[c] for c in columns]
    for index, name in enumerate(columns):
        if name in json_columns and values[index] is not None:
            values[index] = json.dumps(values[index])
    values.extend(make() for make in defaults.values())
    return tuple(values)


def _defaults(table: Table, row: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Makers of the Python-side defaults of the columns ``row`` leaves out."""
    makers: dict[str, Callable[[], Any]] = {}
    for column in table.columns:
        default = column.default
        if column.name in row or default is None:
            continue
        makers[column.name] = _maker(getattr(default, "arg", None), callable_=default.is_callable)
    return makers


def _maker(arg: Any, *, callable_: bool) -> Callable[[], Any]:
    if callable_:
        return lambda: arg(None)  # SQLAlchemy wraps callables to take an execution context
    return lambda: arg


def model_table(model: type[Base]) -> Table:
    """The ``Table`` behind a mapped class."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


def in_chunks(session: AsyncSession, values: Sequence[Any]) -> list[Sequence[Any]]:
    """``values`` cut into pieces small enough for one ``column_in`` each."""
    size = POSTGRES_IN_CHUNK if _dialect(session) == "postgresql" else SQLITE_IN_CHUNK
    return [values[start : start + size] for start in range(0, len(values), size)]


def column_in(session: AsyncSession, column: Any, values: Sequence[Any]) -> ColumnElement[bool]:
    """``column IN values``: one array parameter on PostgreSQL, an ``IN`` list elsewhere."""
    if _dialect(session) != "postgresql":
        return column.in_(values)  # type: ignore[no-any-return]
    element = column.type
    return column == any_(bindparam(None, list(values), type_=ARRAY(element)))  # type: ignore[no-any-return]


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name
