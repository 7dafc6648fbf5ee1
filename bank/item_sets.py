"""Named item sets: a fixed set of items saved under a name (for instance a selective
subset chosen from the bank-health figures), that sessions can draw from.

A set records its members and the rule that built it (free JSON, for the record); it never
changes an item's status. Drawing from a set follows the bank's serving rules: only
``active`` members are served (a member flagged, retired or moved to the anchor set after
the set was saved is skipped, never served), at most one item per family, and never a
family the organisation has been served or holds in an open session.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import column_in, in_chunks, insert_rows
from bank.locks import lock
from bank.models import Exposure, Item, ItemSet, ItemSetMember, ItemStatus
from bank.sampling.service import DrawnSample, SampledItem, new_seed
from bank.sampling.source import ItemSetSource

MAX_NAME = 100
"""Longest set name (the column's width)."""
MAX_ACTOR = 64
SHOWN_UNKNOWN = 5
"""How many unknown item ids a refusal quotes (it always says how many there are)."""
SHORTFALL_KEY = "item_set"
"""The key of a drawn sample's shortfall: how many items the set could not supply."""


class ItemSetError(ValueError):
    """A set that cannot be saved as asked; the message says why."""


class InvalidItemSet(ItemSetError):
    """A bad name, no items, or item ids the bank does not have."""


class DuplicateItemSet(ItemSetError):
    """Another set already has the name."""


def check_name(name: str) -> str:
    """``name`` if it is a valid set name: 1 to ``MAX_NAME`` printable characters (no
    control character, NUL, line break or lone surrogate), without surrounding spaces.
    ``InvalidItemSet`` otherwise."""
    if not isinstance(name, str) or not name:
        raise InvalidItemSet("an item set needs a name (1 to 100 characters)")
    if len(name) > MAX_NAME:
        raise InvalidItemSet(
            f"an item set's name has at most {MAX_NAME} characters, got {len(name)}"
        )
    if not name.isprintable():
        raise InvalidItemSet("an item set's name must be printable (no control characters)")
    if name != name.strip():
        raise InvalidItemSet("an item set's name may not begin or end with spaces")
    return name


def check_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """``rule`` as a plain dict if it is a JSON object with finite numbers only (a NaN or
    an infinity would not store as JSON on PostgreSQL); ``InvalidItemSet`` otherwise."""
    try:
        json.dumps(rule, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidItemSet(f"the rule must be a JSON object of finite numbers: {error}") from None
    return dict(rule)


async def save_item_set(
    db: AsyncSession,
    *,
    name: str,
    item_ids: Collection[uuid.UUID],
    rule: Mapping[str, Any],
    actor: str,
) -> ItemSet:
    """Save the items ``item_ids`` (repeats count once) as the set ``name``, with the
    ``rule`` that chose them, made by ``actor`` (an API key id or ``cli``).

    All or nothing: every check runs before anything is written, and the set and its
    members are written in the caller's transaction (flush only). Members may have any
    status; only active ones are ever served (:func:`draw_item_set_sample`).
    ``InvalidItemSet`` for a bad name or rule, no items or ids the bank does not have (how
    many, and the first few); ``DuplicateItemSet`` when the name is taken."""
    check_name(name)
    stored_rule = check_rule(rule)
    if not actor or len(actor) > MAX_ACTOR:
        raise InvalidItemSet(f"the actor must have 1 to {MAX_ACTOR} characters")
    members = sorted(set(item_ids))
    if not members:
        raise InvalidItemSet("an item set needs at least one item")
    # one writer of sets at a time: the name check below then cannot race another save
    await lock(db, "bank:item-sets")
    if await get_item_set(db, name) is not None:
        raise DuplicateItemSet(f"an item set named {name!r} exists already")
    unknown = await _unknown_items(db, members)
    if unknown:
        shown = ", ".join(str(i) for i in unknown[:SHOWN_UNKNOWN])
        more = f" and {len(unknown) - SHOWN_UNKNOWN} more" if len(unknown) > SHOWN_UNKNOWN else ""
        raise InvalidItemSet(
            f"{len(unknown)} of {len(members)} item ids are not in the bank: {shown}{more}"
        )
    record = ItemSet(name=name, rule=stored_rule, n_items=len(members), created_by=actor)
    db.add(record)
    await db.flush()
    await insert_rows(
        db, ItemSetMember, [{"set_id": record.id, "item_id": item_id} for item_id in members]
    )
    return record


async def _unknown_items(db: AsyncSession, item_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The ids of ``item_ids`` that are not items of the bank, in the given order."""
    known: set[uuid.UUID] = set()
    for chunk in in_chunks(db, item_ids):
        rows = await db.execute(select(Item.id).where(column_in(db, Item.id, chunk)))
        known.update(rows.scalars())
    return [i for i in item_ids if i not in known]


async def list_item_sets(db: AsyncSession) -> list[ItemSet]:
    """Every saved set, by name."""
    return list((await db.execute(select(ItemSet).order_by(ItemSet.name))).scalars())


async def get_item_set(db: AsyncSession, name: str) -> ItemSet | None:
    """The set called ``name`` (exactly), or None."""
    return (await db.execute(select(ItemSet).where(ItemSet.name == name))).scalar_one_or_none()


async def delete_item_set(db: AsyncSession, *, name: str) -> bool:
    """Delete the set ``name`` and its membership (not its items, nor samples already
    drawn from it); False if there is no such set."""
    record = await get_item_set(db, name)
    if record is None:
        return False
    await db.execute(delete(ItemSetMember).where(ItemSetMember.set_id == record.id))
    await db.delete(record)
    await db.flush()
    return True


async def draw_item_set_sample(
    db: AsyncSession,
    *,
    org_id: uuid.UUID,
    set_id: uuid.UUID,
    n: int,
    seed: str | None = None,
) -> DrawnSample:
    """Up to ``n`` active members of set ``set_id`` whose families the organisation has not
    been served (nor holds in an open session), one item per family (chosen at random among
    the family's members), in a random order derived from ``seed``.

    The set is read whole, as the anchor set is (``bank.anchor_set.draw_anchor_sample``):
    the same seed on the same bank gives the same sample. What the set could not supply is
    the shortfall, under ``"item_set"``; the source is ``ItemSetSource(set_id)``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    seed = seed or new_seed()
    seen = exists().where(Exposure.org_id == org_id, Exposure.family_id == Item.family_id)
    rows = await db.execute(
        select(Item.id, Item.family_id, Item.discipline, Item.subdiscipline, Item.qtype)
        .join(ItemSetMember, ItemSetMember.item_id == Item.id)
        .where(ItemSetMember.set_id == set_id, Item.status == ItemStatus.ACTIVE.value, ~seen)
    )
    candidates = [SampledItem(*row) for row in rows.tuples()]
    return pick_item_set_sample(candidates, set_id=set_id, n=n, seed=seed)


def pick_item_set_sample(
    candidates: Sequence[SampledItem], *, set_id: uuid.UUID, n: int, seed: str
) -> DrawnSample:
    """The sample of ``seed`` from set ``set_id``'s ``candidates`` (its active members whose
    families the organisation was not served, in any order): one item per family, shuffled,
    the first ``n``; its source names the set. Pure: the re-derivation of a past sample
    (``bank.sampling.as_of``) calls it on the state as of the draw."""
    by_family: dict[uuid.UUID, list[SampledItem]] = defaultdict(list)
    for item in candidates:
        by_family[item.family_id].append(item)
    rng = random.Random(seed)
    picks = [rng.choice(sorted(items)) for _family, items in sorted(by_family.items())]
    rng.shuffle(picks)
    chosen = picks[:n]
    shortfall = {SHORTFALL_KEY: n - len(chosen)} if len(chosen) < n else {}
    source = ItemSetSource(set_id)
    return DrawnSample(seed=seed, n=n, items=chosen, shortfall=shortfall, source=source)
