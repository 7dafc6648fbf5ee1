"""Drawing and persisting a session's sample from the database.

``draw_sample`` reads the maintained stratum counts and the evaluated disciplines (one
query), plans quotas (``plan.plan_quotas``), then fetches only the slots the seeded rank
streams point at and selects with ``draw.select``. Each fetch is one indexed statement;
on PostgreSQL it returns only the eligible candidates (active, family not served to the
organisation), so the rows that cross the wire are about the sample's size. The first
fetch asks each stratum for a little more than its quota at the stratum's known
acceptance rate; the few strata that come up short get a second, small fetch.
A stratum that turns out shorter than its counts promised is capped at what it gave
and the plan is redone, so its shortfall moves to its siblings.

Which items are drawn depends only on the seed, the bank and the organisation's exposure:
``draw.select`` keeps, in stream order, the first eligible candidates, and every fetch
extends the same seeded streams, so how many ranks a round asks for changes the cost,
never the sample.

The draw reads the state through two calls (:class:`BankState`: the strata's counts, and
the items at given slots): :class:`LiveBank` reads the database as it is, and
``bank.sampling.as_of`` reads it as it was when a past sample was drawn, so an auditor's
re-derivation runs this very planning and selection (:func:`draw_from`).
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import and_, false, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.database import utcnow
from bank.locks import lock_org_sampling
from bank.models import (
    SLOT_RANK_BITS,
    Discipline,
    Exposure,
    Item,
    ItemStatus,
    OrgStratumExclusion,
    Sample,
    SampleItem,
    Stratum,
    make_slot,
)
from bank.sampling.commitment import commitment, new_salt
from bank.sampling.draw import Candidate, RankStream, delivery_order
from bank.sampling.draw import select as select_items
from bank.sampling.plan import DEFAULT_N, Plan, StratumSupply, plan_quotas
from bank.sampling.source import SampleSource, StratifiedSource, source_json
from bank.stratum_key import StratumKey

SEED_BYTES = 16
MIN_ACCEPTANCE = 0.05
MAX_ROUNDS = 1000
PRIOR_WEIGHT = 4
"""Pseudo-draws at the stratum's counted acceptance rate mixed into the rate seen so far."""


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
    source: SampleSource
    """What it was drawn from, as committed to (``bank.sampling.commitment``): for
    ``draw_sample`` a ``StratifiedSource`` with the disciplines the plan used;
    ``bank.anchor_set`` and ``bank.item_sets`` set theirs."""
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
    """A stratum being drawn from: its seeded stream and the candidates fetched so far."""

    id: int
    n_slots: int
    acceptance: float
    """The share of the stratum's slots the counters say are eligible (at least
    ``MIN_ACCEPTANCE``)."""
    stream: RankStream
    candidates: list[Candidate] = field(default_factory=list)
    last_request: int = 0

    def next_request(self, missing: int) -> int:
        """How many more ranks to draw for ``missing`` items: from the eligible share seen
        so far (with the counted share as a prior), and at least double the last request,
        so even a stratum that is almost all exposed is walked in O(log n_slots) rounds."""
        drawn = len(self.stream.drawn) + PRIOR_WEIGHT
        eligible = sum(c.eligible for c in self.candidates) + PRIOR_WEIGHT * self.acceptance
        rate = max(MIN_ACCEPTANCE / 5, eligible / drawn)
        self.last_request = max(2 * self.last_request, math.ceil(1.25 * missing / rate) + 2)
        return self.last_request


