"""Named item sets (bank.item_sets) against real databases (SQLite and PostgreSQL).

One bank per backend for the module: two disciplines, multiple-choice families augmented
into six items (original, four true/false variants, fill-in) and open items alone; every
test works in a rolled-back transaction on top of it.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.exposure import record_exposure
from bank.item_sets import (
    DuplicateItemSet,
    InvalidItemSet,
    delete_item_set,
    draw_item_set_sample,
    get_item_set,
    list_item_sets,
    save_item_set,
)
from bank.models import Item, ItemSet, ItemSetMember
from server.database import create_engine, unit_of_work
from tests.support.database import make_database_url, rolled_back_session
from tests.support.factories import make_bank, make_org

N_FAMILIES = 24  # 2 disciplines x 2 qtypes x 1 subdiscipline x 6 per cell
RULE = {"rule": "selective", "top_fraction": 0.5, "figures": {"kappa": 0.81}}


@pytest.fixture(scope="module")
async def sets_engine(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncEngine]:
    url = await make_database_url(backend, request, Path(tmp_path_factory.mktemp("sets")))
    engine = create_engine(url)
    async with unit_of_work(engine) as session:
        await make_bank(
            session,
            disciplines=2,
            qtypes=("multiple_choice", "short_answer"),
            subdisciplines=1,
            per_cell=6,
            augment=True,
        )
    yield engine
    await engine.dispose()


@pytest.fixture
async def session(sets_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    async with rolled_back_session(sets_engine) as s:
        yield s


async def families(session: AsyncSession) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Family id -> its item ids (sorted), families in id order."""
    rows = await session.execute(select(Item.family_id, Item.id).order_by(Item.family_id, Item.id))
    out: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for family_id, item_id in rows.tuples():
        out[family_id].append(item_id)
    return dict(out)


async def set_status(session: AsyncSession, item_ids: list[uuid.UUID], status: str) -> None:
    await session.execute(update(Item).where(Item.id.in_(item_ids)).values(status=status))


async def counts(session: AsyncSession) -> tuple[int, int]:
    n_sets = await session.scalar(select(func.count()).select_from(ItemSet))
    n_members = await session.scalar(select(func.count()).select_from(ItemSetMember))
    return n_sets or 0, n_members or 0


async def test_the_bank_is_as_laid_out(session: AsyncSession) -> None:
    sizes = sorted(len(items) for items in (await families(session)).values())
    assert sizes == [1] * 12 + [6] * 12 and len(sizes) == N_FAMILIES


# --- save ----------------------------------------------------------------------------------


async def test_a_saved_set_holds_its_items_once_with_its_rule(session: AsyncSession) -> None:
    fams = sorted((await families(session)).values(), key=len, reverse=True)
    chosen = [*fams[0][:3], fams[1][0]]
    record = await save_item_set(
        session, name="selective 50%", item_ids=chosen + chosen[:2], rule=RULE, actor="key-1"
    )
    assert record.n_items == 4 and record.rule == RULE and record.created_by == "key-1"
    members = await session.execute(
        select(ItemSetMember.item_id).where(ItemSetMember.set_id == record.id)
    )
    assert sorted(members.scalars()) == sorted(chosen)
    assert await get_item_set(session, "selective 50%") is record
    assert await get_item_set(session, "Selective 50%") is None  # names are exact
    other = await save_item_set(session, name="a", item_ids=[fams[2][0]], rule={}, actor="cli")
    assert [s.name for s in await list_item_sets(session)] == ["a", "selective 50%"]
    assert other.rule == {}


async def test_a_taken_name_is_refused_and_nothing_is_written(session: AsyncSession) -> None:
    fams = list((await families(session)).values())
    await save_item_set(session, name="dup", item_ids=[fams[0][0]], rule={}, actor="k")
    before = await counts(session)
    with pytest.raises(DuplicateItemSet, match="'dup' exists already"):
        await save_item_set(session, name="dup", item_ids=[fams[1][0]], rule={}, actor="k")
    assert await counts(session) == before


