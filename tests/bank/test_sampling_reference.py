"""The database draw against a reference that reads every item (SQLite and PostgreSQL).

``draw_sample`` fetches only the slots its seeded rank streams point at, in rounds sized
by each stratum's acceptance rate, and on PostgreSQL lets the server drop ineligible items.
None of that may change the sample: it must equal walking every stratum's whole stream over
the whole table (``reference_sample``), with exposure, retired items and families whose
variants sit in other strata.
"""

from __future__ import annotations

import random
import uuid

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.disciplines import sampled_disciplines
from bank.exposure import record_exposure
from bank.models import SLOT_RANK_BITS, Exposure, Item, OrgStratumExclusion, Stratum
from bank.sampling.draw import Candidate, RankStream, delivery_order
from bank.sampling.draw import select as select_items
from bank.sampling.plan import StratumSupply, plan_quotas
from bank.sampling.service import draw_sample
from bank.stratum_key import StratumKey
from tests.support.database import module_bank
from tests.support.factories import make_org

bank_engine, session = module_bank(disciplines=4, subdisciplines=3, per_cell=25)


async def reference_sample(
    session: AsyncSession, org_id: uuid.UUID, n: int, seed: str
) -> list[uuid.UUID]:
    """Every stratum's whole stream over every item, planned and selected as the draw does."""
    excluded = dict(
        (
            await session.execute(
                select(OrgStratumExclusion.stratum_id, OrgStratumExclusion.n_items).where(
                    OrgStratumExclusion.org_id == org_id
                )
            )
        )
        .tuples()
        .all()
    )
    exposed = set(
        (
            await session.execute(select(Exposure.family_id).where(Exposure.org_id == org_id))
        ).scalars()
    )
    by_slot = {
        slot: (item_id, family_id, status)
        for slot, item_id, family_id, status in await session.execute(
            select(Item.slot, Item.id, Item.family_id, Item.status)
        )
    }
    supply: dict[StratumKey, StratumSupply] = {}
    candidates: dict[StratumKey, list[Candidate]] = {}
    for stratum in (await session.execute(select(Stratum))).scalars():
        key = StratumKey(stratum.discipline, stratum.qtype, stratum.subdiscipline)
        available = max(0, stratum.n_active - excluded.get(stratum.id, 0))
        supply[key] = StratumSupply(key, stratum.n_active, available)
        walk = RankStream(seed, key, stratum.n_slots).extend(stratum.n_slots)
        candidates[key] = []
        for rank in walk:
            found = by_slot.get((stratum.id << SLOT_RANK_BITS) | rank)
            if found is not None:
                item_id, family_id, status = found
                eligible = status == "active" and family_id not in exposed
                candidates[key].append(Candidate(rank, item_id, family_id, eligible))
    disciplines = await sampled_disciplines(session)
    while True:
        plan = plan_quotas(n, list(supply.values()), disciplines=disciplines, tie_seed=seed)
        selection = select_items(plan.quotas, candidates)
        if not selection.starved:
            break
        for key in selection.starved:
            supply[key] = StratumSupply(key, supply[key].bank, len(selection.chosen[key]))
    chosen = [c.item_id for cands in selection.chosen.values() for c in cands]
    return delivery_order(seed, chosen)


async def test_the_draw_equals_walking_every_stream_over_the_whole_table(
    session: AsyncSession,
) -> None:
    org = await make_org(session)
    rng = random.Random(11)
    ids = list((await session.execute(select(Item.id).order_by(Item.id))).scalars())
    await record_exposure(session, org_id=org.id, item_ids=rng.sample(ids, len(ids) // 3))
    retired = rng.sample(ids, len(ids) // 10)  # behind the counters' back: they lag
    await session.execute(update(Item).where(Item.id.in_(retired)).values(status="retired"))
    total = (await session.execute(select(func.count()).select_from(Item))).scalar_one()
    for seed, n in (("a", 40), ("b", 150), ("c", total)):
        drawn = await draw_sample(session, org_id=org.id, n=n, seed=seed)
        assert [i.id for i in drawn.items] == await reference_sample(session, org.id, n, seed)
    assert 0 < len(drawn.items) < total  # the last one ran strata dry
