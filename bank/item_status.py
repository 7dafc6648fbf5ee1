"""Item status changes and edit-and-restore: the one way an item changes status.

Every change of ``items.status`` after import goes through :func:`change_status` (the
health job flagging items, an admin keeping, retiring or editing one), which

* allows only the moves in :data:`TRANSITIONS` and refuses the whole call otherwise
  (:class:`TransitionRefused`, nothing changed);
* skips items already in the target status: no row, no counter change, and they are not
  in the returned list, so the health job may flag the same items twice and a retried
  call changes nothing;
* keeps the sampler's maintained counts true: ``Stratum.n_active`` (active items per
  stratum) and ``OrgStratumExclusion.n_items`` (per organisation and stratum, the active
  items of families served to that organisation, as ``bank.exposure`` maintains them);
* writes one :class:`~bank.models.ItemStatusChange` per changed item (the history).

Work is set-based: a statement per chunk of items (``bank.bulk.in_chunks``), never one per
item, so a health job may flag thousands in one call.

:func:`revise_item` edits a flagged item and restores it as a new version: a new item of the
same family, stratum and variant with ``replaces_id`` pointing at the old one, which is
retired through :func:`change_status`.

The counters are exact for changes that do not run at the same time as a session reserving
one of the changed items' families: such a race can leave an organisation's exclusion count
one high (the sampler then plans with one item less; what it serves is checked item by item,
so it never serves a flagged or retired item).
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, bindparam, column, func, insert, select, table, true, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import column_in, in_chunks, model_table
from bank.database import utcnow
from bank.duplicates.exact import content_hash
from bank.duplicates.near import comparable_text, find_and_index_near_duplicates
from bank.models import (
    Exposure,
    Item,
    ItemStatus,
    ItemStatusChange,
    OrgStratumExclusion,
    Stratum,
    make_slot,
)
from bank.records import ItemRecord, RawRecord, RecordError, SourceLocation, validate_record
from bank.strata import reserve_slots
from bank.stratum_key import StratumKey
from bank.upsert import insert_or_add

__all__ = [
    "MAX_ACTOR",
    "MAX_NOTE",
    "MAX_REASON",
    "TRANSITIONS",
    "DuplicateContent",
    "InvalidReview",
    "ItemReviewError",
    "ItemStatus",
    "TransitionRefused",
    "UnknownItems",
    "allowed",
    "change_status",
    "revise_item",
]

TRANSITIONS: frozenset[tuple[ItemStatus, ItemStatus]] = frozenset(
    {
        (ItemStatus.ACTIVE, ItemStatus.FLAGGED),  # the health job or an admin holds it
        (ItemStatus.FLAGGED, ItemStatus.ACTIVE),  # review: keep
        (ItemStatus.FLAGGED, ItemStatus.RETIRED),  # review: retire (or edit: the old version)
        (ItemStatus.ACTIVE, ItemStatus.RETIRED),
        (ItemStatus.ANCHOR, ItemStatus.RETIRED),
    }
)
"""The allowed ``(from, to)`` moves. Nothing leaves ``retired``; nothing enters ``anchor``
here (``bank.anchor_set`` designates the anchor set)."""

MAX_NOTE = 10_000
MAX_REASON = 100
MAX_REASONS = 50
MAX_ACTOR = 64
"""The length of ``ItemStatusChange.actor``."""
REVISION_LOCATION = SourceLocation("revision", 1)
"""What a revision's validation errors would name as their source (not shown)."""
SHOWN_IDS = 5


class ReviewAction(StrEnum):
    """What a reviewer does with an item."""

    KEEP = "keep"
    """A flagged item goes back to ``active``: sampled again."""
    RETIRE = "retire"
    """A flagged, active or anchor item becomes ``retired``: never sampled again."""
    EDIT = "edit"
    """A flagged item is retired and a corrected version of it (a new item of the same
    family, ``replaces_id`` the old one) becomes ``active``."""


class ItemReviewError(ValueError):
    """A status change or revision that was refused; nothing was changed."""


class UnknownItems(ItemReviewError):
    """Some of the items do not exist."""

    def __init__(self, missing: Sequence[uuid.UUID]) -> None:
        self.missing = list(missing)
        super().__init__(f"no such item: {_some(self.missing)}")


class TransitionRefused(ItemReviewError):
    """A move not in :data:`TRANSITIONS` (or an edit of an item that is not flagged)."""


class InvalidReview(ItemReviewError):
    """Refused text: a note, reason or actor, or an edited field (names the field)."""


class DuplicateContent(ItemReviewError):
    """The edited question (with its options) is already another item's."""


