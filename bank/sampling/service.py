"""Drawing and persisting a session's sample from the database.

``draw_sample`` reads the maintained stratum counts (one query), plans quotas
(``plan.plan_quotas``), then fetches only the slots the seeded rank streams point at
(one indexed query per round, usually one round) and selects with ``draw.select``.
A stratum that turns out shorter than its counts promised is capped at what it gave
and the plan is redone, so its shortfall moves to its siblings.
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import and_, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.disciplines import sampled_disciplines
from bank.locks import lock
from bank.models import (
    SLOT_RANK_BITS,
    Exposure,
    Item,
    OrgStratumExclusion,
    Sample,
    SampleItem,
    Stratum,
    make_slot,
)
from bank.sampling.draw import Candidate, RankStream, delivery_order
from bank.sampling.draw import select as select_items
from bank.sampling.plan import Plan, StratumSupply, plan_quotas
from bank.strata import StratumKey

DEFAULT_N = 1000
SEED_BYTES = 16
MIN_ACCEPTANCE = 0.05
MAX_ROUNDS = 1000


class SampledItem(NamedTuple):
    """One drawn item, with the strata it was drawn from."""

    id: uuid.UUID
    family_id: uuid.UUID
    discipline: str
    subdiscipline: str
    qtype: str


@dataclass(slots=True)
class DrawnSample:
    """A sample in delivery order, the seed that re-derives it and what was short."""

    seed: str
    n: int
    items: list[SampledItem]
    shortfall: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "n": self.n,
            "items": [
                {
                    "id": str(i.id),
                    "family_id": str(i.family_id),
                    "discipline": i.discipline,
                    "subdiscipline": i.subdiscipline,
                    "qtype": i.qtype,
                }
                for i in self.items
            ],
            "shortfall": self.shortfall,
        }


def new_seed() -> str:
    """A fresh seed from the operating system's CSPRNG (hex)."""
    return secrets.token_hex(SEED_BYTES)


@dataclass(slots=True)
class _Stratum:
    id: int
    n_slots: int
    supply: StratumSupply
    seed: str
    candidates: list[Candidate] = field(default_factory=list)
    last_request: int = 0
    _stream: RankStream | None = None

    def next_request(self, missing: int) -> int:
        """How many more ranks to draw for ``missing`` items: from the eligible share seen
        so far, and at least double the last request, so even a stratum that is almost all
        exposed is walked in O(log n_slots) rounds."""
        drawn = max(1, len(self.stream.drawn))
        rate = max(MIN_ACCEPTANCE / 5, sum(c.eligible for c in self.candidates) / drawn)
        self.last_request = max(2 * self.last_request, math.ceil(1.25 * missing / rate) + 2)
        return self.last_request

    @property
    def stream(self) -> RankStream:
        """Created on first use: most strata get no quota in a given sample."""
        if self._stream is None:
            self._stream = RankStream(self.seed, self.supply.key, self.n_slots)
        return self._stream


async def draw_sample(
    session: AsyncSession,
    *,
    org_id: uuid.UUID,
    n: int = DEFAULT_N,
    seed: str | None = None,
    disciplines: Sequence[str] | None = None,
) -> DrawnSample:
    """Draw (do not record) a sample of ``n`` items unseen by ``org_id``.

    The same ``seed`` on the same bank and exposure state gives the same sample.
    ``disciplines`` defaults to the bank's evaluated disciplines that have items
    (:func:`bank.disciplines.sampled_disciplines`): the others get no quota.
    """
    seed = seed or new_seed()
    if disciplines is None:
        disciplines = await sampled_disciplines(session)
    strata = await _load_strata(session, org_id=org_id, seed=seed)
    supply = [s.supply for s in strata.values()]
    plan = plan_quotas(n, supply, disciplines=disciplines, tie_seed=seed)
    await _fetch(session, org_id, strata, _initial_needs(plan, strata))
    for _ in range(MAX_ROUNDS):
        selection = select_items(plan.quotas, {k: s.candidates for k, s in strata.items()})
        if not selection.starved:
            break
        needs: dict[StratumKey, int] = {}
        for key, missing in selection.starved.items():
            stratum = strata[key]
            if stratum.stream.exhausted:
                stratum.supply = StratumSupply(key, stratum.supply.bank, len(selection.chosen[key]))
            else:
                needs[key] = stratum.next_request(missing)
        if needs:
            await _fetch(session, org_id, strata, needs)
        else:
            plan = _replan(plan, strata, disciplines, seed)
    else:  # pragma: no cover - bounded by construction; a guard against a logic error
        raise RuntimeError("sampling did not converge")
    chosen = {c.item_id: key for key, cands in selection.chosen.items() for c in cands}
    family = {c.item_id: c.family_id for cands in selection.chosen.values() for c in cands}
    items = [
        SampledItem(item_id, family[item_id], key.discipline, key.subdiscipline, key.qtype)
        for item_id in delivery_order(seed, list(chosen))
        for key in (chosen[item_id],)
    ]
    return DrawnSample(seed=seed, n=n, items=items, shortfall=plan.shortfall)


