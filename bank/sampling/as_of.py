"""The bank and an organisation's exposure as of a past instant, and re-deriving a recorded
sample on it (the database side of ``bank.sampling.rederive``).

:class:`AsOfBank` is a :class:`~bank.sampling.service.BankState` that answers the draw's two
reads as they would have been answered at instant ``at`` (a sample's ``drawn_at``):

* an item existed if ``created_at <= at`` (items are never deleted; a stratum's slots are
  its items, ranks given in creation order, so the stratum had as many slots as items);
* its status then is the ``from_status`` of its first ``item_status_changes`` row after
  ``at``, else its current status (every status change writes one row:
  ``bank.item_status``, ``bank.anchor_set``);
* a family was exposed to the organisation if a current ``exposures`` row has
  ``exposed_at < at``, or a released one (``exposure_releases``, written by
  ``bank.exposure.release_undelivered``) has ``exposed_at < at <= released_at``;
* the counts the planner reads (active items, and active items of exposed families, per
  stratum) are recomputed from those facts rather than read from the maintained counters.

:func:`rederive_sample` then runs the live draw (:func:`bank.sampling.service.draw_from`)
with the sample's seed, size and recorded disciplines on that state, and
:func:`check_sample` compares the result with the stored sample.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, union
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from bank import bulk
from bank.anchor_set import pick_anchor_sample
from bank.item_sets import pick_item_set_sample
from bank.models import (
    SLOT_RANK_BITS,
    Exposure,
    ExposureRelease,
    Item,
    ItemSet,
    ItemSetMember,
    ItemStatus,
    ItemStatusChange,
    Sample,
    SampleItem,
    Stratum,
)
from bank.sampling.draw import Candidate
from bank.sampling.rederive import (
    Comparison,
    Outcome,
    StoredItem,
    compare,
    history_breaks,
    status_at,
)
from bank.sampling.service import DrawnSample, SampledItem, StratumRow, draw_from
from bank.sampling.source import (
    AnchorSource,
    SourceError,
    SourceKind,
    StratifiedSource,
    parse_source,
)

ACTIVE = ItemStatus.ACTIVE.value
RANK_MASK = (1 << SLOT_RANK_BITS) - 1


def exposed_families(org_id: uuid.UUID, at: datetime) -> Select[Any]:
    """The families exposed to ``org_id`` at instant ``at`` (a statement)."""
    current = select(Exposure.family_id).where(Exposure.org_id == org_id, Exposure.exposed_at < at)
    released = select(ExposureRelease.family_id).where(
        ExposureRelease.org_id == org_id,
        ExposureRelease.exposed_at < at,
        ExposureRelease.released_at >= at,
    )
    return select(union(current, released).subquery().c.family_id)


@dataclass(slots=True)
class AsOfBank:
    """The draw's reads answered as of ``at`` for ``org_id`` (see the module docstring).
    Call :meth:`load` first."""

    session: AsyncSession
    org_id: uuid.UUID
    at: datetime
    exposed: set[uuid.UUID] = field(default_factory=set)
    """Families exposed to the organisation at ``at``."""
    changed: dict[uuid.UUID, tuple[str, str, int, uuid.UUID]] = field(default_factory=dict)
    """Items that existed at ``at`` and changed status since: status then, status now,
    stratum, family."""
    history_breaks: list[uuid.UUID] = field(default_factory=list)
    """Items whose status history since ``at`` does not chain to their current status."""

    async def load(self) -> None:
        """Read the organisation's exposure then, and the status changes since."""
        rows = await self.session.execute(exposed_families(self.org_id, self.at))
        self.exposed = set(rows.scalars())
        history = await self.session.execute(
            select(
                ItemStatusChange.item_id,
                ItemStatusChange.from_status,
                ItemStatusChange.to_status,
                Item.status,
                Item.stratum_id,
                Item.family_id,
            )
            .join(Item, Item.id == ItemStatusChange.item_id)
            .where(ItemStatusChange.created_at > self.at, Item.created_at <= self.at)
            .order_by(ItemStatusChange.item_id, ItemStatusChange.created_at, ItemStatusChange.id)
        )
        changes: dict[uuid.UUID, list[tuple[str, str]]] = defaultdict(list)
        facts: dict[uuid.UUID, tuple[str, int, uuid.UUID]] = {}
        for item_id, from_status, to_status, current, stratum_id, family_id in history:
            changes[item_id].append((from_status, to_status))
            facts[item_id] = (current, stratum_id, family_id)
        for item_id, steps in changes.items():
            current, stratum_id, family_id = facts[item_id]
            self.changed[item_id] = (status_at(current, steps), current, stratum_id, family_id)
            if history_breaks(current, steps):
                self.history_breaks.append(item_id)

    def status_then(self, item_id: uuid.UUID, current: str) -> str:
        """The status at ``at`` of an item whose status is ``current`` now."""
        changed = self.changed.get(item_id)
        return current if changed is None else changed[0]

    async def strata(self) -> Iterable[StratumRow]:
        """Every stratum with its slots, active items and exposed active items at ``at``."""
        existed = Item.created_at <= self.at
        counts = await self.session.execute(
            select(
                Item.stratum_id,
                func.count(),
                func.sum(case((Item.status == ACTIVE, 1), else_=0)),
            )
            .where(existed)
            .group_by(Item.stratum_id)
        )
        slots: dict[int, int] = {}
        active: dict[int, int] = defaultdict(int)
        for stratum_id, n_items, n_active in counts:
            slots[stratum_id] = int(n_items)
            active[stratum_id] = int(n_active or 0)
        excluded_rows = await self.session.execute(
            select(Item.stratum_id, func.count())
            .where(
                existed,
                Item.status == ACTIVE,
                Item.family_id.in_(exposed_families(self.org_id, self.at)),
            )
            .group_by(Item.stratum_id)
        )
        excluded: dict[int, int] = defaultdict(int, {s: int(n) for s, n in excluded_rows})
        for then, now, stratum_id, family_id in self.changed.values():
            shift = (then == ACTIVE) - (now == ACTIVE)
            active[stratum_id] += shift
            if family_id in self.exposed:
                excluded[stratum_id] += shift
        strata = await self.session.execute(
            select(Stratum.id, Stratum.discipline, Stratum.qtype, Stratum.subdiscipline)
        )
        return [
            (s, d, q, sub, slots.get(s, 0), active[s], excluded[s], False)
            for s, d, q, sub in strata
        ]

    async def candidates(self, slots: list[int]) -> dict[int, Candidate]:
        """The items that existed at ``at`` at ``slots``, eligible if active then and of a
        family not exposed then."""
        found: dict[int, Candidate] = {}
        for chunk in bulk.in_chunks(self.session, slots):
            rows = await self.session.execute(
                select(Item.slot, Item.id, Item.family_id, Item.status).where(
                    bulk.column_in(self.session, Item.slot, list(chunk)),
                    Item.created_at <= self.at,
                )
            )
            for slot, item_id, family_id, status in rows:
                then = self.status_then(item_id, status)
                eligible = then == ACTIVE and family_id not in self.exposed
                found[slot] = Candidate(slot & RANK_MASK, item_id, family_id, eligible)
        return found