async def test_unknown_item_ids_are_refused_with_how_many(session: AsyncSession) -> None:
    fams = list((await families(session)).values())
    known = [fams[0][0], fams[1][0], fams[2][0]]
    strangers = [uuid.uuid4() for _ in range(7)]
    before = await counts(session)
    with pytest.raises(InvalidItemSet, match=r"^7 of 10 item ids are not in the bank: .* 2 more$"):
        await save_item_set(session, name="x", item_ids=known + strangers, rule={}, actor="k")
    # all or nothing: neither the set nor its known members were written
    assert await counts(session) == before
    assert await get_item_set(session, "x") is None
    with pytest.raises(InvalidItemSet, match=f"1 of 1 item ids .*: {strangers[0]}$"):
        await save_item_set(session, name="x", item_ids=[strangers[0]], rule={}, actor="k")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "needs a name"),
        ("a" * 101, "at most 100 characters, got 101"),
        ("nul\x00inside", "printable"),
        ("line\nbreak", "printable"),
        ("tab\there", "printable"),
        ("\x1b[31mred", "printable"),
        ("para\u2029sep", "printable"),
        ("lone \ud800 surrogate", "printable"),
        ("bidi\u202eoverride", "printable"),
        (" leading", "spaces"),
        ("trailing ", "spaces"),
    ],
)
async def test_a_hostile_name_is_refused(session: AsyncSession, name: str, why: str) -> None:
    fams = list((await families(session)).values())
    before = await counts(session)
    with pytest.raises(InvalidItemSet, match=why):
        await save_item_set(session, name=name, item_ids=[fams[0][0]], rule={}, actor="k")
    assert await counts(session) == before


@pytest.mark.parametrize("name", ["a" * 100, "κ > 0.8 — top half", "选择性子集", "x"])
async def test_printable_names_of_any_script_are_kept(session: AsyncSession, name: str) -> None:
    fams = list((await families(session)).values())
    record = await save_item_set(session, name=name, item_ids=[fams[0][0]], rule={}, actor="k")
    assert (await get_item_set(session, name)) is record


async def test_an_empty_set_a_bad_rule_or_actor_is_refused(session: AsyncSession) -> None:
    fams = list((await families(session)).values())
    with pytest.raises(InvalidItemSet, match="at least one item"):
        await save_item_set(session, name="empty", item_ids=[], rule={}, actor="k")
    for bad in ({"x": math.nan}, {"x": [math.inf]}, {"x": object()}):
        with pytest.raises(InvalidItemSet, match="JSON object of finite numbers"):
            await save_item_set(session, name="r", item_ids=[fams[0][0]], rule=bad, actor="k")
    with pytest.raises(InvalidItemSet, match="actor"):
        await save_item_set(session, name="r", item_ids=[fams[0][0]], rule={}, actor="k" * 65)
    assert await counts(session) == (0, 0)


async def test_delete_removes_the_set_and_its_membership_only(session: AsyncSession) -> None:
    fams = sorted((await families(session)).values(), key=len, reverse=True)
    await save_item_set(session, name="gone", item_ids=fams[0], rule={}, actor="k")
    kept = await save_item_set(session, name="kept", item_ids=fams[0], rule={}, actor="k")
    assert await delete_item_set(session, name="gone")
    assert not await delete_item_set(session, name="gone")
    assert [s.id for s in await list_item_sets(session)] == [kept.id]
    assert await counts(session) == (1, 6)
    assert await session.scalar(select(func.count()).select_from(Item)) == 12 * 6 + 12


# --- draw ----------------------------------------------------------------------------------


async def test_a_draw_serves_active_members_one_per_family(session: AsyncSession) -> None:
    fams = await families(session)
    multi = [f for f, items in fams.items() if len(items) == 6][:6]
    single = [f for f, items in fams.items() if len(items) == 1][:4]
    # the set: every item of six augmented families, and four open items
    members = [i for f in multi for i in fams[f]] + [fams[f][0] for f in single]
    # one family wholly flagged, one wholly retired, one moved to the anchor set, and in a
    # fourth family every item but one flagged; an open item flagged as well
    await set_status(session, fams[multi[0]], "flagged")
    await set_status(session, fams[multi[1]], "retired")
    await set_status(session, fams[multi[2]], "anchor")
    await set_status(session, fams[multi[3]][1:], "flagged")
    await set_status(session, fams[single[0]], "flagged")
    # items outside the set are never served either
    record = await save_item_set(session, name="s", item_ids=members, rule={}, actor="k")
    org = await make_org(session)

    sample = await draw_item_set_sample(session, org_id=org.id, set_id=record.id, n=50, seed="1")

    served_families = [i.family_id for i in sample.items]
    assert len(served_families) == len(set(served_families))
    assert set(served_families) == {multi[3], multi[4], multi[5], single[1], single[2], single[3]}
    assert {i.id for i in sample.items} <= set(members)
    statuses = await session.execute(
        select(Item.status).where(Item.id.in_([i.id for i in sample.items]))
    )
    assert set(statuses.scalars()) == {"active"}
    assert [i.id for i in sample.items if i.family_id == multi[3]] == [fams[multi[3]][0]]
    assert sample.shortfall == {"item_set": 44} and sample.n == 50 and sample.seed == "1"
    # the drawn rows carry the item's strata, as the anchor and stratified samples do
    rows = await session.execute(
        select(Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype).where(
            Item.id.in_([i.id for i in sample.items])
        )
    )
    assert {tuple(r) for r in rows.tuples()} == {tuple(i) for i in sample.items}