@dataclass(slots=True)
class _Strata:
    """Every stratum's counts as loaded, and a ``_Stratum`` for each one drawn from
    (made on first use: most strata get no quota in a given sample)."""

    seed: str
    supply: dict[StratumKey, StratumSupply] = field(default_factory=dict)
    """What planning sees; a stratum found shorter than its counts is capped here."""
    slots: dict[StratumKey, tuple[int, int]] = field(default_factory=dict)
    """Stratum id and number of slots."""
    drawing: dict[StratumKey, _Stratum] = field(default_factory=dict)

    def __getitem__(self, key: StratumKey) -> _Stratum:
        stratum = self.drawing.get(key)
        if stratum is None:
            stratum_id, n_slots = self.slots[key]
            acceptance = max(MIN_ACCEPTANCE, self.supply[key].available / max(1, n_slots))
            stream = RankStream(self.seed, key, n_slots)
            stratum = self.drawing[key] = _Stratum(stratum_id, n_slots, acceptance, stream)
        return stratum


StratumRow = tuple[int, str, str, str, int, int, int, bool]
"""One stratum as a draw reads it: id, discipline, question type, sub-discipline, number of
slots, active items, active items of families the organisation was served, and whether its
discipline is evaluated."""


class BankState(Protocol):
    """The two reads a draw makes of the bank and of one organisation's exposure.

    :class:`LiveBank` reads the database as it is now (the maintained counters); the
    re-derivation of a past sample (``bank.sampling.as_of``) reads the state as of the
    instant the sample was drawn. :func:`draw_from` runs the same planning and selection on
    either."""

    async def strata(self) -> Iterable[StratumRow]:
        """Every stratum with its counts."""
        ...

    async def candidates(self, slots: list[int]) -> dict[int, Candidate]:
        """The items at ``slots`` (absent: no item there); an item the organisation may not
        get may be left out or given with ``eligible`` False."""
        ...


@dataclass(frozen=True, slots=True)
class LiveBank:
    """:class:`BankState` of the live database: the maintained counters of ``strata``,
    ``org_stratum_exclusions`` and ``disciplines`` (one statement), and the items at the
    drawn slots (one indexed statement per chunk)."""

    session: AsyncSession
    org_id: uuid.UUID

    async def strata(self) -> Iterable[StratumRow]:
        return await _load_strata(self.session, org_id=self.org_id)

    async def candidates(self, slots: list[int]) -> dict[int, Candidate]:
        found: dict[int, Candidate] = {}
        for chunk in bulk.in_chunks(self.session, slots):
            found.update(await _candidates(self.session, self.org_id, list(chunk)))
        return found


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
    bank = LiveBank(session, org_id)
    return await draw_from(bank, n=n, seed=seed or new_seed(), disciplines=disciplines)


async def draw_from(
    bank: BankState,
    *,
    n: int,
    seed: str,
    disciplines: Sequence[str] | None = None,
) -> DrawnSample:
    """Plan and select a sample of ``n`` items with ``seed`` from what ``bank`` reads: the
    whole draw of :func:`draw_sample`, whatever the state's source."""
    strata, evaluated = _build_strata(seed, await bank.strata())
    if disciplines is None:
        disciplines = _sampled(strata, evaluated)
    plan = plan_quotas(n, list(strata.supply.values()), disciplines=disciplines, tie_seed=seed)
    await _fetch(bank, strata, _initial_needs(plan, strata))
    for _ in range(MAX_ROUNDS):
        candidates = {key: strata[key].candidates for key in plan.quotas}
        selection = select_items(plan.quotas, candidates)
        if not selection.starved:
            break
        needs: dict[StratumKey, int] = {}
        for key, missing in selection.starved.items():
            stratum = strata[key]
            if stratum.stream.exhausted:
                bank_size = strata.supply[key].bank
                strata.supply[key] = StratumSupply(key, bank_size, len(selection.chosen[key]))
            else:
                needs[key] = stratum.next_request(missing)
        if needs:
            await _fetch(bank, strata, needs)
        else:
            supply = list(strata.supply.values())
            plan = plan_quotas(n, supply, disciplines=disciplines, tie_seed=seed)
    else:  # pragma: no cover - bounded by construction; a guard against a logic error
        raise RuntimeError("sampling did not converge")
    chosen = {c.item_id: key for key, cands in selection.chosen.items() for c in cands}
    family = {c.item_id: c.family_id for cands in selection.chosen.values() for c in cands}
    items = [
        SampledItem(item_id, family[item_id], key.discipline, key.subdiscipline, key.qtype)
        for item_id in delivery_order(seed, list(chosen))
        for key in (chosen[item_id],)
    ]
    source = StratifiedSource(tuple(disciplines))
    return DrawnSample(seed=seed, n=n, items=items, shortfall=plan.shortfall, source=source)


