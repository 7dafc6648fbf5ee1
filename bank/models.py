"""Tables of the question bank: strata, items, exposure and drawn samples.

Sampling speed comes from two pieces of maintained state (see ``bank.sampling``):

* ``strata`` holds one row per (discipline, qtype, subdiscipline) with its item counts,
  so planning quotas never scans ``items``;
* every item has a dense ``slot`` inside its stratum (``stratum_id << 32 | rank``), so a
  uniform draw is "pick random ranks, fetch those slots" through one unique index.

``org_stratum_exclusions`` counts, per organisation and stratum, the items whose family has
already been served to that organisation, so availability is known without an anti-join.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from bank.database import Base, JSONType, utcnow
from bank.sealing import SealedText


class ItemStatus(StrEnum):
    """Where an item stands; the allowed changes between them are ``bank.item_status``'s."""

    ACTIVE = "active"
    """Sampled for ordinary sessions."""
    FLAGGED = "flagged"
    """Held for review (by the health job or an admin): not sampled until kept."""
    RETIRED = "retired"
    """Never sampled again (kept for history and for the answers already given to it)."""
    ANCHOR = "anchor"
    """In the private anchor set (``bank.anchor_set``): drawn only by anchor-set sessions."""


ITEM_STATUSES: frozenset[str] = frozenset(status.value for status in ItemStatus)
"""The values of :class:`ItemStatus`, as the ``items.status`` column stores them."""

SLOT_RANK_BITS = 32


def make_slot(stratum_id: int, rank: int) -> int:
    """Pack a stratum id and a dense rank into the item's unique ``slot``."""
    return (stratum_id << SLOT_RANK_BITS) | rank


class Discipline(Base):
    """A discipline of the bank's taxonomy (see ``bank.taxonomy``); ``evaluated`` ones
    share the quota of a session (stage 1 of the stratified sample)."""

    __tablename__ = "disciplines"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    """Canonical key (``bank.taxonomy.canonical_key``); items and strata hold it."""
    display_name: Mapped[str] = mapped_column(String(200))
    evaluated: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Stratum(Base):
    """A discipline × question type × sub-discipline cell with its maintained counts."""

    __tablename__ = "strata"
    __table_args__ = (UniqueConstraint("discipline", "qtype", "subdiscipline"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    discipline: Mapped[str] = mapped_column(String(100))
    """The canonical key of a ``Discipline`` (the importer adds only known ones)."""
    qtype: Mapped[str] = mapped_column(String(40))
    subdiscipline: Mapped[str] = mapped_column(String(200))
    n_slots: Mapped[int] = mapped_column(Integer, default=0)
    """Next free rank: every item ever placed here, whatever its status."""
    n_active: Mapped[int] = mapped_column(Integer, default=0)


class Item(Base):
    """One question. ``family_id`` equals ``id`` for originals; variants share the parent's."""

    __tablename__ = "items"
    __table_args__ = (
        CheckConstraint(
            f"status IN ({', '.join(repr(s.value) for s in ItemStatus)})", name="status_known"
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    family_id: Mapped[uuid.UUID] = mapped_column(index=True)
    variant: Mapped[str] = mapped_column(String(40), default="original")
    """``original``, ``true_false:<option index>`` or ``fill_in``."""
    stratum_id: Mapped[int] = mapped_column(ForeignKey("strata.id"))
    """Also the high half of ``slot``, whose unique index serves lookups by stratum."""
    slot: Mapped[int] = mapped_column(BigInteger, unique=True)
    discipline: Mapped[str] = mapped_column(String(100))
    """The canonical key of a ``Discipline``, the same as the stratum's."""
    subdiscipline: Mapped[str] = mapped_column(String(200))
    qtype: Mapped[str] = mapped_column(String(40))
    question: Mapped[str] = mapped_column(Text)
    options: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    answer: Mapped[str] = mapped_column(SealedText("items.answer"))
    """Sealed at rest (``bank.sealing``), like ``explanation``: never searched in SQL."""
    explanation: Mapped[str | None] = mapped_column(SealedText("items.explanation"), nullable=True)
    source: Mapped[str | None] = mapped_column(String(200), nullable=True)
    language: Mapped[str] = mapped_column(String(16), default="zh")
    status: Mapped[str] = mapped_column(String(16), default=ItemStatus.ACTIVE.value)
    """An :class:`ItemStatus` value."""
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    replaces_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    """The retired item this one is the edited version of (review: edit and restore)."""


class Exposure(Base):
    """A family served to an organisation: never sampled for it again."""

    __tablename__ = "exposures"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), primary_key=True
    )
    family_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("items.id"))
    """The item of the family that was allocated (and, once delivered, seen)."""
    exposed_at: Mapped[datetime] = mapped_column(default=utcnow)
    session_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True, index=True)
    """The evaluation session holding the family; None for exposure recorded directly."""
    delivered_at: Mapped[datetime | None] = mapped_column(nullable=True)
    """When the item was delivered; None while it is only reserved by an allocation.
    Reserved families are excluded from sampling like delivered ones, and go back to the
    pool (the row is deleted) if their session ends before delivering them."""


