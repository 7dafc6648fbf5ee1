"""The private anchor set (ReLE §4.3, "Private Held-out Validation").

A set of item families withheld from every ordinary session: their items get status
``anchor``, which the stratified sampler never draws (it serves ``active`` items only), so
they reach a model only through an anchor-set session, and each family at most once per
organisation like any other item. A model's score on them against its score in ordinary
sessions is its generalisation gap (``judge.contamination.generalisation_gap``).

Whole families move: a true/false or fill-in variant of an anchor question left active
would leak the question through ordinary sessions.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass

from sqlalchemy import exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.locks import lock
from bank.models import Exposure, Item, Stratum
from bank.sampling.service import DrawnSample, SampledItem, new_seed

ANCHOR = "anchor"
ACTIVE = "active"


@dataclass(frozen=True, slots=True)
class AnchorSetChange:
    """What :func:`designate_anchor_set` moved: families and items, by discipline."""

    families: int
    items: int
    by_discipline: dict[str, int]


def _spread(available: dict[str, int], size: int) -> dict[str, int]:
    """``size`` families over disciplines as evenly as their supply allows (water-filling):
    every discipline gets the same share unless it has fewer families, whose remainder
    goes to the others. Pure; disciplines in sorted order break ties."""
    quota = dict.fromkeys(available, 0)
    left = min(size, sum(available.values()))
    while left > 0:
        open_ = sorted(d for d in available if quota[d] < available[d])
        share = max(1, left // len(open_))
        for discipline in open_:
            take = min(share, available[discipline] - quota[discipline], left)
            quota[discipline] += take
            left -= take
            if left == 0:
                break
    return quota


async def designate_anchor_set(
    session: AsyncSession, *, size: int, seed: str | None = None
) -> AnchorSetChange:
    """Move ``size`` item families that no organisation has ever been served into the
    anchor set, spread evenly over disciplines (by each family's first item), chosen at
    random with ``seed``. Raises ValueError when fewer unexposed families exist."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    await lock(session, "bank:anchor-set")
    never_served = ~exists().where(Exposure.family_id == Item.family_id)
    rows = await session.execute(
        select(Item.family_id, func.min(Item.discipline))
        .where(Item.status == ACTIVE, never_served)
        .group_by(Item.family_id)
        .order_by(Item.family_id)
    )
    families: dict[str, list[uuid.UUID]] = defaultdict(list)
    for family_id, discipline in rows.tuples():
        families[discipline].append(family_id)
    total = sum(len(f) for f in families.values())
    if total < size:
        raise ValueError(
            f"only {total} item families were never served to anyone; cannot withhold {size}"
        )
    rng = random.Random(seed or new_seed())
    quota = _spread({d: len(f) for d, f in families.items()}, size)
    chosen = [f for d in sorted(families) for f in rng.sample(families[d], quota[d])]
    moved = await _move_to_anchor(session, chosen)
    by_discipline = {d: n for d, n in quota.items() if n}
    return AnchorSetChange(families=len(chosen), items=moved, by_discipline=by_discipline)


async def _move_to_anchor(session: AsyncSession, family_ids: list[uuid.UUID]) -> int:
    """Set the families' active items to ``anchor`` and keep the strata's counts of active
    items (what the sampler plans with) in step."""
    per_stratum: Counter[int] = Counter()
    for start in range(0, len(family_ids), 500):
        chunk = family_ids[start : start + 500]
        result = await session.execute(
            update(Item)
            .where(Item.family_id.in_(chunk), Item.status == ACTIVE)
            .values(status=ANCHOR)
            .returning(Item.stratum_id)
        )
        per_stratum.update(result.scalars().all())
    for stratum_id, n in per_stratum.items():
        await session.execute(
            update(Stratum).where(Stratum.id == stratum_id).values(n_active=Stratum.n_active - n)
        )
    return sum(per_stratum.values())


async def draw_anchor_sample(
    session: AsyncSession, *, org_id: uuid.UUID, n: int, seed: str | None = None
) -> DrawnSample:
    """Up to ``n`` anchor-set items the organisation has not been served, one per family,
    in a random order derived from ``seed`` (the anchor set is small: read whole)."""
    seed = seed or new_seed()
    seen = exists().where(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
    rows = await session.execute(
        select(Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype)
        .where(Item.status == ANCHOR, ~seen)
        .order_by(Item.family_id, Item.id)
    )
    by_family: dict[uuid.UUID, list[SampledItem]] = defaultdict(list)
    for row in rows.tuples():
        by_family[row[1]].append(SampledItem(*row))
    rng = random.Random(seed)
    picks = [rng.choice(items) for _family, items in sorted(by_family.items())]
    rng.shuffle(picks)
    chosen = picks[:n]
    shortfall = {"anchor_set": n - len(chosen)} if len(chosen) < n else {}
    return DrawnSample(seed=seed, n=n, items=chosen, shortfall=shortfall)