@dataclass(frozen=True, slots=True)
class Rederived:
    """A sample drawn again on the state as of its ``drawn_at``, or why it cannot be."""

    kind: SourceKind | None
    """The recorded source's kind (None: not recorded, or not readable as any kind)."""
    drawn: DrawnSample | None
    reason: str | None = None
    history_breaks: tuple[uuid.UUID, ...] = ()
    """Items whose status history since the draw does not chain (a warning: their status
    at the draw is uncertain)."""


async def rederive_sample(session: AsyncSession, sample: Sample) -> Rederived:
    """Draw ``sample`` again from its seed, size and source on the state as of its
    ``drawn_at``: a stratified sample with the live draw (:func:`draw_from`), an anchor-set
    or item-set sample with those draws' own picking (``pick_anchor_sample``,
    ``pick_item_set_sample``) on the candidates as of then. Not re-derivable: samples
    without ``drawn_at`` or ``source`` (drawn before they were recorded), a recorded source
    that ``parse_source`` refuses, an item set deleted since."""
    try:
        source = parse_source(sample.source) if sample.source else None
    except SourceError as error:
        return Rederived(error.kind, None, f"the recorded source is unreadable: {error}")
    if sample.drawn_at is None or source is None:
        return Rederived(
            None if source is None else source.kind,
            None,
            "drawn before draws recorded their instant and source (drawn_at, source)",
        )
    bank = AsOfBank(session, sample.org_id, sample.drawn_at)
    if isinstance(source, StratifiedSource):
        await bank.load()
        drawn = await draw_from(
            bank, n=sample.n_requested, seed=sample.seed, disciplines=list(source.disciplines)
        )
    elif isinstance(source, AnchorSource):
        await bank.load()
        candidates = await _anchor_candidates(bank)
        drawn = pick_anchor_sample(candidates, n=sample.n_requested, seed=sample.seed)
    else:
        item_set = await session.get(ItemSet, source.item_set_id)
        if item_set is None:
            return Rederived(source.kind, None, "kind item_set: the item set no longer exists")
        if item_set.created_at > sample.drawn_at:
            return Rederived(
                source.kind, None, "kind item_set: the item set is younger than the draw"
            )
        await bank.load()
        candidates = await _item_set_candidates(bank, item_set.id)
        drawn = pick_item_set_sample(
            candidates, set_id=item_set.id, n=sample.n_requested, seed=sample.seed
        )
    return Rederived(source.kind, drawn, history_breaks=tuple(bank.history_breaks))


