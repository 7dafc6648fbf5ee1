"""The one declarative ``Base`` every package's tables hang off, and portable column types.

It lives in ``bank`` because ``bank`` is the lowest layer: ``judge`` and ``server`` may import
it, ``bank`` imports neither. One ``MetaData`` with a naming convention means Alembic
generates stable constraint names on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, DateTime, Dialect, MetaData, TypeDecorator, Uuid
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")
"""JSON on SQLite, JSONB on PostgreSQL."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware datetime on every database: SQLite keeps no offset, so values are
    stored in UTC and given back with ``tzinfo=UTC``."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is not None and dialect.name == "sqlite":
            return value.astimezone(UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the models use."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base: naming convention, UUID and timezone-aware datetime mapping."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        uuid.UUID: Uuid(as_uuid=True),
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
        list[str]: JSONType,
    }
