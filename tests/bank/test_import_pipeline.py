"""The pipelined import (worker processes prepare chunks while the importer writes) gives
the same report, rows and refusals as the import in one process."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.importer import ImportRefused, import_records
from bank.models import Item, ItemLshKey
from tests.support.factories import mc_record, open_record, raw_records

CHUNK = 4


def _batch() -> list[dict[str, Any]]:
    """Originals, an exact duplicate of an earlier chunk's record, a near duplicate, a
    repeated explicit id with the same content, a new discipline, multiple choice."""
    records: list[dict[str, Any]] = [mc_record(i) for i in range(5)]
    records += [open_record(i) for i in range(6)]
    records.append(open_record(1, question=open_record(1)["question"].upper()))  # exact dup
    records.append(open_record(2, question=open_record(2)["question"] + " Now!"))  # near dup
    records.append(open_record(40, discipline="Astrology"))
    records += [mc_record(9), mc_record(2)]  # mc_record(2): an exact duplicate
    return records


async def _import(session: AsyncSession, records: list[dict[str, Any]], workers: int) -> Any:
    return await import_records(
        session,
        raw_records(records),
        add_disciplines=True,
        workers=workers,
        chunk_size=CHUNK,
    )


async def _rows(session: AsyncSession) -> list[tuple[Any, ...]]:
    result = await session.execute(
        select(
            Item.id,
            Item.family_id,
            Item.variant,
            Item.discipline,
            Item.qtype,
            Item.question,
            Item.options,
            Item.answer,
            Item.explanation,
            Item.content_hash,
            Item.slot.op("&")(0xFFFFFFFF),
        ).order_by(Item.id)
    )
    return [tuple(r) for r in result]


# The pipeline runs on PostgreSQL only (elsewhere the import is in-process).
POSTGRES_ONLY = pytest.mark.parametrize("backend", ["postgres"], indirect=True, scope="session")


@POSTGRES_ONLY
async def test_pipelined_import_writes_and_reports_what_the_in_process_one_does(
    fresh_db_url: str,
) -> None:
    from server.database import create_engine, unit_of_work

    results = []
    for workers in (1, 0):
        engine = create_engine(fresh_db_url)
        async with unit_of_work(engine) as session:
            report = await _import(session, _batch(), workers)
            rows = await _rows(session)
            keys = (
                await session.execute(select(func.count()).select_from(ItemLshKey))
            ).scalar_one()
            await session.rollback()
        await engine.dispose()
        results.append((report.as_dict(), rows, keys))
    (pipelined, rows_p, keys_p), (in_process, rows_i, keys_i) = results
    assert pipelined == in_process
    assert pipelined["duplicates"] and pipelined["near_duplicates"]
    assert pipelined["variants_added"] > 0 and pipelined["disciplines_added"] == ["astrology"]
    assert rows_p == rows_i and keys_p == keys_i > 0


@POSTGRES_ONLY
async def test_pipelined_import_reimport_is_unchanged(db_session: AsyncSession) -> None:
    first = await _import(db_session, _batch(), 1)
    second = await _import(db_session, _batch(), 1)
    assert second.items_added == 0
    assert first.originals_added > 0
    assert second.unchanged == second.records == len(_batch())  # duplicates: same content id


@POSTGRES_ONLY
async def test_a_bad_record_in_a_late_chunk_refuses_everything(db_session: AsyncSession) -> None:
    records = _batch()
    taken = uuid.uuid4()
    records[9] = open_record(77, id=str(taken))
    records += [open_record(78, id=str(taken)), open_record(79, qtype="poem")]
    records.append(open_record(80, question="bad \x00 text"))
    with pytest.raises(ImportRefused) as refused:
        await _import(db_session, records, 1)
    with pytest.raises(ImportRefused) as refused_in_process:
        await _import(db_session, records, 0)
    assert [str(e) for e in refused.value.errors] == [
        str(e) for e in refused_in_process.value.errors
    ]
    assert len(refused.value.errors) == 3
    assert (await db_session.execute(select(func.count()).select_from(Item))).scalar() == 0
    assert (await db_session.execute(select(func.count()).select_from(ItemLshKey))).scalar() == 0
