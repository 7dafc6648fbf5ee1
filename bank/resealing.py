"""Moving every sealed column to the active key (``proctor bank rotate-key``), and counting
the values under each key id.

The columns are found by their type (:class:`bank.sealing.SealedText`) in the metadata the
caller passes. Values are read and written raw (as the text they are stored as), so a batch
costs one query, the opening and sealing in Python, and one ``executemany``. Each batch
is its own transaction; a value is only replaced if it is still the one read (a value
rewritten meanwhile stays as the application wrote it, under the active key). Rows already
under the active key are skipped by the query, so a run is idempotent, and an interrupted
one resumes where it stopped when run again.

Roll out a new key to every process first (as the last entry: the active key) and rotate
after; a process still sealing with the old key would keep writing values under it. Once
``--check`` shows nothing under an old key id, that key can be removed from the keyring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    MetaData,
    Table,
    Text,
    and_,
    bindparam,
    func,
    select,
    tuple_,
    type_coerce,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.sealing import PREFIX, Keyring, SealedText, SealError, current, key_id_of

CLEAR = "(clear)"
"""The key id ``count_by_key`` gives values stored in clear (rows from before sealing)."""
BATCH = 1000
_ID_CHARS = 40 + len(PREFIX)
"""Enough of a stored value to read its key id."""


@dataclass(frozen=True, slots=True)
class SealedColumn:
    """One sealed column of one table."""

    table: Table
    column: Column[Any]

    @property
    def name(self) -> str:
        """``table.column``, as in the sealed values' associated data."""
        kind = self.column.type
        assert isinstance(kind, SealedText)
        return kind.column

    @property
    def raw(self) -> ColumnElement[str]:
        """The column as the text it is stored as (not opened)."""
        return type_coerce(self.column, Text())


def sealed_columns(metadata: MetaData) -> list[SealedColumn]:
    """Every column of ``metadata`` whose type is ``SealedText``, by table and column name."""
    found = [
        SealedColumn(table, column)
        for table in metadata.tables.values()
        for column in table.columns
        if isinstance(column.type, SealedText)
    ]
    return sorted(found, key=lambda c: c.name)


async def count_by_key(
    engine: AsyncEngine, columns: Sequence[SealedColumn]
) -> dict[str, Counter[str]]:
    """For each column (by name), how many values are sealed under each key id
    (``CLEAR`` for values in clear); NULLs are not counted. Changes nothing."""
    counts: dict[str, Counter[str]] = {}
    async with engine.connect() as connection:
        for sealed in columns:
            counter: Counter[str] = Counter()
            query = select(func.substr(sealed.raw, 1, _ID_CHARS)).where(sealed.raw.is_not(None))
            stream = await connection.stream(query.execution_options(yield_per=10_000))
            async for (head,) in stream:
                counter[key_id_of(head) or CLEAR] += 1
            counts[sealed.name] = counter
    return counts


@dataclass(frozen=True, slots=True)
class Resealed:
    """What ``reseal`` did to one column."""

    column: str
    rows: int
    batches: int


async def reseal(
    engine: AsyncEngine,
    columns: Sequence[SealedColumn],
    *,
    batch: int = BATCH,
    keyring: Keyring | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> list[Resealed]:
    """Seal every value of ``columns`` not under the active key of ``keyring`` (default:
    the process's) with it, clear values included; ``progress(column, rows so far)`` after
    each batch. Raises ``SealError`` (naming the row) for a value the keyring cannot open;
    the batches before it stay done."""
    keys = keyring or current()
    done: list[Resealed] = []
    for sealed in columns:
        rows = batches = 0
        after: tuple[Any, ...] | None = None
        while True:
            after, n = await _reseal_batch(engine, sealed, keys, after, batch)
            if n == 0:
                break
            rows += n
            batches += 1
            if progress is not None:
                progress(sealed.name, rows)
        done.append(Resealed(sealed.name, rows, batches))
    return done


async def _reseal_batch(
    engine: AsyncEngine,
    sealed: SealedColumn,
    keys: Keyring,
    after: tuple[Any, ...] | None,
    batch: int,
) -> tuple[tuple[Any, ...] | None, int]:
    """One batch in its own transaction: the next ``batch`` rows (by primary key, after
    ``after``) not under the active key; returns the last key seen and the rows done."""
    primary = list(sealed.table.primary_key.columns)
    raw = sealed.raw
    stale = and_(raw.is_not(None), ~raw.startswith(f"{PREFIX}{keys.active_id}:", autoescape=True))
    query = select(*primary, raw).where(stale).order_by(*primary).limit(batch)
    if after is not None:
        query = query.where(_after(primary, after))
    async with engine.begin() as connection:
        rows = (await connection.execute(query)).all()
        if not rows:
            return after, 0
        params = [_replacement(sealed, keys, row, len(primary)) for row in rows]
        statement = (
            update(sealed.table)
            .where(
                *(c == bindparam(f"_pk{i}", type_=c.type) for i, c in enumerate(primary)),
                raw == bindparam("_old", type_=Text()),
            )
            .values({sealed.column.name: bindparam("_new", type_=Text())})
        )
        await connection.execute(statement, params)
    return tuple(rows[-1][: len(primary)]), len(rows)


def _after(primary: list[Column[Any]], after: tuple[Any, ...]) -> ColumnElement[bool]:
    bound = [bindparam(None, value, type_=c.type) for c, value in zip(primary, after, strict=True)]
    if len(primary) == 1:
        return primary[0] > bound[0]
    return tuple_(*primary) > tuple_(*bound)


def _replacement(
    sealed: SealedColumn, keys: Keyring, row: Sequence[Any], n_keys: int
) -> dict[str, Any]:
    old: str = row[n_keys]
    try:
        text = keys.open(old, column=sealed.name) if key_id_of(old) is not None else old
    except SealError as error:
        where = ", ".join(str(v) for v in row[:n_keys])
        raise SealError(f"{error} (row {where})") from None
    params: dict[str, Any] = {f"_pk{i}": value for i, value in enumerate(row[:n_keys])}
    params["_old"] = old
    params["_new"] = keys.seal(text, column=sealed.name)
    return params
