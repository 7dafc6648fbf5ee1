"""Creating and finding organisations."""

from __future__ import annotations

import uuid
from typing import Protocol, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from server.auth.permissions import Principal
from server.errors import Conflict, InvalidInput, NotFound
from server.orgs.models import Organisation

MAX_NAME = 200
MAX_QUOTA = 1_000_000


class OrgOwned(Protocol):
    """A row that belongs to one organisation."""

    @property
    def org_id(self) -> uuid.UUID: ...


OwnedRow = TypeVar("OwnedRow", bound=OrgOwned)


async def get_visible(
    session: AsyncSession,
    kind: type[OwnedRow],
    row_id: uuid.UUID,
    *,
    principal: Principal,
    noun: str,
) -> OwnedRow:
    """Row ``row_id`` of ``kind`` if ``principal`` may see its organisation's data;
    ``NotFound`` ("no NOUN ID") if it does not exist or may not be seen, the same either
    way, so a row of another organisation is not revealed."""
    row = await session.get(kind, row_id)
    if row is None or not principal.sees_org(row.org_id):
        raise NotFound(f"no {noun} {row_id}")
    return row


async def create_org(session: AsyncSession, *, name: str, operator: bool = False) -> Organisation:
    """Create organisation ``name``; ``Conflict`` if the name is taken.

    ``operator`` makes it the operator's own organisation, the only one whose keys may have
    a platform role (admin, auditor: they act on every organisation); ``Conflict`` naming
    the existing one if there is an operator organisation already (there is at most one)."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"organisation name must be 1-{MAX_NAME} characters, got {name!r}")
    if not name.isprintable() or any("\ud800" <= c <= "\udfff" for c in name):
        raise InvalidInput(
            "an organisation name may not hold control characters or lone surrogates"
        )
    if await find_org(session, name=name) is not None:
        raise Conflict(f"organisation {name!r} already exists")
    if operator and (existing := await find_operator_org(session)) is not None:
        raise Conflict(
            f"organisation {existing.name!r} is the operator already; there can be only one"
        )
    org = Organisation(name=name, is_operator=operator)
    session.add(org)
    await session.flush()
    return org


async def find_org(session: AsyncSession, *, name: str) -> Organisation | None:
    """The organisation called ``name`` (surrounding spaces ignored), or None."""
    name = name.strip()
    result = await session.execute(select(Organisation).where(Organisation.name == name))
    return result.scalar_one_or_none()


async def get_org(session: AsyncSession, *, name: str) -> Organisation:
    """The organisation called ``name``; ``NotFound`` with a hint if there is none."""
    org = await find_org(session, name=name)
    if org is None:
        raise NotFound(
            f"no organisation named {name!r} (create it with: proctor admin create-org {name!r})"
        )
    return org


async def find_operator_org(session: AsyncSession) -> Organisation | None:
    """The operator's organisation (``Organisation.is_operator``), or None if there is none."""
    result = await session.execute(select(Organisation).where(Organisation.is_operator))
    return result.scalar_one_or_none()


async def list_orgs(session: AsyncSession) -> list[Organisation]:
    """Every organisation, the operator's first, then by name."""
    result = await session.execute(
        select(Organisation).order_by(Organisation.is_operator.desc(), Organisation.name)
    )
    return list(result.scalars())


async def set_quotas(
    session: AsyncSession,
    *,
    org_id: uuid.UUID,
    max_concurrent_sessions: int | None,
    max_sessions_per_period: int | None,
) -> Organisation:
    """Set (or, with None, clear back to the settings' defaults) organisation ``org_id``'s
    session quotas; ``InvalidInput`` for a quota below 1, ``NotFound`` for no such
    organisation. Checked at the next session creation (``create_session``)."""
    for name, value in (
        ("max_concurrent_sessions", max_concurrent_sessions),
        ("max_sessions_per_period", max_sessions_per_period),
    ):
        if value is not None and not 1 <= value <= MAX_QUOTA:
            raise InvalidInput(f"{name} must be between 1 and {MAX_QUOTA}, got {value}")
    org = await session.get(Organisation, org_id)
    if org is None:
        raise NotFound(f"no organisation {org_id}")
    org.max_concurrent_sessions = max_concurrent_sessions
    org.max_sessions_per_period = max_sessions_per_period
    await session.flush()
    return org


async def get_org_by_id(session: AsyncSession, *, org_id: uuid.UUID) -> Organisation:
    """Organisation ``org_id``; ``NotFound`` if there is none."""
    org = await session.get(Organisation, org_id)
    if org is None:
        raise NotFound(f"no organisation {org_id}")
    return org
