"""``/v1/admin/bank/item-sets``: save a named item set (admins), list them (admins and
auditors). Members are never listed: what a set holds is the bank's private knowledge."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.dependencies import BankHealthReader, BankReviewer, DbSession
from server.api.openapi import answers
from server.errors import Conflict
from server.item_sets import service
from server.item_sets.schemas import ItemSetIn, ItemSetOut

router = APIRouter(tags=["bank"])


@router.post(
    "/v1/admin/bank/item-sets",
    response_model=ItemSetOut,
    status_code=201,
    operation_id="bank.save_item_set",
)
@answers(Conflict)
async def save_item_set(body: ItemSetIn, db: DbSession, principal: BankReviewer) -> ItemSetOut:
    """Save the items under a new name; sessions may then draw from it (``item_set``).
    422 for a bad name or rule or item ids the bank does not have (how many), 409 when the
    name is taken; nothing is saved then."""
    record = await service.save(
        db, principal=principal, name=body.name, item_ids=body.item_ids, rule=body.rule
    )
    return ItemSetOut.model_validate(record)


@router.get(
    "/v1/admin/bank/item-sets", response_model=list[ItemSetOut], operation_id="bank.list_item_sets"
)
async def list_item_sets(db: DbSession, principal: BankHealthReader) -> list[ItemSetOut]:
    """Every saved item set, by name: size, rule, who saved it and when."""
    return [ItemSetOut.model_validate(r) for r in await service.list_sets(db)]