def allowed(from_status: ItemStatus | str, to: ItemStatus | str) -> bool:
    """Whether an item may go from ``from_status`` to ``to``."""
    return (ItemStatus(from_status), ItemStatus(to)) in TRANSITIONS


@dataclass(frozen=True, slots=True)
class _Locked:
    status: ItemStatus
    stratum_id: int


async def change_status(
    db: AsyncSession,
    *,
    item_ids: Sequence[uuid.UUID],
    to: ItemStatus,
    actor: str,
    reasons: Sequence[str] = (),
    note: str | None = None,
    snapshot_id: uuid.UUID | None = None,
) -> list[ItemStatusChange]:
    """Move ``item_ids`` to ``to`` in ``db``'s transaction (flush, never commit).

    Items already in ``to`` are skipped (not an error, no history row). The others must all
    be allowed to move (:data:`TRANSITIONS`); their rows are locked first (in id order, so
    two calls cannot deadlock on each other), then updated, then the stratum and exclusion
    counters are shifted by the items leaving or entering ``active``.

    Parameters
    ----------
    item_ids
        The items; repeats count once.
    to
        The new status.
    actor
        Who changes it: an API key id, ``cli`` or ``health-job`` (at most 64 characters).
    reasons
        The flag rules that fired or the review action, stored with each change.
    note
        Free text of the reviewer.
    snapshot_id
        The health snapshot whose figures flagged the items.

    Returns
    -------
    list of ItemStatusChange
        The history rows written, one per changed item, in the order of ``item_ids``.

    Raises
    ------
    UnknownItems
        If an item does not exist.
    TransitionRefused
        If an item may not go to ``to`` from its status; nothing is changed.
    InvalidReview
        For an actor, note or reason that is empty, too long or not storable text.
    """
    to = ItemStatus(to)
    _check_text("actor", actor, MAX_ACTOR)
    if note is not None:
        _check_text("note", note, MAX_NOTE)
    if len(reasons) > MAX_REASONS:
        raise InvalidReview(f"reasons: more than {MAX_REASONS}")
    for reason in reasons:
        _check_text("reasons", reason, MAX_REASON)
    ids = list(dict.fromkeys(item_ids))
    locked = await _lock_items(db, ids)
    missing = [i for i in ids if i not in locked]
    if missing:
        raise UnknownItems(missing)
    moving = [i for i in ids if locked[i].status is not to]
    _refuse_disallowed(moving, locked, to)
    if not moving:
        return []
    for chunk in in_chunks(db, moving):
        await db.execute(
            update(Item)
            .where(column_in(db, Item.id, chunk))
            .values(status=to.value)
            .execution_options(synchronize_session="fetch")
        )
    if to is ItemStatus.ACTIVE:
        await _shift_counts(db, moving, locked, sign=1)
    else:
        leaving = [i for i in moving if locked[i].status is ItemStatus.ACTIVE]
        await _shift_counts(db, leaving, locked, sign=-1)
    at = utcnow()
    rows = [
        {
            "item_id": i,
            "from_status": locked[i].status.value,
            "to_status": to.value,
            "reasons": list(reasons),
            "note": note,
            "actor": actor,
            "snapshot_id": snapshot_id,
            "created_at": at,
        }
        for i in moving
    ]
    # A bulk INSERT ... RETURNING: the unit of work would cost a flush step per row.
    written = await db.scalars(insert(ItemStatusChange).returning(ItemStatusChange), rows)
    by_item = {change.item_id: change for change in written}
    return [by_item[i] for i in moving]


def _refuse_disallowed(
    moving: Sequence[uuid.UUID], locked: dict[uuid.UUID, _Locked], to: ItemStatus
) -> None:
    refused = [i for i in moving if (locked[i].status, to) not in TRANSITIONS]
    if not refused:
        return
    froms = Counter(locked[i].status.value for i in refused)
    allowed_from = sorted(f.value for f, t in TRANSITIONS if t is to)
    raise TransitionRefused(
        f"{len(refused)} item(s) may not become {to.value} from "
        f"{', '.join(f'{s} ({n})' for s, n in sorted(froms.items()))}: {_some(refused)}; "
        f"only {' or '.join(allowed_from) or 'no'} items may become {to.value}"
    )


async def _lock_items(db: AsyncSession, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, _Locked]:
    """The items' status and stratum, their rows locked (PostgreSQL ``FOR UPDATE``)."""
    found: dict[uuid.UUID, _Locked] = {}
    for chunk in in_chunks(db, ids):
        rows = await db.execute(
            select(Item.id, Item.status, Item.stratum_id)
            .where(column_in(db, Item.id, chunk))
            .order_by(Item.id)
            .with_for_update()
        )
        for item_id, status, stratum_id in rows.tuples():
            found[item_id] = _Locked(ItemStatus(status), stratum_id)
    return found


