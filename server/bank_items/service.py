"""Item review: list and search items, keep, retire or edit one, read its history; and
importing an uploaded file into the bank (the console's upload, the command's importer).

Every status change goes through ``bank.item_status`` (which keeps the sampler's counters
true and writes the history); this module maps its refusals to the API's errors (unknown
item 404, a move not allowed 409, refused text 422) and decides what each role sees: the
answer and explanation only for roles that may review (admins). Services flush; the
request's unit of work commits.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path, PurePath

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import column_in, in_chunks
from bank.formats import FORMATS, read_records
from bank.importer import ImportReport, import_records
from bank.item_status import (
    DuplicateContent,
    InvalidReview,
    ReviewAction,
    TransitionRefused,
    UnknownItems,
    change_status,
    revise_item,
)
from bank.models import Item, ItemStatus, ItemStatusChange
from bank.records import RawRecord, RecordError, SourceLocation
from server.auth.permissions import Permission, Principal
from server.bank_items.schemas import (
    BankItemOut,
    ItemHistoryOut,
    ReviewIn,
    ReviewOut,
    StatusChangeOut,
)
from server.errors import Conflict, InvalidInput, NotFound

TARGET = {ReviewAction.KEEP: ItemStatus.ACTIVE, ReviewAction.RETIRE: ItemStatus.RETIRED}
"""The status a keep or a retire moves the item to."""


def sees_answers(principal: Principal) -> bool:
    """Whether ``principal`` sees items' answers and explanations (reviewers only)."""
    return principal.can(Permission.BANK_REVIEW)


@asynccontextmanager
async def _api_errors() -> AsyncIterator[None]:
    """``bank.item_status``'s refusals as the API's errors."""
    try:
        yield
    except UnknownItems as error:
        raise NotFound(str(error)) from None
    except (TransitionRefused, DuplicateContent) as error:
        raise Conflict(str(error)) from None
    except InvalidReview as error:
        raise InvalidInput(str(error)) from None


async def list_items(
    db: AsyncSession,
    *,
    principal: Principal,
    status: ItemStatus | None,
    discipline: str | None,
    limit: int,
    before: uuid.UUID | None,
    search: str | None = None,
    qtype: str | None = None,
    offset: int = 0,
) -> list[BankItemOut]:
    """Items in ``status`` (any status for ``None``), of ``discipline`` and ``qtype`` when
    given, whose question contains ``search`` (case-insensitive for Latin letters; ``%``
    and ``_`` are plain characters), by descending id from ``before``, skipping
    ``offset`` of them."""
    statement = select(Item).order_by(Item.id.desc())
    if status is not None:
        statement = statement.where(Item.status == status.value)
    if discipline is not None:
        statement = statement.where(Item.discipline == discipline)
    if qtype is not None:
        statement = statement.where(Item.qtype == qtype)
    if search:
        statement = statement.where(Item.question.icontains(search, autoescape=True))
    if before is not None:
        statement = statement.where(Item.id < before)
    statement = statement.limit(limit).offset(offset)
    items = list((await db.execute(statement)).scalars())
    latest = await _latest_changes(db, [i.id for i in items])
    with_answer = sees_answers(principal)
    return [BankItemOut.of(i, latest.get(i.id), with_answer=with_answer) for i in items]


async def _latest_changes(
    db: AsyncSession, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, ItemStatusChange]:
    if not item_ids:
        return {}
    newest = (
        select(func.max(ItemStatusChange.id))
        .where(ItemStatusChange.item_id.in_(item_ids))
        .group_by(ItemStatusChange.item_id)
    )
    rows = await db.execute(select(ItemStatusChange).where(ItemStatusChange.id.in_(newest)))
    return {change.item_id: change for change in rows.scalars()}


async def _item_out(db: AsyncSession, item_id: uuid.UUID, *, with_answer: bool) -> BankItemOut:
    item = await db.get(Item, item_id, populate_existing=True)
    if item is None:
        raise NotFound(f"no such item: {item_id}")
    latest = await _latest_changes(db, [item_id])
    return BankItemOut.of(item, latest.get(item_id), with_answer=with_answer)


async def review(
    db: AsyncSession, *, principal: Principal, item_id: uuid.UUID, body: ReviewIn
) -> ReviewOut:
    """Keep (flagged to active), retire (flagged, active or anchor to retired) or edit and
    restore (a flagged item) ``item_id``, as ``principal``. Refuses (404) an unknown item,
    (409) a move not allowed or to the status the item already has, and an edit to another
    item's content, (422) an edit the importer would refuse."""
    revision: Item | None = None
    async with _api_errors():
        if body.action is ReviewAction.EDIT:
            revision = await revise_item(
                db,
                item_id=item_id,
                question=body.question,
                options=body.options,
                answer=body.answer,
                explanation=body.explanation,
                note=body.note,
                actor=principal.subject,
            )
        else:
            target = TARGET[body.action]
            changed = await change_status(
                db,
                item_ids=[item_id],
                to=target,
                actor=principal.subject,
                reasons=[body.action.value],
                note=body.note,
            )
            if not changed:
                raise Conflict(f"item {item_id} is already {target.value}")
    with_answer = sees_answers(principal)
    return ReviewOut(
        action=body.action,
        item=await _item_out(db, item_id, with_answer=with_answer),
        revision=(
            await _item_out(db, revision.id, with_answer=with_answer)
            if revision is not None
            else None
        ),
    )


