"""The private anchor set (bank.anchor_set) against real databases (SQLite and PostgreSQL).

One bank per backend is built for the module with unequal disciplines (Alpha 5 families,
Beta 20, Gamma 20; multiple-choice families augmented into six items over three strata,
open items alone); every test works in a rolled-back transaction on top of it.
"""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bank.anchor_set import _spread, designate_anchor_set, draw_anchor_sample
from bank.exposure import record_exposure
from bank.importer import import_records
from bank.models import Exposure, Item, OrgStratumExclusion, SampleItem, Stratum
from bank.sampling.service import allocate_sample, draw_sample
from server.database import create_engine, unit_of_work
from tests.support.database import make_database_url, rolled_back_session
from tests.support.factories import make_org, mc_record, open_record, raw_records

# discipline -> subdiscipline -> (multiple-choice families, open families)
LAYOUT = {
    "alpha": {"S0": (3, 2)},
    "beta": {"S0": (6, 4), "S1": (6, 4)},
    "gamma": {"S0": (10, 10)},
}
FAMILIES = {"alpha": 5, "beta": 20, "gamma": 20}
TOTAL_FAMILIES = 45
MC_FAMILY_SIZE = 6  # original, four true/false variants, fill-in


# --- _spread (pure) ------------------------------------------------------------------------


def reference_spread(available: dict[str, int], size: int) -> dict[str, int]:
    """Water-filling written out: the highest level L with sum(min(a, L)) <= target, then
    one more for the first disciplines (sorted) that could take more than L."""
    target = min(size, sum(available.values()))
    if target == sum(available.values()):
        return dict(available)
    level = 0
    while sum(min(a, level + 1) for a in available.values()) <= target:
        level += 1
    quota = {d: min(a, level) for d, a in available.items()}
    above = sorted(d for d, a in available.items() if a > level)
    for discipline in above[: target - sum(quota.values())]:
        quota[discipline] += 1
    return quota


availability = st.dictionaries(
    st.text(alphabet="abcdefghij", min_size=1, max_size=3), st.integers(0, 40), max_size=9
)


@settings(max_examples=400, deadline=None)
@given(available=availability, size=st.integers(0, 400))
def test_spread_is_water_filling(available: dict[str, int], size: int) -> None:
    quota = _spread(dict(available), size)
    assert set(quota) == set(available)
    assert sum(quota.values()) == min(size, sum(available.values()))
    assert all(0 <= quota[d] <= available[d] for d in available)
    # A discipline that could have taken more is never more than one below any other:
    # no quota exceeds (the lowest quota among unsaturated disciplines) + 1.
    unsaturated = sorted(d for d in available if quota[d] < available[d])
    if unsaturated:
        floor = min(quota[d] for d in unsaturated)
        assert max(quota.values()) <= floor + 1
        # ties broken in sorted order: the extra one goes to the earlier disciplines
        extras = [quota[d] - floor for d in unsaturated]
        assert extras == sorted(extras, reverse=True)
    assert quota == reference_spread(available, size)


@settings(max_examples=200, deadline=None)
@given(available=availability, size=st.integers(0, 400), order_seed=st.integers(0, 2**16))
def test_spread_does_not_depend_on_the_order_of_the_disciplines(
    available: dict[str, int], size: int, order_seed: int
) -> None:
    keys = list(available)
    random.Random(order_seed).shuffle(keys)
    assert _spread({k: available[k] for k in keys}, size) == _spread(dict(available), size)


@pytest.mark.parametrize(
    ("available", "size", "expected"),
    [
        ({"a": 1, "b": 10, "c": 10}, 15, {"a": 1, "b": 7, "c": 7}),
        ({"c": 5, "a": 5, "b": 5}, 7, {"a": 3, "b": 2, "c": 2}),
        ({"a": 2, "b": 3}, 99, {"a": 2, "b": 3}),
        ({"a": 0, "b": 4}, 3, {"a": 0, "b": 3}),
        ({"a": 4, "b": 4}, 0, {"a": 0, "b": 0}),
        ({}, 3, {}),
    ],
)
def test_spread_examples(available: dict[str, int], size: int, expected: dict[str, int]) -> None:
    assert _spread(available, size) == expected


# --- the bank ----------------------------------------------------------------------------


def bank_records() -> list[dict[str, Any]]:
    records = []
    for discipline, subs in LAYOUT.items():
        for sub, (n_mc, n_open) in subs.items():
            for i in range(n_mc):
                records.append(
                    mc_record(
                        i,
                        discipline=discipline,
                        subdiscipline=sub,
                        question=f"[{discipline}/{sub}/mc/{i}] {uuid.uuid4().hex}",
                    )
                )
            for i in range(n_open):
                records.append(
                    open_record(
                        i,
                        discipline=discipline,
                        subdiscipline=sub,
                        question=f"[{discipline}/{sub}/open/{i}] {uuid.uuid4().hex} why?",
                    )
                )
    return records