async def _shift_counts(
    db: AsyncSession, ids: Sequence[uuid.UUID], locked: dict[uuid.UUID, _Locked], *, sign: int
) -> None:
    """Add (``sign=1``) or remove (``-1``) ``ids`` from their strata's active counts and
    from every organisation's exclusions for the families served to it."""
    if not ids:
        return
    per_stratum = Counter(locked[i].stratum_id for i in ids)
    await _shift_strata(db, per_stratum, sign=sign)
    await _shift_exclusions(db, ids, sign=sign)


async def _shift_strata(db: AsyncSession, per_stratum: Counter[int], *, sign: int) -> None:
    strata = model_table(Stratum)
    connection = await db.connection()  # one executemany, in stratum order
    await connection.execute(
        update(strata)
        .where(strata.c.id == bindparam("stratum"))
        .values(n_active=strata.c.n_active + bindparam("added")),
        [{"stratum": s, "added": sign * n} for s, n in sorted(per_stratum.items())],
    )


_ORGANISATIONS = table("organisations", column("id"))
"""Only to enumerate the organisations: with one fixed, an exposure is one primary-key
probe ``(org_id, family_id)``; ``exposures`` has no index on ``family_id`` alone."""


async def _shift_exclusions(db: AsyncSession, ids: Sequence[uuid.UUID], *, sign: int) -> None:
    """Shift ``OrgStratumExclusion.n_items`` by ``sign`` for every (organisation, item of
    ``ids``) whose family was served to (or is reserved by) the organisation."""
    per_org_stratum: Counter[tuple[uuid.UUID, int]] = Counter()
    for chunk in in_chunks(db, ids):
        rows = await db.execute(
            select(Exposure.org_id, Item.stratum_id, func.count())
            .select_from(Item)
            .join(_ORGANISATIONS, true())
            .join(
                Exposure,
                and_(
                    Exposure.org_id == _ORGANISATIONS.c.id,
                    Exposure.family_id == Item.family_id,
                ),
            )
            .where(column_in(db, Item.id, chunk))
            .group_by(Exposure.org_id, Item.stratum_id)
        )
        for org_id, stratum_id, n in rows.tuples():
            per_org_stratum[(org_id, stratum_id)] += n
    await insert_or_add(
        db,
        OrgStratumExclusion,
        [
            {"org_id": org, "stratum_id": stratum, "n_items": sign * n}
            for (org, stratum), n in sorted(per_org_stratum.items(), key=_org_stratum_order)
        ],
        keys=["org_id", "stratum_id"],
        counter="n_items",
    )


def _org_stratum_order(entry: tuple[tuple[uuid.UUID, int], int]) -> tuple[str, int]:
    (org, stratum), _ = entry
    return str(org), stratum


async def revise_item(
    db: AsyncSession,
    *,
    item_id: uuid.UUID,
    question: str | None = None,
    options: Sequence[str] | None = None,
    answer: str | None = None,
    explanation: str | None = None,
    note: str,
    actor: str,
) -> Item:
    """Edit the flagged item ``item_id`` and restore it as a new active version.

    The new item has a new id, the old one's family, discipline, question type,
    sub-discipline, variant, source and language, a fresh slot in the same stratum
    (``bank.strata.reserve_slots``), the edited fields (``None``: unchanged) validated as
    the importer validates records (``bank.records.validate_record``: a multiple-choice
    answer may be a letter or an option's text, stored as the letter), its content hash
    computed as the importer computes it, and ``replaces_id`` = ``item_id``. The old item
    is retired through :func:`change_status` (reason ``edit``, with ``note``); an
    organisation served the family has the new item counted in its exclusions, like every
    active item of a family it has seen.

    An edit of the answer or explanation only keeps the question and options, whose hash
    identifies the content: the hash moves to the new version, and the retired one keeps
    a hash derived from its id (so the corrected item blocks a re-import of its question
    as the old one did).

    Raises
    ------
    UnknownItems
        If the item does not exist.
    TransitionRefused
        If the item is not flagged.
    InvalidReview
        For an edit that changes nothing, or a field the importer would refuse (NUL, lone
        surrogates, too long, an answer that is not an option...), naming the field.
    DuplicateContent
        If another item already has the edited question and options.
    """
    _check_text("note", note, MAX_NOTE)
    _check_text("actor", actor, MAX_ACTOR)
    old = (
        await db.execute(select(Item).where(Item.id == item_id).with_for_update())
    ).scalar_one_or_none()
    if old is None:
        raise UnknownItems([item_id])
    if old.status != ItemStatus.FLAGGED:
        raise TransitionRefused(
            f"item {item_id} is {old.status}: only a flagged item can be edited and restored"
        )
    record = _validated(old, question, options, answer, explanation)
    new_options = list(record.options) if record.options is not None else None
    if (record.question, new_options, record.answer, record.explanation) == (
        old.question,
        old.options,
        old.answer,
        old.explanation,
    ):
        raise InvalidReview(
            "the edit changes nothing (give a new question, options, answer or explanation)"
        )
    digest = content_hash(old.qtype, record.question, new_options)
    await _free_hash(db, old, digest)
    await change_status(
        db,
        item_ids=[old.id],
        to=ItemStatus.RETIRED,
        actor=actor,
        reasons=[ReviewAction.EDIT.value],
        note=note,
    )
    new = await _insert_revision(db, old, record.question, new_options, record, digest)
    await _shift_exclusions(db, [new.id], sign=1)
    if new.variant == "original":
        await find_and_index_near_duplicates(
            db,
            ids=[new.id],
            texts=[comparable_text(new.question, new_options)],
            locations=[REVISION_LOCATION],
        )
    return new


