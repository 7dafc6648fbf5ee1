"""Bodies of the item-set routes."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from bank.item_sets import MAX_NAME
from server.api.bodies import RequestBody

RuleScalar = bool | int | float | str | None
RuleValue = RuleScalar | list[RuleScalar] | dict[str, RuleScalar | list[RuleScalar]]
"""What a rule's field may hold: a JSON scalar, a list of them, or an object of those (two
levels). Spelled out, not recursive: the document then says what a rule holds, and
client generators (openapi-python-client) can parse it (a recursive union made them drop
the operations that use it)."""

MAX_SET_ITEMS = 100_000
"""Most item ids one request may name (the body limit usually binds first)."""


class ItemSetIn(RequestBody):
    """A set to save: its name, its items (repeats count once) and, for the record, the
    rule that chose them (a JSON object of finite numbers, nested at most two levels:
    ``RuleValue``)."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    """1 to 100 printable characters, no surrounding spaces; unique."""
    item_ids: list[uuid.UUID] = Field(min_length=1, max_length=MAX_SET_ITEMS)
    rule: dict[str, RuleValue] | None = None


class ItemSetOut(BaseModel):
    """A saved set: how many items it holds and how it was built, never which items."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    n_items: int
    rule: dict[str, RuleValue]
    created_by: str
    """The API key that saved it (``cli`` from the command line)."""
    created_at: datetime