async def _load_strata(session: AsyncSession, *, org_id: uuid.UUID) -> list[StratumRow]:
    """Every stratum with its counts and what ``org_id`` may still get, and whether its
    discipline is evaluated: one statement."""
    excluded = func.coalesce(OrgStratumExclusion.n_items, 0)
    evaluated = func.coalesce(Discipline.evaluated, false())
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
            evaluated,
        )
        .outerjoin(
            OrgStratumExclusion,
            and_(
                OrgStratumExclusion.stratum_id == Stratum.id,
                OrgStratumExclusion.org_id == org_id,
            ),
        )
        .outerjoin(Discipline, Discipline.key == Stratum.discipline)
    )
    return rows.all()  # type: ignore[return-value]


def _build_strata(seed: str, rows: Iterable[StratumRow]) -> tuple[_Strata, set[str]]:
    """The strata to draw from, and the evaluated disciplines, from ``rows``."""
    strata = _Strata(seed)
    supply, slots = strata.supply, strata.slots
    evaluated_keys: set[str] = set()
    for (
        stratum_id,
        discipline,
        qtype,
        sub,
        n_slots,
        n_active,
        n_excluded,
        is_evaluated,
    ) in rows:
        key = StratumKey(discipline, qtype, sub)
        supply[key] = StratumSupply(key, n_active, max(0, n_active - n_excluded))
        slots[key] = (stratum_id, n_slots)
        if is_evaluated:
            evaluated_keys.add(discipline)
    return strata, evaluated_keys


def _sampled(strata: _Strata, evaluated: set[str]) -> list[str]:
    """:func:`bank.disciplines.sampled_disciplines` from the loaded strata: the evaluated
    disciplines with active items, in key order."""
    stocked = {key.discipline for key, supply in strata.supply.items() if supply.bank > 0}
    return sorted(stocked & evaluated)


def _initial_needs(plan: Plan, strata: _Strata) -> dict[StratumKey, int]:
    """How many ranks to draw first: the quota at the stratum's acceptance rate plus one
    standard deviation, so most strata are filled by the first fetch and the few others
    need a second, small one (``next_request``): a short round costs less than fetching
    every stratum's unlikely tail."""
    needs = {}
    for key, quota in plan.quotas.items():
        stratum = strata[key]
        acceptance = stratum.acceptance
        spread = math.sqrt(quota * (1 - acceptance)) / acceptance
        needs[key] = stratum.last_request = math.ceil(quota / acceptance + spread)
    return needs


async def _fetch(bank: BankState, strata: _Strata, needs: dict[StratumKey, int]) -> None:
    """Draw more ranks for the strata in ``needs`` and append their items as candidates."""
    drawn: list[tuple[_Stratum, list[int]]] = []
    for key, count in needs.items():
        stratum = strata[key]
        base = make_slot(stratum.id, 0)
        drawn.append((stratum, [base | rank for rank in stratum.stream.extend(count)]))
    slots = [slot for _, stratum_slots in drawn for slot in stratum_slots]
    found = await bank.candidates(slots) if slots else {}
    for stratum, stratum_slots in drawn:
        stratum.candidates.extend(found[slot] for slot in stratum_slots if slot in found)