@pytest.fixture(scope="module")
async def anchor_engine(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncEngine]:
    url = await make_database_url(backend, request, Path(tmp_path_factory.mktemp("anchor")))
    engine = create_engine(url)
    async with unit_of_work(engine) as session:
        await import_records(
            session, raw_records(bank_records()), augment=True, add_disciplines=True
        )
    yield engine
    await engine.dispose()


@pytest.fixture
async def session(anchor_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    async with rolled_back_session(anchor_engine) as s:
        yield s


# --- database helpers ----------------------------------------------------------------------


async def family_statuses(session: AsyncSession) -> dict[uuid.UUID, Counter[str]]:
    rows = await session.execute(select(Item.family_id, Item.status))
    out: dict[uuid.UUID, Counter[str]] = defaultdict(Counter)
    for family_id, status in rows.tuples():
        out[family_id][status] += 1
    return out


async def anchor_families(session: AsyncSession) -> set[uuid.UUID]:
    rows = await session.execute(select(Item.family_id).where(Item.status == "anchor").distinct())
    return set(rows.scalars())


async def families_by_discipline(session: AsyncSession) -> dict[str, list[uuid.UUID]]:
    rows = await session.execute(
        select(Item.discipline, Item.family_id)
        .where(Item.variant == "original")
        .order_by(Item.family_id)
    )
    out: dict[str, list[uuid.UUID]] = defaultdict(list)
    for discipline, family_id in rows.tuples():
        out[discipline].append(family_id)
    return out


async def discipline_of(session: AsyncSession) -> dict[uuid.UUID, str]:
    rows = await session.execute(
        select(Item.family_id, Item.discipline).where(Item.variant == "original")
    )
    return dict(rows.tuples().all())


async def items_of(session: AsyncSession, family_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    rows = await session.execute(select(Item.id).where(Item.family_id.in_(family_ids)))
    return list(rows.scalars())


async def n_active_by_stratum(session: AsyncSession) -> dict[int, int]:
    rows = await session.execute(select(Stratum.id, Stratum.n_active))
    return dict(rows.tuples().all())


async def items_by_stratum(session: AsyncSession, status: str) -> Counter[int]:
    rows = await session.execute(
        select(Item.stratum_id, func.count()).where(Item.status == status).group_by(Item.stratum_id)
    )
    return Counter(dict(rows.tuples().all()))


async def status_of(session: AsyncSession, item_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    rows = await session.execute(select(Item.id, Item.status).where(Item.id.in_(item_ids)))
    return dict(rows.tuples().all())


async def expose_families(
    session: AsyncSession,
    org_id: uuid.UUID,
    family_ids: list[uuid.UUID],
    *,
    delivered: bool = True,
    variant: bool = False,
) -> None:
    """Serve one item of each family to ``org_id`` (a variant where there is one, if
    ``variant``), recorded as delivered or only reserved by a session."""
    chosen: dict[uuid.UUID, uuid.UUID] = {}
    rows = await session.execute(
        select(Item.family_id, Item.id, Item.variant)
        .where(Item.family_id.in_(family_ids))
        .order_by(Item.family_id, Item.variant)
    )
    for family_id, item_id, name in rows.tuples():
        if family_id not in chosen or (variant and name != "original"):
            chosen[family_id] = item_id
    await record_exposure(
        session,
        org_id=org_id,
        item_ids=list(chosen.values()),
        session_id=None if delivered else uuid.uuid4(),
        delivered=delivered,
    )


async def test_the_bank_is_as_laid_out(session: AsyncSession) -> None:
    families = await families_by_discipline(session)
    assert {d: len(f) for d, f in families.items()} == FAMILIES
    statuses = await family_statuses(session)
    assert len(statuses) == TOTAL_FAMILIES
    assert sorted(sum(c.values()) for c in statuses.values()) == [1] * 20 + [6] * 25
    assert await n_active_by_stratum(session) == dict(await items_by_stratum(session, "active"))


# --- designate_anchor_set ------------------------------------------------------------------


async def test_designation_moves_whole_never_served_families_spread_over_disciplines(
    session: AsyncSession,
) -> None:
    families = await families_by_discipline(session)
    one, two = await make_org(session), await make_org(session)
    # three Alpha families delivered to one organisation (through a variant where there is
    # one), five Beta families only reserved by an open session of another
    exposed = families["alpha"][:3] + families["beta"][:5]
    await expose_families(session, one.id, families["alpha"][:3], variant=True)
    await expose_families(session, two.id, families["beta"][:5], delivered=False)
    before = await n_active_by_stratum(session)

    change = await designate_anchor_set(session, size=20, seed="a1")

    chosen = await anchor_families(session)
    assert len(chosen) == change.families == 20
    assert not chosen & set(exposed)
    statuses = await family_statuses(session)
    for family in chosen:
        assert set(statuses[family]) == {"anchor"}, "a family was split"
    for family in set(statuses) - chosen:
        assert set(statuses[family]) == {"active"}
    moved = await items_by_stratum(session, "anchor")
    assert change.items == sum(moved.values()) == sum(sum(statuses[f].values()) for f in chosen)
    # unexposed supply: Alpha 2, Beta 15, Gamma 20 -> water-filling of 20 gives 2, 9, 9
    disciplines = await discipline_of(session)
    assert Counter(disciplines[f] for f in chosen) == {"alpha": 2, "beta": 9, "gamma": 9}
    assert change.by_discipline == {"alpha": 2, "beta": 9, "gamma": 9}
    after = await n_active_by_stratum(session)
    assert {s: before[s] - after[s] for s in before} == {s: moved[s] for s in before}
    active = await items_by_stratum(session, "active")
    assert after == {s: active[s] for s in after}


async def test_designation_with_a_full_supply_breaks_ties_in_discipline_order(
    session: AsyncSession,
) -> None:
    change = await designate_anchor_set(session, size=7, seed="b2")
    disciplines = await discipline_of(session)
    chosen = await anchor_families(session)
    assert Counter(disciplines[f] for f in chosen) == {"alpha": 3, "beta": 2, "gamma": 2}
    assert change.by_discipline == {"alpha": 3, "beta": 2, "gamma": 2}


async def test_designation_refuses_more_families_than_were_never_served(
    session: AsyncSession,
) -> None:
    families = await families_by_discipline(session)
    org = await make_org(session)
    await expose_families(session, org.id, families["gamma"][:8])
    before = await n_active_by_stratum(session)
    with pytest.raises(ValueError, match=r"only 37 item families .* cannot withhold 38"):
        await designate_anchor_set(session, size=38, seed="c3")
    assert await anchor_families(session) == set()
    assert await n_active_by_stratum(session) == before
    with pytest.raises(ValueError, match="at least 1"):
        await designate_anchor_set(session, size=0)
    change = await designate_anchor_set(session, size=37, seed="c3")
    assert change.families == 37
    assert await anchor_families(session) == (
        {f for fs in families.values() for f in fs} - set(families["gamma"][:8])
    )
    assert change.by_discipline == {"alpha": 5, "beta": 20, "gamma": 12}


async def test_a_second_designation_adds_other_families(session: AsyncSession) -> None:
    await designate_anchor_set(session, size=15, seed="d4")
    first = await anchor_families(session)
    change = await designate_anchor_set(session, size=20, seed="d4")
    assert change.families == 20
    assert len(await anchor_families(session)) == 35
    with pytest.raises(ValueError, match=re.escape("only 10 item families")):
        await designate_anchor_set(session, size=11, seed="d4")
    assert first < await anchor_families(session)


async def test_the_same_seed_designates_the_same_families(session: AsyncSession) -> None:
    chosen = []
    for seed in ("e5", "e5", "e6"):
        nested = await session.begin_nested()
        try:
            await designate_anchor_set(session, size=12, seed=seed)
            chosen.append(await anchor_families(session))
        finally:
            await nested.rollback()
    assert await anchor_families(session) == set()
    assert chosen[0] == chosen[1]
    assert chosen[0] != chosen[2]


# --- ordinary sampling after designation -----------------------------------------------------


async def test_ordinary_sampling_never_serves_the_anchor_set(session: AsyncSession) -> None:
    families = await families_by_discipline(session)
    exposed_org = await make_org(session)
    await expose_families(session, exposed_org.id, families["alpha"][:3])
    await designate_anchor_set(session, size=20, seed="f7")
    anchors = await anchor_families(session)

    fresh = await make_org(session)
    for seed in ("1", "2", "3"):
        sample = await draw_sample(session, org_id=fresh.id, n=TOTAL_FAMILIES, seed=seed)
        drawn = {i.family_id for i in sample.items}
        assert not drawn & anchors
        assert set((await status_of(session, [i.id for i in sample.items])).values()) == {"active"}
        # every other family is still served, one item each
        assert len(sample.items) == len(drawn) == TOTAL_FAMILIES - 20
        assert len(sample.items) + sample.shortfall["unplaced"] == TOTAL_FAMILIES
    # the organisation served three Alpha families loses exactly those as well
    theirs = await draw_sample(session, org_id=exposed_org.id, n=TOTAL_FAMILIES, seed="4")
    assert len(theirs.items) == TOTAL_FAMILIES - 20 - 3
    assert not {i.family_id for i in theirs.items} & (anchors | set(families["alpha"][:3]))

    record, allocated = await allocate_sample(session, org_id=fresh.id, n=TOTAL_FAMILIES)
    stored = list(
        (
            await session.execute(
                select(SampleItem.family_id).where(SampleItem.sample_id == record.id)
            )
        ).scalars()
    )
    assert len(stored) == len(allocated.items) == TOTAL_FAMILIES - 20
    assert not set(stored) & anchors


# --- draw_anchor_sample ----------------------------------------------------------------------


async def test_anchor_sample_serves_only_anchor_items_one_per_family(
    session: AsyncSession,
) -> None:
    await designate_anchor_set(session, size=12, seed="g8")
    anchors = await anchor_families(session)
    org = await make_org(session)

    whole = await draw_anchor_sample(session, org_id=org.id, n=12, seed="s1")
    assert whole.seed == "s1" and whole.n == 12 and whole.shortfall == {}
    assert len(whole.items) == 12
    assert {i.family_id for i in whole.items} == anchors
    rows = await session.execute(
        select(Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype).where(
            Item.id.in_([i.id for i in whole.items])
        )
    )
    truth = {row[0]: tuple(row) for row in rows.tuples()}
    assert all(tuple(i) == truth[i.id] for i in whole.items)
    assert set((await status_of(session, [i.id for i in whole.items])).values()) == {"anchor"}

    part = await draw_anchor_sample(session, org_id=org.id, n=5, seed="s2")
    assert len(part.items) == len({i.family_id for i in part.items}) == 5
    assert {i.family_id for i in part.items} <= anchors and part.shortfall == {}

    short = await draw_anchor_sample(session, org_id=org.id, n=20, seed="s3")
    assert len(short.items) == len({i.family_id for i in short.items}) == 12
    assert short.shortfall == {"anchor_set": 8}


async def test_anchor_sample_is_deterministic_for_a_seed(session: AsyncSession) -> None:
    await designate_anchor_set(session, size=12, seed="h9")
    org = await make_org(session)
    one = await draw_anchor_sample(session, org_id=org.id, n=8, seed="abc")
    two = await draw_anchor_sample(session, org_id=org.id, n=8, seed="abc")
    other = await draw_anchor_sample(session, org_id=org.id, n=8, seed="abd")
    assert one.items == two.items
    assert one.items != other.items
    unseeded = await draw_anchor_sample(session, org_id=org.id, n=8)
    assert re.fullmatch(r"[0-9a-f]{32}", unseeded.seed)
    again = await draw_anchor_sample(session, org_id=org.id, n=8, seed=unseeded.seed)
    assert again.items == unseeded.items


async def test_anchor_sample_excludes_families_the_organisation_was_served(
    session: AsyncSession,
) -> None:
    await designate_anchor_set(session, size=12, seed="i10")
    anchors = await anchor_families(session)
    org, other = await make_org(session), await make_org(session)
    first = await draw_anchor_sample(session, org_id=org.id, n=5, seed="t1")
    served = {i.family_id for i in first.items}
    # as an anchor-set session does: reserved by the session, not yet delivered
    await record_exposure(
        session,
        org_id=org.id,
        item_ids=[i.id for i in first.items],
        session_id=uuid.uuid4(),
        delivered=False,
    )
    for seed in ("t2", "t3", "t4"):
        rest = await draw_anchor_sample(session, org_id=org.id, n=12, seed=seed)
        assert {i.family_id for i in rest.items} == anchors - served
        assert rest.shortfall == {"anchor_set": 5}
    assert len((await draw_anchor_sample(session, org_id=other.id, n=12, seed="t2")).items) == 12
    # anchor families served through anchor sessions do not disturb ordinary sampling
    excluded = (
        await session.execute(
            select(func.coalesce(func.sum(OrgStratumExclusion.n_items), 0)).where(
                OrgStratumExclusion.org_id == org.id
            )
        )
    ).scalar_one()
    assert excluded == 0
    ordinary = await draw_sample(session, org_id=org.id, n=TOTAL_FAMILIES, seed="t5")
    assert len(ordinary.items) == TOTAL_FAMILIES - 12
    # and nothing of it touches the exposure of the other organisation
    assert (
        await session.execute(
            select(func.count()).select_from(Exposure).where(Exposure.org_id == other.id)
        )
    ).scalar_one() == 0


async def test_anchor_sample_of_an_empty_anchor_set_is_all_shortfall(
    session: AsyncSession,
) -> None:
    org = await make_org(session)
    sample = await draw_anchor_sample(session, org_id=org.id, n=3, seed="u1")
    assert sample.items == [] and sample.shortfall == {"anchor_set": 3}
