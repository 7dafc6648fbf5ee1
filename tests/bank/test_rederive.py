"""Re-deriving a sample on the state as of its draw (SQLite and PostgreSQL).

``bank.sampling.as_of.AsOfBank`` rebuilds the bank and one organisation's exposure as they
were at an instant from the items' creation times, their status history and the exposure
history, and the live draw's planning and selection run on it. At "now" it must give the
live draw's sample; at a past instant, the sample the live draw gave then, whatever
changed since (items retired, flagged and kept, new items imported into the same strata,
families released and reserved again).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.anchor_set import designate_anchor_set, draw_anchor_sample
from bank.database import utcnow
from bank.disciplines import sampled_disciplines
from bank.exposure import record_exposure, release_undelivered
from bank.item_sets import delete_item_set, draw_item_set_sample, save_item_set
from bank.item_status import change_status
from bank.models import Exposure, ExposureRelease, Item, ItemStatus, ItemStatusChange, Sample
from bank.sampling.as_of import AsOfBank, check_sample, stored_items
from bank.sampling.rederive import (
    Outcome,
    StoredItem,
    compare,
    drawn_order,
    history_breaks,
    missing_delivered,
    status_at,
)
from bank.sampling.service import DrawnSample, draw_from, draw_sample, persist_sample
from bank.sampling.source import SourceKind, source_json
from tests.support.database import module_bank
from tests.support.factories import make_bank, make_org

bank_engine, session = module_bank(disciplines=3, subdisciplines=2, per_cell=12)


async def as_of_draw(
    session: AsyncSession,
    org_id: uuid.UUID,
    at: datetime,
    n: int,
    seed: str,
    disciplines: Sequence[str],
) -> DrawnSample:
    bank = AsOfBank(session, org_id, at)
    await bank.load()
    return await draw_from(bank, n=n, seed=seed, disciplines=disciplines)


def ids(sample: DrawnSample) -> list[uuid.UUID]:
    return [i.id for i in sample.items]


async def item_ids(session: AsyncSession) -> list[uuid.UUID]:
    return list((await session.execute(select(Item.id).order_by(Item.id))).scalars())


async def test_as_of_now_is_the_live_draw(session: AsyncSession) -> None:
    org = await make_org(session)
    rng = random.Random(5)
    everything = await item_ids(session)
    await record_exposure(session, org_id=org.id, item_ids=rng.sample(everything, 40))
    reserving = uuid.uuid4()
    await record_exposure(
        session,
        org_id=org.id,
        item_ids=rng.sample(everything, 30),
        session_id=reserving,
        delivered=False,
    )
    await release_undelivered(session, org_id=org.id, session_id=reserving)
    shuffled = rng.sample(everything, 45)
    await change_status(session, item_ids=shuffled[:25], to=ItemStatus.RETIRED, actor="test")
    flagged = shuffled[25:]
    await change_status(session, item_ids=flagged, to=ItemStatus.FLAGGED, actor="test")
    await change_status(session, item_ids=flagged[:10], to=ItemStatus.ACTIVE, actor="test")
    disciplines = await sampled_disciplines(session)
    now = utcnow()
    for seed, n in (("a", 10), ("b", 60), ("c", 1000)):
        live = await draw_sample(session, org_id=org.id, n=n, seed=seed, disciplines=disciplines)
        again = await as_of_draw(session, org.id, now, n, seed, disciplines)
        assert ids(again) == ids(live)
        assert again.shortfall == live.shortfall
    assert 0 < len(live.items) < len(everything)  # the last one ran the bank dry


async def test_a_past_draw_is_re_derived_after_the_bank_and_exposure_changed(
    session: AsyncSession,
) -> None:
    org = await make_org(session)
    rng = random.Random(8)
    everything = await item_ids(session)
    await record_exposure(session, org_id=org.id, item_ids=rng.sample(everything, 20))
    held = uuid.uuid4()  # a session holding families while the sample is drawn
    held_items = rng.sample(everything, 30)
    await record_exposure(
        session, org_id=org.id, item_ids=held_items, session_id=held, delivered=False
    )
    disciplines = await sampled_disciplines(session)
    at = utcnow()
    past = {
        (seed, n): await draw_sample(
            session, org_id=org.id, n=n, seed=seed, disciplines=disciplines
        )
        for seed, n in (("x", 15), ("y", 50), ("z", 1000))
    }
    # Afterwards: the holding session ends, items are retired, flagged and kept, new items
    # join the same strata, another session reserves families.
    await release_undelivered(session, org_id=org.id, session_id=held)
    drawn = ids(past[("y", 50)])
    await change_status(session, item_ids=drawn[:5], to=ItemStatus.RETIRED, actor="test")
    others = [i for i in everything if i not in drawn]
    await change_status(session, item_ids=others[:10], to=ItemStatus.FLAGGED, actor="test")
    await change_status(session, item_ids=others[:4], to=ItemStatus.ACTIVE, actor="test")
    await make_bank(
        session,
        disciplines=3,
        qtypes=["multiple_choice", "short_answer"],
        subdisciplines=2,
        per_cell=5,
        augment=True,
    )
    await record_exposure(
        session, org_id=org.id, item_ids=rng.sample(others, 15), session_id=uuid.uuid4()
    )
    for (seed, n), live in past.items():
        changed_now = await draw_sample(
            session, org_id=org.id, n=n, seed=seed, disciplines=disciplines
        )
        assert ids(changed_now) != ids(live)  # the state did change
        again = await as_of_draw(session, org.id, at, n, seed, disciplines)
        assert ids(again) == ids(live)
        assert again.shortfall == live.shortfall
    # Without the release history the holding session's families look free at the draw.
    await session.execute(delete(ExposureRelease).where(ExposureRelease.session_id == held))
    forgot = await as_of_draw(session, org.id, at, 1000, "z", disciplines)
    assert len(forgot.items) > len(past[("z", 1000)].items)


async def test_release_keeps_the_released_rows(session: AsyncSession) -> None:
    org = await make_org(session)
    everything = await item_ids(session)
    held = uuid.uuid4()
    await record_exposure(
        session, org_id=org.id, item_ids=everything[:6], session_id=held, delivered=False
    )
    await session.execute(
        update(Exposure)
        .where(Exposure.org_id == org.id, Exposure.item_id == everything[0])
        .values(delivered_at=utcnow())
    )
    before = utcnow()
    released = await release_undelivered(session, org_id=org.id, session_id=held)
    rows = (
        (await session.execute(select(ExposureRelease).where(ExposureRelease.session_id == held)))
        .scalars()
        .all()
    )
    assert released == len(rows) > 0
    assert everything[0] not in {r.item_id for r in rows}  # delivered: stays exposed
    assert all(r.org_id == org.id and r.exposed_at <= before <= r.released_at for r in rows)
    left = await session.execute(select(Exposure.item_id).where(Exposure.session_id == held))
    assert list(left.scalars()) == [everything[0]]


def test_compare_names_the_first_difference_in_drawn_order() -> None:
    a, b, c = (uuid.UUID(int=i) for i in (1, 2, 3))
    # an adaptive session moved c forward: drawn order is still a, b, c
    stored = [StoredItem(0, 2, c), StoredItem(1, 0, a), StoredItem(2, 1, b)]
    assert [s.item_id for s in drawn_order(stored)] == [a, b, c]
    assert compare([a, b, c], stored).outcome is Outcome.MATCH
    wrong = compare([a, c, b], stored)
    assert wrong.outcome is Outcome.MISMATCH and wrong.same_set
    assert wrong.first_difference is not None
    assert (wrong.first_difference.index, wrong.first_difference.position) == (1, 2)
    assert (wrong.first_difference.expected, wrong.first_difference.stored) == (c, b)
    short = compare([a, b], stored)
    assert short.first_difference is not None and short.first_difference.expected is None
    legacy = [StoredItem(0, None, a), StoredItem(1, None, b)]
    assert compare([a, b], legacy).outcome is Outcome.MATCH
    shortfall = compare([a, b], legacy, expected_shortfall={"unplaced": 1})
    assert shortfall.outcome is Outcome.MISMATCH and shortfall.first_difference is None
    assert missing_delivered(stored[:2], [a, b]) == stored[0]
    assert missing_delivered(stored[1:], [a, b]) is None


def test_status_then_comes_from_the_first_change_after() -> None:
    assert status_at("retired", [("active", "flagged"), ("flagged", "retired")]) == "active"
    assert status_at("active", []) == "active"
    assert not history_breaks("retired", [("active", "flagged"), ("flagged", "retired")])
    assert history_breaks("retired", [("active", "flagged"), ("active", "retired")])
    assert history_breaks("anchor", [("active", "retired")])


async def recorded(
    session: AsyncSession, org_id: uuid.UUID, drawn: DrawnSample, source: dict[str, object]
) -> Sample:
    assert source_json(drawn.source) == source  # every draw of the bank names its source
    return await persist_sample(session, org_id=org_id, sample=drawn, drawn_at=utcnow())


async def test_anchor_and_item_set_samples_are_re_derived(session: AsyncSession) -> None:
    org = await make_org(session)
    rng = random.Random(3)
    await designate_anchor_set(session, size=12, seed="anchor")
    moved = (
        await session.execute(
            select(ItemStatusChange.item_id).where(ItemStatusChange.to_status == "anchor")
        )
    ).scalars()
    assert len(set(moved)) >= 12  # every move into the anchor set is in the history
    everything = await item_ids(session)
    members = rng.sample(everything, 40)
    item_set = await save_item_set(session, name="audit-set", item_ids=members, rule={}, actor="t")
    await record_exposure(session, org_id=org.id, item_ids=rng.sample(everything, 20))
    anchor = await recorded(
        session,
        org.id,
        await draw_anchor_sample(session, org_id=org.id, n=5, seed="s1"),
        {"kind": "anchor"},
    )
    from_set = await recorded(
        session,
        org.id,
        await draw_item_set_sample(session, org_id=org.id, set_id=item_set.id, n=8, seed="s2"),
        {"kind": "item_set", "item_set_id": str(item_set.id)},
    )
    # afterwards: the drawn families are reserved, anchor and member items retired, more
    # anchors designated
    for sample in (anchor, from_set):
        stored = [s.item_id for s in await stored_items(session, sample.id)]
        await record_exposure(session, org_id=org.id, item_ids=stored, session_id=uuid.uuid4())
        await change_status(session, item_ids=stored[:2], to=ItemStatus.RETIRED, actor="t")
    active_members = (
        await session.execute(select(Item.id).where(Item.id.in_(members), Item.status == "active"))
    ).scalars()
    await change_status(
        session, item_ids=list(active_members)[:5], to=ItemStatus.RETIRED, actor="t"
    )
    await designate_anchor_set(session, size=6, seed="more")
    for sample in (anchor, from_set):
        check = await check_sample(session, sample)
        assert check.comparison is not None, check.rederived.reason
        assert check.outcome is Outcome.MATCH, check.comparison
        assert check.rederived.history_breaks == ()
    await delete_item_set(session, name="audit-set")
    gone = await check_sample(session, from_set)
    assert gone.outcome is Outcome.NOT_REDERIVABLE
    assert gone.rederived.reason == "kind item_set: the item set no longer exists"
    for damaged, kind, reason in [
        ({"kind": "item_set", "item_set_id": "s1"}, SourceKind.ITEM_SET, "is not a UUID"),
        ({"kind": "stratified", "disciplines": "law"}, SourceKind.STRATIFIED, "must be a list"),
        ({"kind": "adaptive"}, None, "unknown kind 'adaptive'"),
        (["anchor"], None, "must be a JSON object, not an array"),
    ]:
        from_set.source = damaged
        unreadable = await check_sample(session, from_set)
        assert unreadable.outcome is Outcome.NOT_REDERIVABLE
        assert unreadable.rederived.kind == kind
        assert unreadable.rederived.reason is not None
        assert unreadable.rederived.reason.startswith("the recorded source is unreadable: ")
        assert reason in unreadable.rederived.reason