async def history(db: AsyncSession, *, principal: Principal, item_id: uuid.UUID) -> ItemHistoryOut:
    """``item_id``'s status changes, oldest first, and its edited versions either way
    (notes for admins only)."""
    item = await db.get(Item, item_id)
    if item is None:
        raise NotFound(f"no such item: {item_id}")
    rows = await db.execute(
        select(ItemStatusChange)
        .where(ItemStatusChange.item_id == item_id)
        .order_by(ItemStatusChange.id)
    )
    with_note = sees_answers(principal)
    changes = [StatusChangeOut.of(c, with_note=with_note) for c in rows.scalars()]
    replaced_by: list[uuid.UUID] = []
    if any(ReviewAction.EDIT.value in c.reasons for c in changes):  # only an edit makes one
        found = await db.execute(
            select(Item.id).where(Item.replaces_id == item_id).order_by(Item.created_at)
        )
        replaced_by = list(found.scalars())
    return ItemHistoryOut(
        item_id=item.id,
        status=ItemStatus(item.status),
        replaces_id=item.replaces_id,
        replaced_by=replaced_by,
        changes=changes,
    )


async def get_item(db: AsyncSession, *, principal: Principal, item_id: uuid.UUID) -> BankItemOut:
    """One item with its latest status change; its answer and explanation only when
    :func:`sees_answers` (admins). ``NotFound`` for an unknown item."""
    return await _item_out(db, item_id, with_answer=sees_answers(principal))


UPLOAD_NAME = "upload.jsonl"
"""The name of an uploaded file that brings no usable name of its own."""
MAX_UPLOAD_NAME = 120


def upload_name(client_name: str | None) -> str:
    """The basename of a client's file name, as reports show it and the format is detected
    from: no directory part, no control character, NUL or lone surrogate, at most
    ``MAX_UPLOAD_NAME`` characters (the suffix kept); :data:`UPLOAD_NAME` if nothing is
    left."""
    base = re.split(r"[/\\]", client_name or "")[-1]
    clean = "".join(c for c in base if c.isprintable()).strip()
    if len(clean) > MAX_UPLOAD_NAME:
        path = PurePath(clean)
        suffix = path.suffix[:12]
        clean = path.stem[: MAX_UPLOAD_NAME - len(suffix)] + suffix
    return clean if clean.strip(".") else UPLOAD_NAME


def _named(records: Iterator[RawRecord], name: str) -> Iterator[RawRecord]:
    """``records`` located in ``name`` (not the temporary file they were read from)."""
    try:
        for raw in records:
            yield RawRecord(SourceLocation(name, raw.location.line), raw.data)
    except RecordError as error:
        raise RecordError(
            SourceLocation(name, error.location.line), error.field, error.message
        ) from None


async def import_upload(
    db: AsyncSession,
    *,
    client_name: str | None,
    data: bytes,
    fmt: str | None,
    augment: bool,
    add_disciplines: bool,
) -> ImportReport:
    """Import an uploaded file as ``proctor bank import`` imports one: the same readers
    (``fmt`` one of ``bank.formats.FORMATS``, or ``None`` to detect it from the name's
    suffix and first record) and the same all-or-nothing ``bank.importer.import_records``
    in ``db``'s transaction. Locations read ``name:line`` with ``name`` the sanitised
    :func:`upload_name`.

    Raises
    ------
    ImportRefused
        Every bad record (``name:line: field: what``); nothing was written.
    InvalidInput
        For a format that is unknown or cannot be told from the file.
    """
    name = upload_name(client_name)
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}")
    with tempfile.TemporaryDirectory(prefix="proctor-upload-") as directory:
        path = Path(directory) / name
        path.write_bytes(data)
        try:
            records = read_records(path, fmt)
        except (ValueError, OSError) as error:
            raise InvalidInput(str(error).replace(str(path), name)) from None
        # workers=0: no fork from the API's threaded, event-looped process; an upload is
        # bounded by the body limit, and bulk imports go through `proctor bank import`.
        return await import_records(
            db,
            _named(records, name),
            augment=augment,
            add_disciplines=add_disciplines,
            workers=0,
        )


async def items_by_id(
    db: AsyncSession, *, principal: Principal, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, BankItemOut]:
    """The items of ``item_ids`` that exist (without their latest change), by id; answers
    and explanations only when :func:`sees_answers`."""
    if not item_ids:
        return {}
    with_answer = sees_answers(principal)
    found: dict[uuid.UUID, BankItemOut] = {}
    for chunk in in_chunks(db, list(item_ids)):
        rows = await db.execute(select(Item).where(column_in(db, Item.id, chunk)))
        for item in rows.scalars():
            found[item.id] = BankItemOut.of(item, None, with_answer=with_answer)
    return found
