"""Bodies of the item-set routes."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from bank.item_sets import MAX_NAME
from server.api.bodies import RequestBody

MAX_SET_ITEMS = 100_000
"""Most item ids one request may name (the body limit usually binds first)."""


class ItemSetIn(RequestBody):
    """A set to save: its name, its items (repeats count once) and, for the record, the
    rule that chose them (any JSON object of finite numbers)."""

    name: str = Field(min_length=1, max_length=MAX_NAME)
    """1 to 100 printable characters, no surrounding spaces; unique."""
    item_ids: list[uuid.UUID] = Field(min_length=1, max_length=MAX_SET_ITEMS)
    rule: dict[str, JsonValue] | None = None
    """Documented as an object of any values: a recursive union of the JSON types would say
    more, but client generators (openapi-python-client) cannot parse the recursion and
    drop the operations that use it."""


class ItemSetOut(BaseModel):
    """A saved set: how many items it holds and how it was built, never which items."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    n_items: int
    rule: dict[str, JsonValue]
    created_by: str
    """The API key that saved it (``cli`` from the command line)."""
    created_at: datetime
