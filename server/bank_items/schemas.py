"""Bodies of the item review routes. Response models are explicit allow-lists: an item's
answer and explanation are shown to roles that may review (admins) and null for the others
(auditors); the question and its options are shown to both."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bank.item_status import MAX_NOTE, ReviewAction
from bank.models import Item, ItemStatus, ItemStatusChange
from bank.records import MAX_OPTIONS, MAX_TEXT
from server.api.bodies import RequestBody

EDITED_FIELDS = ("question", "options", "answer", "explanation")


class ReviewIn(RequestBody):
    """A review of one item. ``question``, ``options``, ``answer`` and ``explanation`` are
    for ``edit`` only (what is left out stays as it was; at least one is needed) and are
    validated as an import validates records."""

    action: ReviewAction
    note: str = Field(min_length=1, max_length=MAX_NOTE)
    """Why: kept in the item's history."""
    question: str | None = Field(None, max_length=MAX_TEXT)
    options: list[str] | None = Field(None, max_length=MAX_OPTIONS)
    answer: str | None = Field(None, max_length=MAX_TEXT)
    """For multiple choice: the letter of the right option, or its exact text."""
    explanation: str | None = Field(None, max_length=MAX_TEXT)

    @model_validator(mode="after")
    def _edit_fields_only_for_edit(self) -> ReviewIn:
        given = [name for name in EDITED_FIELDS if getattr(self, name) is not None]
        if self.action is ReviewAction.EDIT and not given:
            raise ValueError(f"edit needs at least one of {', '.join(EDITED_FIELDS)}")
        if self.action is not ReviewAction.EDIT and given:
            raise ValueError(f"{', '.join(given)}: only for action edit")
        return self


class StatusChangeOut(BaseModel):
    """One change of an item's status."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    from_status: ItemStatus
    to_status: ItemStatus
    reasons: list[str]
    """The flag rules that fired (from the health job) or the review action."""
    note: str | None
    """Admins only; null for auditors (a reviewer's note may spell out the answer)."""
    actor: str
    """An API key id, ``cli`` or ``health-job``."""
    snapshot_id: uuid.UUID | None
    """The health snapshot whose figures flagged the item."""
    at: datetime = Field(validation_alias="created_at")

    @classmethod
    def of(cls, change: ItemStatusChange, *, with_note: bool) -> StatusChangeOut:
        out = cls.model_validate(change)
        return out if with_note else out.model_copy(update={"note": None})


class BankItemOut(BaseModel):
    """A bank item under review, with its latest status change."""

    id: uuid.UUID
    family_id: uuid.UUID
    variant: str
    discipline: str
    subdiscipline: str
    qtype: str
    status: ItemStatus
    question: str
    options: list[str] | None
    answer: str | None
    """Admins only; null for auditors."""
    explanation: str | None
    """Admins only; null for auditors."""
    replaces_id: uuid.UUID | None
    """The item this one is the edited version of."""
    created_at: datetime
    latest_change: StatusChangeOut | None

    @classmethod
    def of(cls, item: Item, latest: ItemStatusChange | None, *, with_answer: bool) -> BankItemOut:
        return cls(
            id=item.id,
            family_id=item.family_id,
            variant=item.variant,
            discipline=item.discipline,
            subdiscipline=item.subdiscipline,
            qtype=item.qtype,
            status=ItemStatus(item.status),
            question=item.question,
            options=item.options,
            answer=item.answer if with_answer else None,
            explanation=item.explanation if with_answer else None,
            replaces_id=item.replaces_id,
            created_at=item.created_at,
            latest_change=(
                StatusChangeOut.of(latest, with_note=with_answer) if latest is not None else None
            ),
        )


class ReviewOut(BaseModel):
    """What a review did: the reviewed item and, for ``edit``, its new version."""

    action: ReviewAction
    item: BankItemOut
    revision: BankItemOut | None = None
    """The new active version (``edit`` only)."""


class ItemHistoryOut(BaseModel):
    """An item's status changes, oldest first, and its place among edited versions."""

    item_id: uuid.UUID
    status: ItemStatus
    replaces_id: uuid.UUID | None
    """The item this one is the edited version of."""
    replaced_by: list[uuid.UUID]
    """The edited versions of this item."""
    changes: list[StatusChangeOut]
