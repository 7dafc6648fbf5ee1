"""Item review: list items by status, keep, retire or edit one, read its history.

Every status change goes through ``bank.item_status`` (which keeps the sampler's counters
true and writes the history); this module maps its refusals to the API's errors (unknown
item 404, a move not allowed 409, refused text 422) and decides what each role sees: the
answer and explanation only for roles that may review (admins). Services flush; the
request's unit of work commits.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

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
    status: ItemStatus,
    discipline: str | None,
    limit: int,
    before: uuid.UUID | None,
) -> list[BankItemOut]:
    """Items in ``status`` (of ``discipline``), by descending id from ``before``."""
    statement = select(Item).where(Item.status == status.value).order_by(Item.id.desc())
    if discipline is not None:
        statement = statement.where(Item.discipline == discipline)
    if before is not None:
        statement = statement.where(Item.id < before)
    items = list((await db.execute(statement.limit(limit))).scalars())
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