async def _candidates(
    session: AsyncSession, org_id: uuid.UUID, slots: list[int]
) -> dict[int, Candidate]:
    """The items at ``slots``; on PostgreSQL only the eligible ones (the others could never
    be selected), each checked with one probe of the exposure key."""
    if not slots:
        return {}
    connection = await session.connection()
    in_slots = bulk.column_in(session, Item.slot, slots)
    rank_mask = (1 << SLOT_RANK_BITS) - 1
    if connection.dialect.name == "postgresql":
        seen = select(Exposure.family_id).where(
            Exposure.org_id == org_id, Exposure.family_id == Item.family_id
        )
        query = select(Item.slot, Item.id, Item.family_id).where(
            in_slots, Item.status == ItemStatus.ACTIVE.value, ~seen.exists()
        )
        rows = (await connection.execute(query)).all()
        return {
            slot: Candidate(slot & rank_mask, item_id, family_id, True)
            for slot, item_id, family_id in rows
        }
    # SQLite already probes the exposure key row by row in a join.
    on = and_(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
    joined = (
        select(Item.slot, Item.id, Item.family_id, Item.status, Exposure.family_id)
        .outerjoin(Exposure, on)
        .where(in_slots)
    )
    return {
        slot: Candidate(
            rank=slot & rank_mask,
            item_id=item_id,
            family_id=family_id,
            eligible=status == ItemStatus.ACTIVE.value and seen is None,
        )
        for slot, item_id, family_id, status, seen in await connection.execute(joined)
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
    snapshot. The sample's ``drawn_at`` is the instant right after the lock was taken."""
    await lock_org_sampling(session, org_id)
    drawn_at = utcnow()
    drawn = await draw_sample(session, org_id=org_id, n=n, seed=seed, disciplines=disciplines)
    record = await persist_sample(session, org_id=org_id, sample=drawn, drawn_at=drawn_at)
    return record, drawn


async def persist_sample(
    session: AsyncSession,
    *,
    org_id: uuid.UUID,
    sample: DrawnSample,
    drawn_at: datetime | None = None,
) -> Sample:
    """Record ``sample`` for ``org_id`` (flush only); positions follow delivery order, and
    each item's ``drawn_position`` keeps that order for good.

    The record carries its commitment (``bank.sampling.commitment``) to the seed, a fresh
    salt, ``sample.source`` (stored as ``bank.sampling.source.source_json`` writes it) and
    the ordered item ids. ``drawn_at`` is the instant the caller took the organisation's
    sampling lock, before it read the state the sample was drawn from (default: now)."""
    salt = new_salt()
    ids = [i.id for i in sample.items]
    record = Sample(
        org_id=org_id,
        seed=sample.seed,
        n_requested=sample.n,
        n_drawn=len(sample.items),
        shortfall=sample.shortfall,
        drawn_at=drawn_at or utcnow(),
        source=source_json(sample.source),
        salt=salt,
        commitment=commitment(seed=sample.seed, salt=salt, source=sample.source, item_ids=ids),
    )
    session.add(record)
    await session.flush()
    connection = await session.connection()
    if connection.dialect.name == "postgresql":
        # One statement from two array parameters: no per-row binds, no COPY set-up.
        families = [i.family_id for i in sample.items]
        await connection.execute(_INSERT_ITEMS, {"sample": record.id, "ids": ids, "fs": families})
        return record
    await bulk.insert_rows(
        session,
        SampleItem,
        [
            {
                "sample_id": record.id,
                "position": p,
                "drawn_position": p,
                "item_id": i.id,
                "family_id": i.family_id,
            }
            for p, i in enumerate(sample.items)
        ],
    )
    return record


_INSERT_ITEMS = text(
    "INSERT INTO sample_items (sample_id, position, drawn_position, item_id, family_id)"
    " SELECT :sample, u.position - 1, u.position - 1, u.item_id, u.family_id"
    " FROM unnest(CAST(:ids AS uuid[]), CAST(:fs AS uuid[]))"
    " WITH ORDINALITY AS u(item_id, family_id, position)"
)
