"""Item sets for the API: the bank's refusals as the API's errors (422 for a bad set,
409 for a name in use)."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bank.item_sets import DuplicateItemSet, InvalidItemSet, list_item_sets, save_item_set
from bank.models import ItemSet
from server.auth.permissions import Principal
from server.errors import Conflict, InvalidInput


async def save(
    db: AsyncSession,
    *,
    principal: Principal,
    name: str,
    item_ids: Collection[uuid.UUID],
    rule: dict[str, Any] | None,
) -> ItemSet:
    """Save the set for ``principal`` (recorded as its creator); nothing is written when
    it is refused: ``InvalidInput`` (bad name or rule, no items, unknown item ids),
    ``Conflict`` (the name is taken)."""
    try:
        return await save_item_set(
            db, name=name, item_ids=item_ids, rule=rule or {}, actor=principal.subject
        )
    except DuplicateItemSet as error:
        raise Conflict(str(error)) from None
    except InvalidItemSet as error:
        raise InvalidInput(str(error)) from None


async def list_sets(db: AsyncSession) -> list[ItemSet]:
    """Every saved set, by name."""
    return await list_item_sets(db)
