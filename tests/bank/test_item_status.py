"""Item status changes and edit-and-restore (bank.item_status) on SQLite and PostgreSQL.

One bank per backend for the module: multiple-choice families augmented into six items
over three strata (multiple choice, true/false, fill-in) and open items alone, in two
disciplines. Every test works in a rolled-back transaction on top of it, with two
organisations: ``served`` has been served some families, ``fresh`` none. After every change
the maintained counters are compared with a count from scratch.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.duplicates.exact import content_hash
from bank.exposure import record_exposure
from bank.importer import import_records
from bank.item_status import (
    TRANSITIONS,
    DuplicateContent,
    InvalidReview,
    TransitionRefused,
    UnknownItems,
    allowed,
    change_status,
    revise_item,
)
from bank.models import (
    ITEM_STATUSES,
    Exposure,
    Item,
    ItemStatus,
    ItemStatusChange,
    OrgStratumExclusion,
    Stratum,
)
from bank.sampling.service import draw_sample
from server.database import create_engine, unit_of_work
from tests.support.database import make_database_url, rolled_back_session
from tests.support.factories import make_org, mc_record, open_record, raw_records

A, F, R, N = ItemStatus.ACTIVE, ItemStatus.FLAGGED, ItemStatus.RETIRED, ItemStatus.ANCHOR
EXPECTED_MOVES = {(A, F), (F, A), (F, R), (A, R), (N, R)}


def bank_records() -> list[dict[str, Any]]:
    records = []
    for discipline in ("alpha", "beta"):
        for i in range(8):
            records.append(
                mc_record(
                    i,
                    discipline=discipline,
                    subdiscipline="S0",
                    question=f"[{discipline}/mc/{i}] {uuid.uuid4().hex}",
                )
            )
            records.append(
                open_record(
                    i,
                    discipline=discipline,
                    subdiscipline="S0",
                    question=f"[{discipline}/open/{i}] {uuid.uuid4().hex} why?",
                )
            )
    return records


@pytest.fixture(scope="module")
async def status_engine(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncEngine]:
    url = await make_database_url(backend, request, Path(tmp_path_factory.mktemp("status")))
    engine = create_engine(url)
    async with unit_of_work(engine) as session:
        await import_records(
            session, raw_records(bank_records()), augment=True, add_disciplines=True
        )
    yield engine
    await engine.dispose()


@dataclass
class Bank:
    db: AsyncSession
    served: uuid.UUID
    fresh: uuid.UUID
    served_families: set[uuid.UUID]


@pytest.fixture
async def bank(status_engine: AsyncEngine) -> AsyncIterator[Bank]:
    async with rolled_back_session(status_engine) as db:
        served = (await make_org(db)).id
        fresh = (await make_org(db)).id
        originals = (
            await db.execute(
                select(Item.id, Item.family_id)
                .where(Item.variant == "original")
                .order_by(Item.discipline, Item.question)
            )
        ).all()
        chosen = originals[::2]  # every other family, in both disciplines and all types
        await record_exposure(db, org_id=served, item_ids=[i for i, _ in chosen])
        yield Bank(db, served, fresh, {f for _, f in chosen})


# --- reference counts ----------------------------------------------------------------------


async def n_active(db: AsyncSession) -> dict[int, int]:
    rows = await db.execute(select(Stratum.id, Stratum.n_active))
    return {s: n for s, n in rows.tuples() if n}


async def n_active_from_scratch(db: AsyncSession) -> dict[int, int]:
    rows = await db.execute(
        select(Item.stratum_id, func.count())
        .where(Item.status == "active")
        .group_by(Item.stratum_id)
    )
    return dict(rows.tuples().all())


async def exclusions(db: AsyncSession) -> dict[tuple[uuid.UUID, int], int]:
    rows = await db.execute(
        select(
            OrgStratumExclusion.org_id, OrgStratumExclusion.stratum_id, OrgStratumExclusion.n_items
        )
    )
    return {(o, s): n for o, s, n in rows.tuples() if n}


async def exclusions_from_scratch(db: AsyncSession) -> dict[tuple[uuid.UUID, int], int]:
    """Per organisation and stratum, the active items of families served to it."""
    rows = await db.execute(
        select(Exposure.org_id, Item.stratum_id, func.count())
        .join(Item, Item.family_id == Exposure.family_id)
        .where(Item.status == "active")
        .group_by(Exposure.org_id, Item.stratum_id)
    )
    return {(o, s): n for o, s, n in rows.tuples()}


async def assert_counters_true(db: AsyncSession) -> None:
    assert await n_active(db) == await n_active_from_scratch(db)
    assert await exclusions(db) == await exclusions_from_scratch(db)


async def items_where(db: AsyncSession, *conditions: Any) -> list[Item]:
    return list((await db.execute(select(Item).where(*conditions).order_by(Item.id))).scalars())


async def status_of(db: AsyncSession, item_id: uuid.UUID) -> str:
    return str(await db.scalar(select(Item.status).where(Item.id == item_id)))


async def history(db: AsyncSession, item_id: uuid.UUID) -> list[ItemStatusChange]:
    rows = await db.execute(
        select(ItemStatusChange)
        .where(ItemStatusChange.item_id == item_id)
        .order_by(ItemStatusChange.id)
    )
    return list(rows.scalars())


# --- the transition table ------------------------------------------------------------------


def test_item_statuses_are_the_enum() -> None:
    assert frozenset(s.value for s in ItemStatus) == ITEM_STATUSES
    assert {"active", "flagged", "retired", "anchor"} == ITEM_STATUSES


@pytest.mark.parametrize("source", list(ItemStatus))
@pytest.mark.parametrize("target", list(ItemStatus))
def test_allowed_moves(source: ItemStatus, target: ItemStatus) -> None:
    assert allowed(source, target) is ((source, target) in EXPECTED_MOVES)
    assert allowed(source.value, target.value) is ((source, target) in EXPECTED_MOVES)
    assert TRANSITIONS == EXPECTED_MOVES


# --- change_status ---------------------------------------------------------------------------


async def test_the_bank_starts_with_true_counters(bank: Bank) -> None:
    await assert_counters_true(bank.db)
    assert any(org == bank.served for org, _ in await exclusions(bank.db))


async def test_flagging_k_items_of_a_stratum_drops_both_counters_and_keep_restores_them(
    bank: Bank,
) -> None:
    db = bank.db
    served_items = await items_where(
        db, Item.family_id.in_(bank.served_families), Item.qtype == "true_false"
    )
    stratum = served_items[0].stratum_id
    in_stratum = [i for i in served_items if i.stratum_id == stratum]
    k = 3
    chosen = [i.id for i in in_stratum[:k]]
    before_active = (await n_active(db))[stratum]
    before_excluded = (await exclusions(db))[(bank.served, stratum)]

    changes = await change_status(
        db, item_ids=chosen, to=F, actor="health-job", reasons=["floor", "saturated"]
    )

    assert [c.item_id for c in changes] == chosen
    assert (await n_active(db))[stratum] == before_active - k
    assert (await exclusions(db))[(bank.served, stratum)] == before_excluded - k
    assert (bank.fresh, stratum) not in await exclusions(db)
    await assert_counters_true(db)

    kept = await change_status(db, item_ids=chosen, to=A, actor="key-1", note="fine after all")
    assert len(kept) == k
    assert (await n_active(db))[stratum] == before_active
    assert (await exclusions(db))[(bank.served, stratum)] == before_excluded
    await assert_counters_true(db)
    rows = await history(db, chosen[0])
    assert [(r.from_status, r.to_status) for r in rows] == [
        ("active", "flagged"),
        ("flagged", "active"),
    ]
    assert rows[0].reasons == ["floor", "saturated"] and rows[0].actor == "health-job"
    assert rows[1].note == "fine after all" and rows[1].actor == "key-1"


async def test_an_unserved_family_changes_no_exclusion(bank: Bank) -> None:
    db = bank.db
    unserved = await items_where(db, Item.family_id.not_in(bank.served_families))
    before = await exclusions(db)
    await change_status(db, item_ids=[i.id for i in unserved[:5]], to=F, actor="health-job")
    assert await exclusions(db) == before
    await assert_counters_true(db)


async def test_items_already_in_the_target_are_skipped(bank: Bank) -> None:
    db = bank.db
    ids = [i.id for i in await items_where(db, Item.qtype == "fill_in")][:4]
    snapshot = uuid.uuid4()
    first = await change_status(
        db, item_ids=ids[:2], to=F, actor="health-job", snapshot_id=snapshot
    )
    assert [c.snapshot_id for c in first] == [snapshot, snapshot]
    again = await change_status(db, item_ids=ids + ids, to=F, actor="health-job")
    assert [c.item_id for c in again] == ids[2:]  # repeats once, the flagged two skipped
    assert len(await history(db, ids[0])) == 1
    assert await change_status(db, item_ids=ids, to=F, actor="health-job") == []
    await assert_counters_true(db)


async def test_a_refused_move_changes_nothing(bank: Bank) -> None:
    db = bank.db
    ids = [i.id for i in await items_where(db, Item.qtype == "short_answer")][:3]
    await change_status(db, item_ids=[ids[0]], to=R, actor="key-1")
    counters = (await n_active(db), await exclusions(db))
    with pytest.raises(TransitionRefused, match=r"may not become active from retired \(1\)"):
        await change_status(db, item_ids=ids, to=A, actor="key-1")  # 2 active: skipped
    with pytest.raises(TransitionRefused, match="may not become flagged"):
        await change_status(db, item_ids=ids, to=F, actor="key-1")  # 2 would be fine
    assert [await status_of(db, i) for i in ids] == ["retired", "active", "active"]
    assert [len(await history(db, i)) for i in ids] == [1, 0, 0]
    assert (await n_active(db), await exclusions(db)) == counters
    with pytest.raises(TransitionRefused, match="anchor"):
        await change_status(db, item_ids=[ids[1]], to=N, actor="key-1")


async def test_anchor_items_may_only_be_retired(bank: Bank) -> None:
    db = bank.db
    item = (await items_where(db, Item.qtype == "multiple_choice"))[0]
    item.status = "anchor"  # as bank.anchor_set would, counters aside
    stratum = item.stratum_id
    await db.flush()
    with pytest.raises(TransitionRefused):
        await change_status(db, item_ids=[item.id], to=F, actor="key-1")
    before = await n_active(db)
    [change] = await change_status(db, item_ids=[item.id], to=R, actor="key-1")
    assert (change.from_status, change.to_status) == ("anchor", "retired")
    assert (await n_active(db)).get(stratum) == before.get(stratum)  # anchor was not counted


async def test_unknown_items_are_refused(bank: Bank) -> None:
    known = (await items_where(bank.db, Item.qtype == "fill_in"))[0].id
    ghost = uuid.uuid4()
    with pytest.raises(UnknownItems, match=str(ghost)):
        await change_status(bank.db, item_ids=[known, ghost], to=F, actor="key-1")
    assert await status_of(bank.db, known) == "active"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("note", "bad\x00note", "NUL"),
        ("note", "x" * 10_001, "longer than"),
        ("note", "\ud800", "not valid Unicode"),
        ("actor", "", "non-empty"),
        ("actor", "a" * 65, "longer than"),
        ("reasons", ["ok", "\x00"], "NUL"),
    ],
)
async def test_hostile_text_is_refused(bank: Bank, field: str, value: Any, message: str) -> None:
    item = (await items_where(bank.db, Item.qtype == "fill_in"))[0]
    arguments: dict[str, Any] = {"actor": "key-1", field: value}
    with pytest.raises(InvalidReview, match=message):
        await change_status(bank.db, item_ids=[item.id], to=F, **arguments)
    assert await status_of(bank.db, item.id) == "active"


@pytest.mark.parametrize("seed", range(4))
async def test_random_sequences_of_moves_keep_the_counters_true(bank: Bank, seed: int) -> None:
    db = bank.db
    rng = random.Random(seed)
    ids = [i.id for i in await items_where(db)]
    for _ in range(12):
        target = rng.choice([A, F, R])
        batch = rng.sample(ids, rng.randint(1, 12))
        statuses = {i: ItemStatus(await status_of(db, i)) for i in batch}
        movable = [i for i in batch if statuses[i] is target or allowed(statuses[i], target)]
        if rng.random() < 0.3:
            movable = batch  # sometimes a batch that may be refused
        try:
            changes = await change_status(db, item_ids=movable, to=target, actor="fuzz")
        except TransitionRefused:
            assert any(
                not allowed(statuses[i], target) and statuses[i] is not target for i in movable
            )
            continue
        assert {c.item_id for c in changes} == {i for i in movable if statuses[i] is not target}
        await assert_counters_true(db)
    await assert_counters_true(db)


async def test_sampling_never_serves_flagged_or_retired_items(bank: Bank) -> None:
    db = bank.db
    stratum_items = await items_where(db, Item.discipline == "alpha", Item.qtype == "true_false")
    stratum = stratum_items[0].stratum_id
    everything = [i.id for i in stratum_items if i.stratum_id == stratum]
    await change_status(db, item_ids=everything, to=F, actor="health-job")
    retired = [i.id for i in await items_where(db, Item.discipline == "beta")][::3]
    await change_status(db, item_ids=retired, to=R, actor="key-1")
    assert (await n_active(db)).get(stratum) is None
    await assert_counters_true(db)
    held = set(everything) | set(retired)
    total_active = sum((await n_active_from_scratch(db)).values())
    for org in (bank.fresh, bank.served):
        for seed in ("s1", "s2", "s3"):
            sample = await draw_sample(db, org_id=org, n=total_active, seed=seed)
            drawn = {i.id for i in sample.items}
            assert drawn and not drawn & held
            statuses = set(
                (await db.execute(select(Item.status).where(Item.id.in_(drawn)))).scalars()
            )
            assert statuses == {"active"}
    fresh_sample = await draw_sample(db, org_id=bank.fresh, n=total_active, seed="all")
    assert len({i.family_id for i in fresh_sample.items}) == len(fresh_sample.items)


# --- revise_item ---------------------------------------------------------------------------


async def flagged_original(bank: Bank, *, served: bool, qtype: str = "multiple_choice") -> Item:
    families = Item.family_id.in_(bank.served_families)
    where = families if served else ~families
    item = (await items_where(bank.db, where, Item.qtype == qtype, Item.variant == "original"))[0]
    await change_status(bank.db, item_ids=[item.id], to=F, actor="health-job", reasons=["floor"])
    return item


async def test_edit_and_restore_makes_a_new_active_version(bank: Bank) -> None:
    db = bank.db
    old = await flagged_original(bank, served=True)
    old_id, old_hash, stratum = old.id, old.content_hash, old.stratum_id
    old_options = list(old.options or [])
    before_excluded = (await exclusions(db))[(bank.served, stratum)]
    before_active = (await n_active(db))[stratum]
    options = [*old_options[:3], "none of these"]
    new = await revise_item(
        db,
        item_id=old_id,
        question="A clearer question: which number comes first?",
        options=options,
        answer="none of these",  # an option's text is stored as its letter
        note="rewrote an ambiguous stem",
        actor="key-1",
    )
    assert new.id != old_id and new.replaces_id == old_id
    assert (new.family_id, new.stratum_id, new.variant) == (old.family_id, stratum, "original")
    assert (new.discipline, new.qtype, new.subdiscipline) == (
        old.discipline,
        old.qtype,
        old.subdiscipline,
    )
    assert new.status == "active" and new.answer == "D" and new.options == options
    assert new.content_hash == content_hash(new.qtype, new.question, options)
    assert new.slot >> 32 == stratum
    assert await status_of(db, old_id) == "retired"
    assert await db.scalar(select(Item.content_hash).where(Item.id == old_id)) == old_hash
    [_flag, retire] = await history(db, old_id)
    assert (retire.from_status, retire.to_status, retire.reasons) == (
        "flagged",
        "retired",
        ["edit"],
    )
    assert retire.note == "rewrote an ambiguous stem" and retire.actor == "key-1"
    # the old one was flagged (not counted); the new active one counts for the served org
    assert (await exclusions(db))[(bank.served, stratum)] == before_excluded + 1
    assert (await n_active(db))[stratum] == before_active + 1
    await assert_counters_true(db)
    sample = await draw_sample(db, org_id=bank.fresh, n=10_000, seed="x")
    assert old_id not in {i.id for i in sample.items}


async def test_an_answer_only_fix_moves_the_content_hash(bank: Bank) -> None:
    db = bank.db
    old = await flagged_original(bank, served=False)
    old_id, digest = old.id, old.content_hash
    new = await revise_item(
        db, item_id=old_id, answer="B", explanation="B is right.", note="wrong key", actor="key-1"
    )
    assert (new.answer, new.explanation, new.question) == ("B", "B is right.", old.question)
    assert new.content_hash == digest
    assert await db.scalar(select(Item.content_hash).where(Item.id == old_id)) != digest
    await assert_counters_true(db)


async def test_an_open_item_edit_keeps_its_type(bank: Bank) -> None:
    new = await revise_item(
        bank.db,
        item_id=(await flagged_original(bank, served=True, qtype="short_answer")).id,
        question="Explain the event again, more precisely.",
        note="clarified",
        actor="key-1",
    )
    assert new.qtype == "short_answer" and new.options is None
    await assert_counters_true(bank.db)


async def test_an_edit_to_another_items_content_is_refused(bank: Bank) -> None:
    db = bank.db
    old = await flagged_original(bank, served=False)
    other = (await items_where(db, Item.qtype == "multiple_choice", Item.id != old.id))[0]
    with pytest.raises(DuplicateContent, match=str(other.id)):
        await revise_item(
            db,
            item_id=old.id,
            question=other.question,
            options=list(other.options or []),
            note="n",
            actor="key-1",
        )
    assert await status_of(db, old.id) == "flagged"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"question": "bad\x00question"}, "question: contains a NUL"),
        ({"question": "lone \udc80 surrogate"}, "question: is not valid Unicode"),
        ({"question": "x" * 100_001}, "question: longer than"),
        ({"question": "   "}, "question: required"),
        ({"options": ["only one"]}, "options: 1 options"),
        ({"options": ["a", "a", "b"]}, "options: two options have the same text"),
        ({"options": ["a", "\x00"]}, r"options\[1\]: contains a NUL"),
        ({"answer": "Z"}, "answer: 'Z' is not among"),
        ({"explanation": "e" * 100_001}, "explanation: longer than"),
        ({}, "changes nothing"),
    ],
)
async def test_hostile_or_invalid_edits_are_refused(
    bank: Bank, edit: dict[str, Any], message: str
) -> None:
    old = await flagged_original(bank, served=False)
    with pytest.raises(InvalidReview, match=message):
        await revise_item(bank.db, item_id=old.id, note="n", actor="key-1", **edit)
    assert await status_of(bank.db, old.id) == "flagged"


async def test_options_on_an_open_item_are_refused(bank: Bank) -> None:
    old = await flagged_original(bank, served=False, qtype="short_answer")
    with pytest.raises(InvalidReview, match="only multiple_choice has options"):
        await revise_item(bank.db, item_id=old.id, options=["a", "b"], note="n", actor="key-1")


async def test_only_a_flagged_item_can_be_edited(bank: Bank) -> None:
    db = bank.db
    item = (await items_where(db, Item.qtype == "fill_in"))[0]
    with pytest.raises(TransitionRefused, match="only a flagged item"):
        await revise_item(db, item_id=item.id, answer="x", note="n", actor="key-1")
    with pytest.raises(UnknownItems):
        await revise_item(db, item_id=uuid.uuid4(), answer="x", note="n", actor="key-1")
    with pytest.raises(InvalidReview, match="note"):
        await revise_item(db, item_id=item.id, answer="x", note="", actor="key-1")


async def test_a_revision_can_itself_be_flagged_and_revised(bank: Bank) -> None:
    db = bank.db
    old = await flagged_original(bank, served=True)
    first = await revise_item(db, item_id=old.id, answer="C", note="n1", actor="key-1")
    await change_status(db, item_ids=[first.id], to=F, actor="health-job")
    second = await revise_item(db, item_id=first.id, answer="D", note="n2", actor="key-1")
    assert second.replaces_id == first.id and second.family_id == old.family_id
    statuses = Counter(
        (await db.execute(select(Item.status).where(Item.family_id == old.family_id))).scalars()
    )
    assert statuses["retired"] == 2
    await assert_counters_true(db)