_SAMPLED_COLUMNS = (Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype)


async def _anchor_candidates(bank: AsOfBank) -> list[SampledItem]:
    """The anchor items the organisation had not been served at ``bank.at``, by family then
    id (what ``bank.anchor_set.draw_anchor_sample`` reads, as of then)."""
    anchor = ItemStatus.ANCHOR.value
    session = bank.session
    rows = list(
        await session.execute(
            select(*_SAMPLED_COLUMNS).where(Item.status == anchor, Item.created_at <= bank.at)
        )
    )
    was_anchor = [i for i, (then, *_) in bank.changed.items() if then == anchor]
    for chunk in bulk.in_chunks(session, was_anchor):
        rows += await session.execute(
            select(*_SAMPLED_COLUMNS).where(bulk.column_in(session, Item.id, list(chunk)))
        )
    kept = {
        row[0]: SampledItem(*row)
        for row in rows
        if bank.status_then(row[0], anchor) == anchor and row[1] not in bank.exposed
    }
    return sorted(kept.values(), key=lambda i: (i.family_id, i.id))


async def _item_set_candidates(bank: AsOfBank, set_id: uuid.UUID) -> list[SampledItem]:
    """The set's members active at ``bank.at`` whose families the organisation had not been
    served then (what ``bank.item_sets.draw_item_set_sample`` reads, as of then)."""
    rows = await bank.session.execute(
        select(*_SAMPLED_COLUMNS, Item.status)
        .join(ItemSetMember, ItemSetMember.item_id == Item.id)
        .where(ItemSetMember.set_id == set_id, Item.created_at <= bank.at)
    )
    return [
        SampledItem(*row[:5])
        for row in rows
        if bank.status_then(row[0], row[5]) == ACTIVE and row[1] not in bank.exposed
    ]


async def stored_items(session: AsyncSession, sample_id: uuid.UUID) -> list[StoredItem]:
    """The stored positions of sample ``sample_id``, by position."""
    rows = await session.execute(
        select(SampleItem.position, SampleItem.drawn_position, SampleItem.item_id)
        .where(SampleItem.sample_id == sample_id)
        .order_by(SampleItem.position)
    )
    return [StoredItem(p, d, i) for p, d, i in rows]


@dataclass(frozen=True, slots=True)
class SampleCheck:
    """A stored sample against its re-derivation."""

    sample: Sample
    stored: list[StoredItem]
    rederived: Rederived
    comparison: Comparison | None
    """None when the sample is not re-derivable."""

    @property
    def outcome(self) -> Outcome:
        return Outcome.NOT_REDERIVABLE if self.comparison is None else self.comparison.outcome

    @property
    def expected(self) -> list[uuid.UUID]:
        drawn = self.rederived.drawn
        return [] if drawn is None else [i.id for i in drawn.items]


async def check_sample(session: AsyncSession, sample: Sample) -> SampleCheck:
    """Re-derive ``sample`` and compare it with what is stored, in drawn order."""
    stored = await stored_items(session, sample.id)
    rederived = await rederive_sample(session, sample)
    comparison = None
    if rederived.drawn is not None:
        comparison = compare(
            [i.id for i in rederived.drawn.items],
            stored,
            expected_shortfall=rederived.drawn.shortfall,
            stored_shortfall=sample.shortfall,
        )
    return SampleCheck(sample, stored, rederived, comparison)


__all__ = [
    "AsOfBank",
    "Rederived",
    "SampleCheck",
    "check_sample",
    "exposed_families",
    "rederive_sample",
    "stored_items",
]
