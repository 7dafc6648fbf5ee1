"""The disciplines migration on a bank with mixed-case disciplines, on both databases:
keys become canonical, strata that become one cell merge with dense slots, the taxonomy is
seeded and the disciplines that had items stay evaluated."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.database import utcnow
from bank.models import Discipline, Item, OrgStratumExclusion, Stratum, make_slot
from bank.taxonomy import DEFAULT_TAXONOMY
from server.database import create_engine, unit_of_work, upgrade
from server.orgs.models import Organisation
from tests.support.services import PostgresServer

BEFORE = "e5f6a7b8c9d0"
# (discipline, subdiscipline, items): "Biology" and "biology" / "Cell" become one stratum
OLD_STRATA = [
    ("Biology", "Cell", 3),
    ("biology", "Cell", 2),
    (" BIOLOGY", "Genes", 1),
    ("Law", "Civil", 2),
]


async def _database_at(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'bank.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        name = f"m_{uuid.uuid4().hex[:16]}"
        server.create_database(name)
        url = server.url(name)
    upgrade(url, BEFORE)
    return url


async def _old_bank(session: AsyncSession) -> None:
    # a Core insert of the columns the old schema has (the model has grown since)
    org_id = uuid.uuid4()
    await session.execute(
        insert(Organisation.__table__).values(id=org_id, name="org-old", created_at=utcnow())
    )
    for n, (discipline, sub, count) in enumerate(OLD_STRATA, start=1):
        session.add(
            Stratum(
                id=n,
                discipline=discipline,
                qtype="short_answer",
                subdiscipline=sub,
                n_slots=count,
                n_active=count,
            )
        )
        await session.flush()
        # Core inserts of the columns the old schema has (the model has grown since).
        for rank in range(count):
            item_id = uuid.uuid4()
            await session.execute(
                insert(Item.__table__).values(
                    id=item_id,
                    family_id=item_id,
                    variant="original",
                    stratum_id=n,
                    slot=make_slot(n, rank),
                    discipline=discipline,
                    subdiscipline=sub,
                    qtype="short_answer",
                    question=f"{discipline} {sub} {rank}?",
                    answer="a",
                    language="en",
                    status="active",
                    content_hash=item_id.hex,
                    created_at=datetime.now(UTC),
                )
            )
        session.add(OrgStratumExclusion(org_id=org_id, stratum_id=n, n_items=1))
    await session.flush()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_migration_canonicalises_and_merges(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    url = await _database_at(backend, request, tmp_path)
    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as session:
            await _old_bank(session)
        await engine.dispose()
        upgrade(url)
        async with unit_of_work(engine) as session:
            strata = (await session.execute(select(Stratum).order_by(Stratum.id))).scalars().all()
            items = (await session.execute(select(Item))).scalars().all()
            exclusions = (await session.execute(select(OrgStratumExclusion))).scalars().all()
            taxonomy = {d.key: d for d in (await session.execute(select(Discipline))).scalars()}
    finally:
        await engine.dispose()
    cells = {(s.discipline, s.subdiscipline): (s.id, s.n_slots, s.n_active) for s in strata}
    assert cells == {
        ("biology", "Cell"): (1, 5, 5),
        ("biology", "Genes"): (3, 1, 1),
        ("law", "Civil"): (4, 2, 2),
    }
    assert {i.discipline for i in items} == {"biology", "law"}
    for stratum_id, n_slots, _ in cells.values():
        ranks = sorted(
            i.slot - make_slot(stratum_id, 0) for i in items if i.stratum_id == stratum_id
        )
        assert ranks == list(range(n_slots))  # dense, unique
    assert {e.stratum_id: e.n_items for e in exclusions} == {1: 2, 3: 1, 4: 1}
    assert set(taxonomy) == {d.key for d in DEFAULT_TAXONOMY} | {"biology"}
    assert taxonomy["biology"].display_name == "Biology" and taxonomy["biology"].evaluated
    assert taxonomy["law"].evaluated and not taxonomy["arts"].evaluated