class OrgStratumExclusion(Base):
    """How many items of a stratum belong to families exposed to an organisation."""

    __tablename__ = "org_stratum_exclusions"

    org_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("organisations.id", ondelete="CASCADE"), primary_key=True
    )
    stratum_id: Mapped[int] = mapped_column(ForeignKey("strata.id"), primary_key=True)
    n_items: Mapped[int] = mapped_column(Integer, default=0)


class Sample(Base):
    """A drawn sample: the seed that re-derives it and what could not be placed."""

    __tablename__ = "samples"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("organisations.id"), index=True)
    seed: Mapped[str] = mapped_column(String(64))
    n_requested: Mapped[int] = mapped_column(Integer)
    n_drawn: Mapped[int] = mapped_column(Integer)
    shortfall: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    drawn_at: Mapped[datetime | None] = mapped_column(nullable=True)
    """The instant the bank and exposure state were read (after the organisation's
    sampling lock was taken): re-deriving the sample reads the state as of this instant.
    None on samples drawn before commitments existed."""
    source: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """How it was drawn: ``{"kind": "stratified", "disciplines": [...]}``, ``{"kind":
    "anchor"}`` or ``{"kind": "item_set", "item_set_id": ...}`` (committed to), as
    ``bank.sampling.source.source_json`` writes it; read it with ``parse_source``."""
    salt: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """Random salt of the commitment (hex); revealed with the seed once the session is
    scored."""
    commitment: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """SHA-256 commitment to the seed, salt, source and ordered item ids (hex), given to
    the session's creator before any item is delivered."""


class ExposureRelease(Base):
    """An exposure that was given back to the pool (its ``exposures`` row deleted), kept so
    the exposure state at any past instant can be rebuilt (re-deriving a sample)."""

    __tablename__ = "exposure_releases"
    __table_args__ = (Index(None, "org_id", "released_at"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org_id: Mapped[uuid.UUID] = mapped_column()
    family_id: Mapped[uuid.UUID] = mapped_column()
    item_id: Mapped[uuid.UUID] = mapped_column()
    session_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    exposed_at: Mapped[datetime] = mapped_column()
    released_at: Mapped[datetime] = mapped_column(default=utcnow)


class SampleItem(Base):
    """One position of a sample. The unique family constraint is the last line of defence."""

    __tablename__ = "sample_items"
    __table_args__ = (
        UniqueConstraint("sample_id", "family_id"),
        UniqueConstraint("sample_id", "item_id"),
    )

    sample_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("samples.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("items.id"))
    family_id: Mapped[uuid.UUID] = mapped_column()
    drawn_position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The position the draw gave the item (the committed order); differs from
    ``position`` only after an adaptive session moved it. None on samples drawn before
    commitments existed."""


class ItemLshKey(Base):
    """MinHash LSH band keys of original items, to find near duplicates across imports.

    No foreign key to ``items``: it would cost a trigger per row on the eight rows an import
    writes per item, and items are retired, never deleted."""

    __tablename__ = "item_lsh_keys"

    key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)


class ItemStatusChange(Base):
    """One change of an item's status (flagged by health, kept, retired, restored), with
    its reasons and who made it; the item's review history."""

    __tablename__ = "item_status_changes"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("items.id"), index=True)
    from_status: Mapped[str] = mapped_column(String(16))
    to_status: Mapped[str] = mapped_column(String(16))
    reasons: Mapped[list[str]] = mapped_column(JSONType, default=list)
    """Flag rules that fired (``saturated``, ``floor``, ...) or the review action."""
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    actor: Mapped[str] = mapped_column(String(64))
    """Who changed it: an API key id, ``cli`` or ``health-job``."""
    snapshot_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    """The health snapshot whose figures flagged the item."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class HealthSnapshot(Base):
    """A health report of the bank as computed at one time on one model population."""

    __tablename__ = "health_snapshots"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    computed_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    population_text: Mapped[str] = mapped_column(String(200), index=True)
    """The population as given (``all``, ``top:10``, ...): snapshots compare within one."""
    population: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    verdict_watermark: Mapped[int] = mapped_column(BigInteger, default=0)
    """The highest verdict id when the verdicts were read (the job recomputes after enough
    new readable ones)."""
    bank: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    """The report's bank figures (read by the history without loading whole reports)."""
    report: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)


class ItemSet(Base):
    """A named set of items (e.g. a selective subset from the health figures) that
    sessions can draw from."""

    __tablename__ = "item_sets"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    rule: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    """How the set was built (the subset rule and its figures), for the record."""
    n_items: Mapped[int] = mapped_column(Integer, default=0)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ItemSetMember(Base):
    __tablename__ = "item_set_members"

    set_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("item_sets.id", ondelete="CASCADE"), primary_key=True
    )
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("items.id"), primary_key=True)
