"""``/v1/admin/bank/items``: the item review queue, review actions and item history.

Admins and auditors read (``BankHealthReader``); only admins review (``BankReviewer``) and
only they see answers and explanations. Every request, review actions included, is written
to the audit log by the audit middleware like any other.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query

from bank.models import ItemStatus
from server.api.dependencies import BankHealthReader, BankReviewer, DbSession
from server.api.openapi import answers
from server.bank_items import service
from server.bank_items.schemas import BankItemOut, ItemHistoryOut, ReviewIn, ReviewOut
from server.errors import Conflict

router = APIRouter(tags=["bank review"])
ItemId = Annotated[uuid.UUID, Path(description="Item id (a UUID).")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Discipline = Annotated[str | None, Query(min_length=1, max_length=100)]


@router.get(
    "/v1/admin/bank/items", response_model=list[BankItemOut], operation_id="bank.list_items"
)
async def list_items(
    db: DbSession,
    principal: BankHealthReader,
    status: ItemStatus = ItemStatus.FLAGGED,
    discipline: Discipline = None,
    limit: Limit = 100,
    before: uuid.UUID | None = None,
) -> list[BankItemOut]:
    """Items in a status (default ``flagged``: the review queue), optionally of one
    discipline (its key), each with its latest status change (the health flags that fired,
    or the last review). Descending item id; page with ``before`` = the last id returned.
    Answers and explanations are shown to admins only (null for auditors)."""
    return await service.list_items(
        db,
        principal=principal,
        status=status,
        discipline=discipline,
        limit=limit,
        before=before,
    )


@router.post(
    "/v1/admin/bank/items/{item_id}/review",
    response_model=ReviewOut,
    operation_id="bank.review_item",
)
@answers(Conflict)
async def review_item(
    item_id: ItemId, body: ReviewIn, db: DbSession, principal: BankReviewer
) -> ReviewOut:
    """Review an item: ``keep`` (flagged to active), ``retire`` (flagged, active or anchor
    to retired) or ``edit`` (a flagged item: retired, and a corrected new version of its
    family made active). 404 for an unknown item; 409 for a move the item's status does not
    allow (the item stays as it was), to the status it already has, or an edit to another
    item's question; 422 for an edit an import would refuse."""
    return await service.review(db, principal=principal, item_id=item_id, body=body)


@router.get(
    "/v1/admin/bank/items/{item_id}/history",
    response_model=ItemHistoryOut,
    operation_id="bank.item_history",
)
async def item_history(
    item_id: ItemId, db: DbSession, principal: BankHealthReader
) -> ItemHistoryOut:
    """An item's status changes, oldest first (who, when, why; notes for admins only),
    the item it is the edited version of and its own edited versions."""
    return await service.history(db, principal=principal, item_id=item_id)