async def test_a_draw_skips_families_the_organisation_was_served(session: AsyncSession) -> None:
    fams = await families(session)
    order = sorted(fams, key=lambda f: (-len(fams[f]), f))  # augmented families first
    record = await save_item_set(
        session, name="s", item_ids=[fams[f][0] for f in order[:10]], rule={}, actor="k"
    )
    org, other = await make_org(session), await make_org(session)
    # served through an item outside the set (the family, not the item, counts), and
    # reserved only by an open session
    assert fams[order[0]][-1] != fams[order[0]][0]
    await record_exposure(session, org_id=org.id, item_ids=[fams[order[0]][-1]])
    await record_exposure(
        session,
        org_id=org.id,
        item_ids=[fams[order[1]][0], fams[order[2]][0]],
        session_id=uuid.uuid4(),
        delivered=False,
    )

    theirs = await draw_item_set_sample(session, org_id=org.id, set_id=record.id, n=10, seed="2")
    assert {i.family_id for i in theirs.items} == set(order[3:10])
    assert theirs.shortfall == {"item_set": 3}
    # another organisation is not affected by what the first was served
    fresh = await draw_item_set_sample(session, org_id=other.id, set_id=record.id, n=10, seed="2")
    assert {i.family_id for i in fresh.items} == set(order[:10]) and fresh.shortfall == {}


async def test_the_same_seed_draws_the_same_sample(session: AsyncSession) -> None:
    fams = await families(session)
    members = [i for items in fams.values() for i in items]
    record = await save_item_set(session, name="all", item_ids=members, rule={}, actor="k")
    org = await make_org(session)

    async def draw(seed: str, n: int = 12) -> list[uuid.UUID]:
        sample = await draw_item_set_sample(
            session, org_id=org.id, set_id=record.id, n=n, seed=seed
        )
        assert len(sample.items) == n and sample.shortfall == {}
        return [i.id for i in sample.items]

    first = await draw("seed-a")
    assert first == await draw("seed-a")
    others = {tuple(await draw(f"seed-{k}")) for k in range(5)}
    assert len(others) == 5 and tuple(first) not in others
    # the whole set in some order: the order and the variant chosen follow the seed
    whole = [await draw(f"w{k}", N_FAMILIES) for k in range(3)]
    assert len({tuple(w) for w in whole}) == 3
    unseeded = await draw_item_set_sample(session, org_id=org.id, set_id=record.id, n=3)
    assert len(unseeded.seed) >= 16 and len(unseeded.items) == 3


async def test_a_draw_takes_n_and_refuses_a_nonsense_n(session: AsyncSession) -> None:
    fams = await families(session)
    record = await save_item_set(
        session, name="s", item_ids=[items[0] for items in fams.values()], rule={}, actor="k"
    )
    org = await make_org(session)
    some = await draw_item_set_sample(session, org_id=org.id, set_id=record.id, n=5, seed="3")
    assert len(some.items) == 5 and some.shortfall == {}
    with pytest.raises(ValueError, match="at least 1"):
        await draw_item_set_sample(session, org_id=org.id, set_id=record.id, n=0)
    nothing = await draw_item_set_sample(session, org_id=org.id, set_id=uuid.uuid4(), n=4, seed="3")
    assert nothing.items == [] and nothing.shortfall == {"item_set": 4}
