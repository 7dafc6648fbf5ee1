"""Three-stage sampling against real databases (SQLite and PostgreSQL).

One bank per backend is built once for the module (10 disciplines, multiple-choice items
augmented into true/false and fill-in variants, plus open items); each test works in a
rolled-back transaction on top of it.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank import upsert
from bank.exposure import record_exposure
from bank.models import Exposure, Item, OrgStratumExclusion, Sample, SampleItem, Stratum
from bank.sampling.service import DrawnSample, draw_sample, persist_sample
from tests.support.database import module_bank
from tests.support.factories import make_org

bank_engine, session = module_bank(disciplines=10, subdisciplines=2, per_cell=60)


async def _bank_counts(session: AsyncSession) -> dict[tuple[str, str, str], int]:
    rows = await session.execute(
        select(Stratum.discipline, Stratum.qtype, Stratum.subdiscipline, Stratum.n_active)
    )
    return {(d, t, s): n for d, t, s, n in rows}


async def _families(session: AsyncSession, org_id: object) -> set[object]:
    rows = await session.execute(select(Exposure.family_id).where(Exposure.org_id == org_id))
    return set(rows.scalars())


def assert_quotas(sample: DrawnSample, bank: dict[tuple[str, str, str], int]) -> None:
    """Discipline quotas differ by <= 1; type and sub-discipline quotas within +-1 of
    the bank's proportions; no family twice."""
    items = sample.items
    assert len({i.id for i in items}) == len(items)
    assert len({i.family_id for i in items}) == len(items), "two items of one family"
    by_d = Counter(i.discipline for i in items)
    by_dt = Counter((i.discipline, i.qtype) for i in items)
    by_dts = Counter((i.discipline, i.qtype, i.subdiscipline) for i in items)
    assert max(by_d.values()) - min(by_d.values()) <= 1
    bank_d: Counter[str] = Counter()
    bank_dt: Counter[tuple[str, str]] = Counter()
    for (d, t, _), n in bank.items():
        bank_d[d] += n
        bank_dt[(d, t)] += n
    for (d, t), n in bank_dt.items():
        assert abs(by_dt[(d, t)] - by_d[d] * n / bank_d[d]) < 1, (d, t)
    for (d, t, s), n in bank.items():
        assert abs(by_dts[(d, t, s)] - by_dt[(d, t)] * n / bank_dt[(d, t)]) < 1, (d, t, s)


async def test_a_sample_of_1000_meets_every_quota_and_has_no_family_twice(
    session: AsyncSession,
) -> None:
    org = await make_org(session)
    sample = await draw_sample(session, org_id=org.id, n=1000)
    assert len(sample.items) == 1000
    assert sample.shortfall == {"unplaced": 0}
    assert_quotas(sample, await _bank_counts(session))
    assert len(sample.seed) == 32 and int(sample.seed, 16) >= 0


async def test_the_same_seed_rederives_the_same_sample(session: AsyncSession) -> None:
    org = await make_org(session)
    first = await draw_sample(session, org_id=org.id, n=300)
    again = await draw_sample(session, org_id=org.id, n=300, seed=first.seed)
    other = await draw_sample(session, org_id=org.id, n=300)
    assert [i.id for i in again.items] == [i.id for i in first.items]
    assert {i.id for i in other.items} != {i.id for i in first.items}


async def test_exposed_families_are_never_sampled_again_for_that_org_only(
    session: AsyncSession,
) -> None:
    org, neighbour = await make_org(session), await make_org(session)
    first = await draw_sample(session, org_id=org.id, n=1000)
    assert (
        await record_exposure(session, org_id=org.id, item_ids=[i.id for i in first.items]) == 1000
    )
    exposed = await _families(session, org.id)
    second = await draw_sample(session, org_id=org.id, n=1000)
    assert not exposed & {i.family_id for i in second.items}
    assert len(second.items) == 1000
    theirs = await draw_sample(session, org_id=neighbour.id, n=1000, seed=first.seed)
    assert [i.id for i in theirs.items] == [i.id for i in first.items]


async def test_exclusion_counters_follow_exposure_across_strata(session: AsyncSession) -> None:
    org = await make_org(session)
    mc = (
        await session.execute(
            select(Item).where(Item.variant == "original", Item.qtype == "multiple_choice").limit(1)
        )
    ).scalar_one()
    await record_exposure(session, org_id=org.id, item_ids=[mc.id])
    await record_exposure(session, org_id=org.id, item_ids=[mc.id])  # idempotent
    counted = (
        await session.execute(
            select(func.sum(OrgStratumExclusion.n_items)).where(
                OrgStratumExclusion.org_id == org.id
            )
        )
    ).scalar_one()
    family_size = (
        await session.execute(select(func.count()).select_from(Item).where(Item.family_id == mc.id))
    ).scalar_one()
    assert counted == family_size == 6


