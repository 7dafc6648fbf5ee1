"""Importing into the bank on SQLite and PostgreSQL: validation, idempotence, augmentation."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.augment import variant_id
from bank.importer import ImportRefused, import_records
from bank.models import Item, ItemLshKey, Stratum
from bank.stats import bank_stats
from tests.support.factories import mc_record, open_record, raw_records


async def _count(session: AsyncSession, model: type) -> int:
    return int((await session.execute(select(func.count()).select_from(model))).scalar_one())


async def test_multiple_choice_item_yields_n_true_false_and_one_fill_in(
    db_session: AsyncSession,
) -> None:
    record = mc_record(1, options=["10", "11", "12", "13", "14"], answer="C")
    report = await import_records(db_session, raw_records([record]))
    assert (report.originals_added, report.variants_added) == (1, 6)
    items = (await db_session.execute(select(Item))).scalars().all()
    original = next(i for i in items if i.variant == "original")
    assert {i.family_id for i in items} == {original.id}
    true_false = sorted((i for i in items if i.qtype == "true_false"), key=lambda i: i.variant)
    assert [i.answer for i in true_false] == ["False", "False", "True", "False", "False"]
    assert '"12"' in true_false[2].question
    fill_in = next(i for i in items if i.qtype == "fill_in")
    assert fill_in.answer == "12"
    assert fill_in.id == variant_id(original.id, "fill_in")


async def test_reimporting_the_same_records_changes_nothing(db_session: AsyncSession) -> None:
    records = [mc_record(i) for i in range(5)] + [open_record(i) for i in range(3)]
    first = await import_records(db_session, raw_records(records))
    before = await bank_stats(db_session)
    strata_before = (await db_session.execute(select(Stratum.n_slots))).scalars().all()
    second = await import_records(db_session, raw_records(records))
    assert first.items_added == 8 + 5 * 5
    assert second.items_added == 0
    assert second.unchanged == 8
    assert await bank_stats(db_session) == before
    assert (await db_session.execute(select(Stratum.n_slots))).scalars().all() == strata_before


async def test_a_bad_record_refuses_the_whole_batch_naming_line_and_field(
    db_session: AsyncSession,
) -> None:
    records = [mc_record(0), mc_record(1, answer="F"), open_record(2), open_record(3, question="")]
    with pytest.raises(ImportRefused) as refused:
        await import_records(db_session, raw_records(records, path="bank.jsonl"))
    messages = [str(e) for e in refused.value.errors]
    assert messages[0].startswith("bank.jsonl:2: answer: 'F' is not among the 4 options")
    assert messages[1] == "bank.jsonl:4: question: required field is missing or empty"
    assert await _count(db_session, Item) == 0
    assert await _count(db_session, Stratum) == 0


async def test_duplicate_ids_in_a_batch_are_refused(db_session: AsyncSession) -> None:
    same = str(uuid.uuid4())
    records = [open_record(0, id=same), open_record(1, id=same)]
    with pytest.raises(
        ImportRefused, match=r"test.jsonl:2: id: duplicate id .* first used at test.jsonl:1"
    ):
        await import_records(db_session, raw_records(records))


async def test_an_id_reused_for_other_content_is_refused(db_session: AsyncSession) -> None:
    item_id = str(uuid.uuid4())
    await import_records(db_session, raw_records([open_record(0, id=item_id)]))
    with pytest.raises(ImportRefused, match="already in the bank with different content"):
        await import_records(db_session, raw_records([open_record(1, id=item_id)]))


async def test_exact_duplicates_are_skipped_and_reported(db_session: AsyncSession) -> None:
    base = open_record(0)
    spaced = dict(base, question="  " + base["question"].upper().replace(" ", "   ") + " ")
    report = await import_records(db_session, raw_records([base, spaced]))
    assert report.originals_added == 1
    assert [(str(d.location), d.duplicate_of) for d in report.duplicates] == [
        ("test.jsonl:2", "test.jsonl:1")
    ]
    same_content = await import_records(db_session, raw_records([spaced], path="b.jsonl"))
    assert same_content.unchanged == 1  # no id: its id derives from the content
    other_id = dict(spaced, id=str(uuid.uuid4()))
    again = await import_records(db_session, raw_records([other_id], path="c.jsonl"))
    assert again.items_added == 0
    assert again.duplicates[0].duplicate_of.startswith("bank item ")


async def test_near_duplicates_are_imported_and_reported_within_and_across_imports(
    db_session: AsyncSession,
) -> None:
    text = (
        "A train leaves the station at 9 am travelling at 80 km/h; a second train leaves "
        "the same station at 10 am travelling at 100 km/h on the same track. When does "
        "the second train catch up with the first one?"
    )
    near = text.replace("first one?", "first train?")
    far = "Name the capital of France and describe its history in the nineteenth century."
    first = await import_records(
        db_session, raw_records([open_record(0, question=text), open_record(1, question=far)])
    )
    assert first.near_duplicates == []
    report = await import_records(
        db_session, raw_records([open_record(2, question=near)], path="later.jsonl")
    )
    assert report.originals_added == 1
    [finding] = report.near_duplicates
    assert finding.other.startswith("bank item ")
    assert finding.jaccard >= 0.9
    assert await _count(db_session, ItemLshKey) == 3 * 8


async def test_no_augment_imports_originals_only(db_session: AsyncSession) -> None:
    report = await import_records(db_session, raw_records([mc_record(0)]), augment=False)
    assert (report.originals_added, report.variants_added) == (1, 0)


async def test_slots_are_dense_per_stratum(db_session: AsyncSession) -> None:
    await import_records(db_session, raw_records([open_record(i) for i in range(4)]))
    await import_records(db_session, raw_records([open_record(i) for i in range(4, 7)]))
    stratum = (await db_session.execute(select(Stratum))).scalar_one()
    slots = sorted((await db_session.execute(select(Item.slot))).scalars())
    assert stratum.n_slots == stratum.n_active == 7
    assert [s & 0xFFFFFFFF for s in slots] == list(range(7))