def _replan(
    plan: Plan, strata: dict[StratumKey, _Stratum], disciplines: Sequence[str] | None, seed: str
) -> Plan:
    supply = [s.supply for s in strata.values()]
    return plan_quotas(plan.n, supply, disciplines=disciplines, tie_seed=seed)


async def _load_strata(
    session: AsyncSession, *, org_id: uuid.UUID, seed: str
) -> dict[StratumKey, _Stratum]:
    excluded = func.coalesce(OrgStratumExclusion.n_items, 0)
    connection = await session.connection()
    rows = await connection.execute(
        select(
            Stratum.id,
            Stratum.discipline,
            Stratum.qtype,
            Stratum.subdiscipline,
            Stratum.n_slots,
            Stratum.n_active,
            excluded,
        ).outerjoin(
            OrgStratumExclusion,
            and_(
                OrgStratumExclusion.stratum_id == Stratum.id,
                OrgStratumExclusion.org_id == org_id,
            ),
        )
    )
    strata: dict[StratumKey, _Stratum] = {}
    for stratum_id, discipline, qtype, sub, n_slots, n_active, n_excluded in rows.all():
        key = StratumKey(discipline, qtype, sub)
        supply = StratumSupply(key, bank=n_active, available=max(0, n_active - n_excluded))
        strata[key] = _Stratum(stratum_id, n_slots, supply, seed)
    return strata


def _initial_needs(plan: Plan, strata: dict[StratumKey, _Stratum]) -> dict[StratumKey, int]:
    """How many ranks to draw first: the quota inflated by the expected rejection rate."""
    needs = {}
    for key, quota in plan.quotas.items():
        stratum = strata[key]
        acceptance = max(MIN_ACCEPTANCE, stratum.supply.available / max(1, stratum.n_slots))
        needs[key] = stratum.last_request = math.ceil(1.25 * quota / acceptance) + 2
    return needs


async def _fetch(
    session: AsyncSession,
    org_id: uuid.UUID,
    strata: dict[StratumKey, _Stratum],
    needs: dict[StratumKey, int],
) -> None:
    """Draw more ranks for the strata in ``needs`` and append their items as candidates."""
    slots: list[int] = []
    drawn: dict[StratumKey, list[int]] = {}
    for key, count in needs.items():
        stratum = strata[key]
        drawn[key] = stratum.stream.extend(count)
        slots.extend(make_slot(stratum.id, rank) for rank in drawn[key])
    found: dict[int, Candidate] = {}
    for chunk in bulk.in_chunks(session, slots):
        found.update(await _candidates(session, org_id, list(chunk)))
    for key, ranks in drawn.items():
        stratum = strata[key]
        stratum.candidates.extend(
            found[slot] for r in ranks if (slot := make_slot(stratum.id, r)) in found
        )


async def _candidates(
    session: AsyncSession, org_id: uuid.UUID, slots: list[int]
) -> dict[int, Candidate]:
    if not slots:
        return {}
    connection = await session.connection()
    columns = (Item.slot, Item.id, Item.family_id, Item.status)
    in_slots = bulk.column_in(session, Item.slot, slots)
    if connection.dialect.name == "postgresql":
        # One probe of the exposure key per candidate (LATERAL ... LIMIT 1): a plain join
        # would hash every family the organisation has ever been served.
        seen = (
            select(Exposure.family_id)
            .where(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
            .limit(1)
            .lateral()
        )
        query = select(*columns, seen.c.family_id).outerjoin(seen, true()).where(in_slots)
    else:  # SQLite has no LATERAL and already probes the primary key row by row
        on = and_(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
        query = select(*columns, Exposure.family_id).outerjoin(Exposure, on).where(in_slots)
    rows = await connection.execute(query)
    rank_mask = (1 << SLOT_RANK_BITS) - 1
    return {
        slot: Candidate(
            rank=slot & rank_mask,
            item_id=item_id,
            family_id=family_id,
            eligible=status == "active" and seen is None,
        )
        for slot, item_id, family_id, status, seen in rows.all()
    }


async def allocate_sample(
    session: AsyncSession,
    *,
    org_id: uuid.UUID,
    n: int = DEFAULT_N,
    seed: str | None = None,
    disciplines: Sequence[str] | None = None,
) -> tuple[Sample, DrawnSample]:
    """Draw and record a sample for ``org_id``, holding the organisation's sampling lock so
    two samples for one organisation are drawn one after the other, never from the same
    snapshot."""
    await lock(session, f"bank:sample:{org_id}")
    drawn = await draw_sample(session, org_id=org_id, n=n, seed=seed, disciplines=disciplines)
    return await persist_sample(session, org_id=org_id, sample=drawn), drawn


async def persist_sample(
    session: AsyncSession, *, org_id: uuid.UUID, sample: DrawnSample
) -> Sample:
    """Record ``sample`` for ``org_id`` (flush only); positions follow delivery order."""
    record = Sample(
        org_id=org_id,
        seed=sample.seed,
        n_requested=sample.n,
        n_drawn=len(sample.items),
        shortfall=sample.shortfall,
    )
    session.add(record)
    await session.flush()
    await bulk.insert_rows(
        session,
        SampleItem,
        [
            {"sample_id": record.id, "position": p, "item_id": i.id, "family_id": i.family_id}
            for p, i in enumerate(sample.items)
        ],
    )
    return record