def _validated(
    old: Item,
    question: str | None,
    options: Sequence[str] | None,
    answer: str | None,
    explanation: str | None,
) -> ItemRecord:
    """The edited item as the importer validates it; ``InvalidReview`` naming the field."""
    data: dict[str, Any] = {
        "discipline": old.discipline,
        "subdiscipline": old.subdiscipline,
        "qtype": old.qtype,
        "question": old.question if question is None else question,
        "options": old.options if options is None else list(options),
        "answer": old.answer if answer is None else answer,
        "explanation": old.explanation if explanation is None else explanation,
        "source": old.source,
        "language": old.language,
    }
    try:
        return validate_record(RawRecord(REVISION_LOCATION, data))
    except RecordError as error:
        raise InvalidReview(f"{error.field}: {error.message}") from None


async def _free_hash(db: AsyncSession, old: Item, digest: str) -> None:
    """Refuse ``digest`` if another item has it; if the old version has it (an edit of the
    answer or explanation only), give the old version a hash of its own id instead."""
    holder = await db.scalar(select(Item.id).where(Item.content_hash == digest))
    if holder is None:
        return
    if holder != old.id:
        raise DuplicateContent(
            f"item {holder} already has this question and options; edit the text further "
            "or keep that item instead"
        )
    retired_hash = hashlib.sha256(f"superseded:{old.id}".encode()).hexdigest()
    await db.execute(
        update(Item)
        .where(Item.id == old.id)
        .values(content_hash=retired_hash)
        .execution_options(synchronize_session="fetch")
    )


async def _insert_revision(
    db: AsyncSession,
    old: Item,
    question: str,
    options: list[str] | None,
    record: ItemRecord,
    digest: str,
) -> Item:
    key = StratumKey(old.discipline, old.qtype, old.subdiscipline)
    stratum_id, rank = (await reserve_slots(db, [key]))[key]
    new = Item(
        id=uuid.uuid4(),
        family_id=old.family_id,
        variant=old.variant,
        stratum_id=stratum_id,
        slot=make_slot(stratum_id, rank),
        discipline=old.discipline,
        subdiscipline=old.subdiscipline,
        qtype=old.qtype,
        question=question,
        options=options,
        answer=record.answer,
        explanation=record.explanation,
        source=old.source,
        language=old.language,
        status=ItemStatus.ACTIVE.value,
        content_hash=digest,
        replaces_id=old.id,
    )
    db.add(new)
    await db.flush()
    return new


def _check_text(name: str, text: str, max_len: int) -> None:
    """Refuse empty text, text over ``max_len`` characters, NUL (PostgreSQL cannot store
    it) and lone surrogates (not Unicode text)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidReview(f"{name}: must be non-empty text")
    if len(text) > max_len:
        raise InvalidReview(f"{name}: longer than {max_len} characters")
    if "\x00" in text:
        raise InvalidReview(f"{name}: contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidReview(f"{name}: is not valid Unicode at character {error.start}") from None


def _some(ids: Iterable[uuid.UUID]) -> str:
    listed = list(ids)
    shown = ", ".join(str(i) for i in listed[:SHOWN_IDS])
    more = len(listed) - SHOWN_IDS
    return shown + (f" and {more} more" if more > 0 else "")