async def test_exhausted_bank_reports_the_shortfall(session: AsyncSession) -> None:
    org = await make_org(session)
    families = (
        await session.execute(select(func.count(func.distinct(Item.family_id))))
    ).scalar_one()
    sample = await draw_sample(session, org_id=org.id, n=families + 50)
    assert len(sample.items) == families  # at most one item per family
    assert sample.shortfall["unplaced"] == 50
    assert len({i.family_id for i in sample.items}) == families


async def test_persisting_records_positions_and_a_dry_run_records_nothing(
    session: AsyncSession,
) -> None:
    org = await make_org(session)
    before = (await session.execute(select(func.count()).select_from(Sample))).scalar_one()
    sample = await draw_sample(session, org_id=org.id, n=50)
    assert (await session.execute(select(func.count()).select_from(Sample))).scalar_one() == before
    record = await persist_sample(session, org_id=org.id, sample=sample)
    stored = (
        (
            await session.execute(
                select(SampleItem.item_id)
                .where(SampleItem.sample_id == record.id)
                .order_by(SampleItem.position)
            )
        )
        .scalars()
        .all()
    )
    assert stored == [i.id for i in sample.items]
    assert record.seed == sample.seed and record.n_drawn == 50


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 600),
    exposed_share=st.floats(0.0, 0.8),
    rng_seed=st.integers(0, 2**32 - 1),
)
async def test_property_random_exposure_never_leaks_and_quotas_hold(
    session: AsyncSession, n: int, exposed_share: float, rng_seed: int
) -> None:
    nested = await session.begin_nested()
    try:
        org = await make_org(session)
        families = list((await session.execute(select(Item.family_id).distinct())).scalars())
        rng = random.Random(rng_seed)
        chosen = rng.sample(families, int(len(families) * exposed_share))
        items = (
            (
                await session.execute(
                    select(Item.id).where(Item.family_id.in_(chosen), Item.variant == "original")
                )
            )
            .scalars()
            .all()
        )
        await record_exposure(session, org_id=org.id, item_ids=list(items))
        sample = await draw_sample(session, org_id=org.id, n=n, seed=f"{rng_seed:x}")
        assert not set(chosen) & {i.family_id for i in sample.items}
        assert len({i.family_id for i in sample.items}) == len(sample.items)
        assert len(sample.items) + sample.shortfall["unplaced"] == n
        if sample.shortfall == {"unplaced": 0}:
            assert_quotas(sample, await _bank_counts(session))
    finally:
        await nested.rollback()


async def test_retired_items_are_never_drawn_even_when_counters_lag(
    session: AsyncSession,
) -> None:
    """All but five items of one stratum retired behind the counters' back: the draw walks
    the stratum in a few growing rounds instead of giving up, and takes only active items."""
    org = await make_org(session)
    stratum = (
        await session.execute(
            select(Stratum).where(
                Stratum.discipline == "d0",
                Stratum.qtype == "short_answer",
                Stratum.subdiscipline == "S0",
            )
        )
    ).scalar_one()
    ids = list(
        (await session.execute(select(Item.id).where(Item.stratum_id == stratum.id))).scalars()
    )
    keep = set(ids[:5])
    await session.execute(
        update(Item).where(Item.id.in_([i for i in ids if i not in keep])).values(status="retired")
    )
    for seed in ("1", "2", "3"):
        sample = await draw_sample(session, org_id=org.id, n=400, seed=seed, disciplines=["d0"])
        drawn = {
            i.id for i in sample.items if i.subdiscipline == "S0" and i.qtype == "short_answer"
        }
        assert drawn <= keep
        assert len(sample.items) + sample.shortfall["unplaced"] == 400


async def test_exposure_of_many_families_at_once_is_recorded_in_chunks(
    session: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statements are cut so none exceeds the drivers' parameter limit; here the limit is
    lowered so 2,400 families need 96 statements, and every family is counted once."""
    monkeypatch.setattr(upsert, "MAX_PARAMETERS", 100)
    org = await make_org(session)
    ids = list((await session.execute(select(Item.id).where(Item.variant == "original"))).scalars())
    assert await record_exposure(session, org_id=org.id, item_ids=ids) == len(ids) == 2_400
    assert await record_exposure(session, org_id=org.id, item_ids=ids) == 0
    total = (
        await session.execute(
            select(func.sum(OrgStratumExclusion.n_items)).where(
                OrgStratumExclusion.org_id == org.id
            )
        )
    ).scalar_one()
    assert total == (await session.execute(select(func.count()).select_from(Item))).scalar_one()
