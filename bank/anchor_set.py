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
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.locks import lock
from bank.models import Exposure, Item, ItemStatusChange, Stratum
from bank.sampling.service import DrawnSample, SampledItem, new_seed
from bank.sampling.source import AnchorSource

ANCHOR = "anchor"
ACTIVE = "active"
HISTORY_ACTOR = "anchor-set"
"""The actor of the status-history rows of items moved into the anchor set."""
HISTORY_REASON = "anchor_set"


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
    """Set the families' active items to ``anchor``, write one status-history row per
    moved item (``item_status_changes``, as every status change does) and keep the strata's
    counts of active items (what the sampler plans with) in step."""
    per_stratum: Counter[int] = Counter()
    at = utcnow()
    for start in range(0, len(family_ids), 500):
        chunk = family_ids[start : start + 500]
        result = await session.execute(
            update(Item)
            .where(Item.family_id.in_(chunk), Item.status == ACTIVE)
            .values(status=ANCHOR)
            .returning(Item.id, Item.stratum_id)
        )
        moved = result.tuples().all()
        per_stratum.update(stratum_id for _, stratum_id in moved)
        if moved:
            await session.execute(
                insert(ItemStatusChange),
                [
                    {
                        "item_id": item_id,
                        "from_status": ACTIVE,
                        "to_status": ANCHOR,
                        "reasons": [HISTORY_REASON],
                        "actor": HISTORY_ACTOR,
                        "created_at": at,
                    }
                    for item_id, _ in moved
                ],
            )
    for stratum_id, n in per_stratum.items():
        await session.execute(
            update(Stratum).where(Stratum.id == stratum_id).values(n_active=Stratum.n_active - n)
        )
    return sum(per_stratum.values())


async def draw_anchor_sample(
    session: AsyncSession, *, org_id: uuid.UUID, n: int, seed: str | None = None
) -> DrawnSample:
    """Up to ``n`` anchor-set items the organisation has not been served, one per family,
    in a random order derived from ``seed`` (the anchor set is small: read whole). Its
    source is an ``AnchorSource``."""
    seed = seed or new_seed()
    seen = exists().where(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
    rows = await session.execute(
        select(Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype)
        .where(Item.status == ANCHOR, ~seen)
        .order_by(Item.family_id, Item.id)
    )
    return pick_anchor_sample([SampledItem(*row) for row in rows.tuples()], n=n, seed=seed)


def pick_anchor_sample(candidates: Sequence[SampledItem], *, n: int, seed: str) -> DrawnSample:
    """The anchor sample of ``seed`` from ``candidates`` (the anchor items the organisation
    was not served, by family then id): one item per family, shuffled, the first ``n``;
    its source is an ``AnchorSource``. Pure: the re-derivation of a past anchor sample
    (``bank.sampling.as_of``) calls it on the state as of the draw."""
    by_family: dict[uuid.UUID, list[SampledItem]] = defaultdict(list)
    for item in candidates:
        by_family[item.family_id].append(item)
    rng = random.Random(seed)
    picks = [rng.choice(items) for _family, items in sorted(by_family.items())]
    rng.shuffle(picks)
    chosen = picks[:n]
    shortfall = {"anchor_set": n - len(chosen)} if len(chosen) < n else {}
    return DrawnSample(seed=seed, n=n, items=chosen, shortfall=shortfall, source=AnchorSource())
