"""Sealed columns on SQLite and PostgreSQL: what the database stores (raw) against what the
ORM reads, the COPY path of an import, rows from before sealing, and re-sealing under a
new key (``bank.resealing``, behind ``proctor bank rotate-key``)."""

from __future__ import annotations

import base64
import os

from sqlalchemy import Text, select, text, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import Base
from bank.importer import import_records
from bank.models import Item
from bank.resealing import CLEAR, count_by_key, reseal, sealed_columns
from bank.sealing import Keyring, parse_keyring, using
from server.database import create_engine, unit_of_work
from tests.support.bank_keys import TEST_BANK_KEYS, TEST_KEY_ID
from tests.support.factories import mc_record, open_record, raw_records

RAW_ANSWER = type_coerce(Item.answer, Text())
RAW_EXPLANATION = type_coerce(Item.explanation, Text())


def _with_new_key(key_id: str = "k2") -> tuple[Keyring, str]:
    entry = f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"
    ring = parse_keyring(f"{TEST_BANK_KEYS},{entry}", source="test", lines=False)
    return ring, entry


async def test_the_database_holds_ciphertext_and_the_orm_reads_text(
    db_session: AsyncSession,
) -> None:
    records = [mc_record(i, explanation=f"Because {i} is odd.") for i in range(3)]
    records += [open_record(i) for i in range(3)]
    await import_records(db_session, raw_records(records))  # COPY on PostgreSQL
    raw = (
        await db_session.execute(
            select(Item.id, RAW_ANSWER, RAW_EXPLANATION).where(Item.variant == "original")
        )
    ).all()
    assert len(raw) == 6
    for _, answer, explanation in raw:
        assert answer.startswith(f"pk1:{TEST_KEY_ID}:")
        assert explanation is None or explanation.startswith(f"pk1:{TEST_KEY_ID}:")
    stored = " ".join(f"{a} {e}" for _, a, e in raw)
    assert "Reference answer" not in stored and "is odd" not in stored
    db_session.expire_all()
    items = (await db_session.execute(select(Item).where(Item.variant == "original"))).scalars()
    by_answer = {i.answer: i.explanation for i in items}
    assert by_answer["Reference answer 1."] is None
    assert "Because 2 is odd." in by_answer.values()
    # variants (fill-in, true/false) are sealed too
    variants = (
        await db_session.execute(select(RAW_ANSWER).where(Item.variant != "original"))
    ).scalars()
    assert all(v.startswith("pk1:") for v in variants)


async def test_an_orm_write_is_sealed(db_session: AsyncSession) -> None:
    await import_records(db_session, raw_records([open_record(1)]))
    item = (await db_session.execute(select(Item))).scalars().one()
    item.answer = "A new reference"
    await db_session.flush()
    stored = (await db_session.execute(select(RAW_ANSWER).where(Item.id == item.id))).scalar()
    assert stored is not None and stored.startswith("pk1:") and "new reference" not in stored
    await db_session.refresh(item)
    assert item.answer == "A new reference"


async def test_a_value_from_before_sealing_reads_as_it_is(db_session: AsyncSession) -> None:
    await import_records(db_session, raw_records([open_record(1)]))
    await db_session.execute(text("UPDATE items SET answer = 'Old clear answer'"))
    db_session.expire_all()
    assert (await db_session.execute(select(Item.answer))).scalar() == "Old clear answer"


async def test_rotation_moves_every_value_to_the_new_key(fresh_db_url: str) -> None:
    engine = create_engine(fresh_db_url)
    columns = sealed_columns(Base.metadata)
    try:
        async with unit_of_work(engine) as db:
            records = [mc_record(i) for i in range(5)] + [open_record(i) for i in range(7)]
            await import_records(db, raw_records(records), augment=False)
            # one row from before sealing
            await db.execute(
                update(Item)
                .where(Item.question.like("%event number 3 %"))
                .values(answer=type_coerce("Clear old answer", Text()))
            )
        counts = await count_by_key(engine, columns)
        assert counts["items.answer"] == {TEST_KEY_ID: 11, CLEAR: 1}
        assert counts["items.explanation"] == {TEST_KEY_ID: 5}

        ring, entry = _with_new_key()
        with using(ring):
            done = await reseal(engine, columns, batch=4)
            by_column = {d.column: d for d in done}
            assert (by_column["items.answer"].rows, by_column["items.answer"].batches) == (12, 3)
            assert by_column["items.explanation"].rows == 5
            again = await reseal(engine, columns, batch=4)  # idempotent
            assert all(d.rows == 0 for d in again)
        counts = await count_by_key(engine, columns)
        assert counts["items.answer"] == {"k2": 12}
        assert counts["items.explanation"] == {"k2": 5}
        async with engine.connect() as connection:
            raw = (await connection.execute(select(RAW_ANSWER))).scalars().all()
        assert all(v.startswith("pk1:k2:") for v in raw)

        only_new = parse_keyring(entry, source="test", lines=False)  # the old key removed
        with using(only_new):
            async with unit_of_work(engine) as db:
                answers = set((await db.execute(select(Item.answer))).scalars())
        assert {"A", "Clear old answer", "Reference answer 6."} <= answers
        assert len(answers) == 8  # "A" for the five multiple-choice items
    finally:
        await engine.dispose()


async def test_rotation_stops_at_a_value_it_cannot_open(fresh_db_url: str) -> None:
    engine = create_engine(fresh_db_url)
    try:
        async with unit_of_work(engine) as db:
            await import_records(db, raw_records([open_record(1)]), augment=False)
        stranger, _ = _with_new_key("k9")
        unrelated = parse_keyring(
            f"zz:{base64.b64encode(os.urandom(32)).decode()}", source="t", lines=False
        )
        with using(unrelated):
            try:
                await reseal(engine, sealed_columns(Base.metadata), keyring=unrelated)
            except ValueError as error:
                assert "key 'test'" in str(error) and "row" in str(error)
            else:
                raise AssertionError("a value under an unknown key was re-sealed")
        assert stranger.active_id == "k9"
    finally:
        await engine.dispose()
