"""Re-deriving a session's sample from its seed, through the API and the command line
(SQLite and PostgreSQL).

A session is opened and partly delivered through the real API; then the bank and the
organisation's exposure change (another session ends and releases its families, items are
retired, new items imported, a discipline stops being evaluated, a further session comes
and goes). ``GET /v1/audit/sessions/{id}/sample`` and ``proctor audit sample`` must still
re-derive exactly the stored sample; after the record is altered directly in the database
(a delivered item's creation time or status history, an exposure or release row) they must
report a mismatch naming the position.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError

from bank.anchor_set import designate_anchor_set
from bank.database import utcnow
from bank.item_status import change_status
from bank.locks import lock_org_sampling
from bank.models import (
    Discipline,
    Exposure,
    ExposureRelease,
    Item,
    ItemStatus,
    ItemStatusChange,
    Sample,
    SampleItem,
)
from server.database import create_engine, read_only_snapshot, unit_of_work
from server.sample_audit.service import audit_session_id
from server.sessions.models import EvalSession
from tests.support.api import World, login
from tests.support.cli import Run, proctor
from tests.support.factories import make_bank
from tests.support.sessions import answer_for, answer_items

Api = tuple[httpx.AsyncClient, World, FastAPI]


async def in_db(db_url: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            return await work(db)
    finally:
        await engine.dispose()


async def open_session(
    client: httpx.AsyncClient, world: World, n_items: int, **extra: Any
) -> uuid.UUID:
    assert world.b.model_id is not None
    headers = await login(client, world.b.keys["evaluator"])
    body = {"model_id": str(world.b.model_id), "n_items": n_items, **extra}
    opened = await client.post("/v1/sessions", json=body, headers=headers)
    assert opened.status_code == 201, opened.text
    return uuid.UUID(opened.json()["id"])


async def abort(client: httpx.AsyncClient, world: World, session_id: uuid.UUID) -> None:
    admin = await login(client, world.a.keys["admin"])
    aborted = await client.post(f"/v1/admin/sessions/{session_id}/abort", headers=admin)
    assert aborted.status_code == 200, aborted.text


async def deliver(
    client: httpx.AsyncClient,
    db_url: str,
    world: World,
    session_id: uuid.UUID,
    n: int,
    role: str = "vendor",
) -> None:
    vendor = await login(client, world.b.keys[role], session_id)
    answered = await answer_items(
        client, db_url, session_id, vendor, lambda item, _: answer_for(item, True), limit=n
    )
    assert len(answered) == n


async def audit_cli(db_url: str, *args: str) -> Run:
    """``proctor audit sample ARGS`` off the event loop (the app under test keeps running:
    on SQLite its transactions must finish while the command waits for the database)."""
    return await asyncio.to_thread(
        proctor, "audit", "sample", *args, env={"PROCTOR_DATABASE_URL": db_url}
    )


async def audit(client: httpx.AsyncClient, world: World, session_id: uuid.UUID) -> dict[str, Any]:
    auditor = await login(client, world.a.keys["auditor"])
    got = await client.get(f"/v1/audit/sessions/{session_id}/sample", headers=auditor)
    assert got.status_code == 200, got.text
    report: dict[str, Any] = got.json()
    return report


async def stored(db_url: str, session_id: uuid.UUID) -> list[tuple[int, int | None, uuid.UUID]]:
    async def read(db: Any) -> list[tuple[int, int | None, uuid.UUID]]:
        record = await db.get(EvalSession, session_id)
        rows = await db.execute(
            select(SampleItem.position, SampleItem.drawn_position, SampleItem.item_id)
            .where(SampleItem.sample_id == record.sample_id)
            .order_by(SampleItem.position)
        )
        return [tuple(r) for r in rows]

    result: list[tuple[int, int | None, uuid.UUID]] = await in_db(db_url, read)
    return result


async def change_the_world(client: httpx.AsyncClient, db_url: str, world: World) -> None:
    """Later changes to the bank and the exposure of organisation B."""

    async def bank_changes(db: Any) -> None:
        idle = (
            await db.execute(
                select(Item.id)
                .where(Item.status == ItemStatus.ACTIVE.value)
                .order_by(Item.id)
                .limit(8)
            )
        ).scalars()
        idle = list(idle)
        await change_status(db, item_ids=idle[:4], to=ItemStatus.RETIRED, actor="test")
        await change_status(db, item_ids=idle[4:], to=ItemStatus.FLAGGED, actor="test")
        await make_bank(
            db,
            disciplines=3,
            qtypes=["multiple_choice", "short_answer"],
            subdisciplines=2,
            per_cell=2,
            augment=True,
        )
        await db.execute(update(Discipline).where(Discipline.key == "d0").values(evaluated=False))

    await in_db(db_url, bank_changes)
    later = await open_session(client, world, 10)
    await abort(client, world, later)


@pytest.fixture
async def audited(api: Api, world_db: tuple[str, World]) -> tuple[uuid.UUID, uuid.UUID]:
    """Organisation B: session ``holding`` takes most of the bank, ``audited`` is drawn
    while it holds its families (so it runs short) and three of its items are delivered;
    then ``holding`` is aborted (its families released) and the world changes."""
    client, world, _ = api
    db_url, _ = world_db
    holding = await open_session(client, world, 60)
    audited = await open_session(client, world, 40)
    await deliver(client, db_url, world, audited, 3)
    await abort(client, world, holding)
    await change_the_world(client, db_url, world)
    return holding, audited


async def test_the_sample_is_re_derived_after_the_world_changed(
    api: Api, world_db: tuple[str, World], audited: tuple[uuid.UUID, uuid.UUID]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    holding, session_id = audited
    report = await audit(client, world, session_id)
    assert report["outcome"] == "match", report
    assert report["kind"] == "stratified"
    assert report["first_difference"] is None and report["same_set"] is True
    assert report["delivered"]["n_delivered"] == 3
    assert report["delivered"]["all_in_rederived"] is True
    assert 0 < report["n_stored"] == report["n_rederived"] < 40  # it ran short
    for sid in (holding,):  # the aborted one was drawn from its own state and matches too
        assert (await audit(client, world, sid))["outcome"] == "match"
    # the command line says the same (exit 0); bad input exits 2
    ok = await audit_cli(db_url, str(session_id), "--json")
    assert ok.returncode == 0, ok.stderr
    assert '"outcome": "match"' in ok.stdout
    unknown = await audit_cli(db_url, str(uuid.uuid4()))
    assert unknown.returncode == 2 and "no session" in unknown.stderr


async def test_altered_records_are_caught(
    api: Api, world_db: tuple[str, World], audited: tuple[uuid.UUID, uuid.UUID]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    holding, session_id = audited
    items = await stored(db_url, session_id)
    drawn_at: Any = await in_db(
        db_url,
        lambda db: db.scalar(
            select(Sample.drawn_at)
            .join(EvalSession, EvalSession.sample_id == Sample.id)
            .where(EvalSession.id == session_id)
        ),
    )

    async def check_missing(position: int) -> dict[str, Any]:
        report = await audit(client, world, session_id)
        assert report["outcome"] == "mismatch", report
        assert report["first_difference"] is not None
        assert report["delivered"]["all_in_rederived"] is False
        assert position in report["delivered"]["missing_positions"]
        return report

    # 1. a delivered item "created" after the draw
    _, _, item1 = items[1]
    created = await in_db(
        db_url, lambda db: db.scalar(select(Item.created_at).where(Item.id == item1))
    )
    await in_db(
        db_url,
        lambda db: db.execute(update(Item).where(Item.id == item1).values(created_at=utcnow())),
    )
    await check_missing(1)
    failed = await audit_cli(db_url, str(session_id))
    assert failed.returncode == 1 and "first difference" in failed.stdout
    assert "position" in failed.stdout
    await in_db(
        db_url,
        lambda db: db.execute(update(Item).where(Item.id == item1).values(created_at=created)),
    )
    assert (await audit(client, world, session_id))["outcome"] == "match"

    # 2. a status history saying a delivered item was flagged at the draw
    _, _, item2 = items[2]
    row = {
        "item_id": item2,
        "from_status": "flagged",
        "to_status": "active",
        "reasons": ["keep"],
        "actor": "forger",
        "created_at": drawn_at + timedelta(microseconds=1),
    }
    await in_db(db_url, lambda db: db.execute(insert(ItemStatusChange).values(row)))
    report = await check_missing(2)
    assert report["history_breaks"] == []  # the forged row chains: the draw catches it
    await in_db(
        db_url,
        lambda db: db.execute(delete(ItemStatusChange).where(ItemStatusChange.actor == "forger")),
    )
    assert (await audit(client, world, session_id))["outcome"] == "match"

    # 3. the exposure of a delivered item's family moved before the draw
    _, _, item0 = items[0]
    family = await in_db(
        db_url, lambda db: db.scalar(select(Item.family_id).where(Item.id == item0))
    )
    exposed = await in_db(
        db_url,
        lambda db: db.scalar(select(Exposure.exposed_at).where(Exposure.family_id == family)),
    )
    await in_db(
        db_url,
        lambda db: db.execute(
            update(Exposure)
            .where(Exposure.family_id == family)
            .values(exposed_at=drawn_at - timedelta(seconds=1))
        ),
    )
    await check_missing(0)
    await in_db(
        db_url,
        lambda db: db.execute(
            update(Exposure).where(Exposure.family_id == family).values(exposed_at=exposed)
        ),
    )
    assert (await audit(client, world, session_id))["outcome"] == "match"

    # 4. the release rows of the session that held families at the draw deleted: those
    # families look free then, and the re-derived sample no longer runs short
    await in_db(
        db_url,
        lambda db: db.execute(delete(ExposureRelease).where(ExposureRelease.session_id == holding)),
    )
    report = await audit(client, world, session_id)
    assert report["outcome"] == "mismatch"
    assert report["n_rederived"] > report["n_stored"]
    assert report["first_difference"] is not None


async def test_an_adaptive_session_holds_the_re_derived_set(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    session_id = await open_session(
        client, world, 30, mode="adaptive", adaptive={"policy": "model-assisted"}
    )
    await deliver(client, db_url, world, session_id, 4, role="evaluator")
    await change_the_world(client, db_url, world)
    report = await audit(client, world, session_id)
    assert report["outcome"] == "match", report
    adaptive = report["adaptive"]
    assert adaptive["policy"] == "model-assisted" and adaptive["same_set"] is True
    assert [s["position"] for s in adaptive["policy_steps"]] == [0, 1, 2, 3]
    positions = adaptive["positions"]
    assert [p["position"] for p in positions] == list(range(len(positions)))
    assert sorted(p["drawn_position"] for p in positions) == list(range(len(positions)))
    assert all((p["item_id"] is not None) == (p["position"] < 4) for p in positions)
    # an undelivered position given another item: no longer the same set
    items = await stored(db_url, session_id)

    async def swap_in(db: Any) -> None:
        record = await db.get(EvalSession, session_id)
        families = select(SampleItem.family_id).where(SampleItem.sample_id == record.sample_id)
        other = (
            await db.execute(
                select(Item.id, Item.family_id).where(Item.family_id.not_in(families)).limit(1)
            )
        ).one()
        await db.execute(
            update(SampleItem)
            .where(SampleItem.sample_id == record.sample_id, SampleItem.position == len(items) - 1)
            .values(item_id=other[0], family_id=other[1])
        )

    await in_db(db_url, swap_in)
    report = await audit(client, world, session_id)
    assert report["outcome"] == "mismatch"
    assert report["adaptive"]["same_set"] is False


async def test_an_anchor_session_is_re_derived(api: Api, world_db: tuple[str, World]) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await in_db(db_url, lambda db: designate_anchor_set(db, size=10, seed="anchors"))
    session_id = await open_session(client, world, 6, mode="anchor")
    await in_db(db_url, lambda db: designate_anchor_set(db, size=5, seed="more"))
    later = await open_session(client, world, 6, mode="anchor")
    await abort(client, world, later)
    report = await audit(client, world, session_id)
    assert report["outcome"] == "match", report
    assert report["kind"] == "anchor" and report["n_stored"] == 6
    items = await stored(db_url, session_id)
    _, _, first = items[0]
    await in_db(
        db_url,
        lambda db: db.execute(update(Item).where(Item.id == first).values(created_at=utcnow())),
    )
    report = await audit(client, world, session_id)
    assert report["outcome"] == "mismatch" and report["first_difference"] is not None


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_writers_go_on_while_a_sample_is_re_derived_on_sqlite(
    api: Api, world_db: tuple[str, World]
) -> None:
    """The re-derivation reads in a ``read_only_snapshot`` (the route and ``proctor audit
    sample`` alike): on SQLite it takes no write lock, so a session opened through the API
    while a re-derivation is open is committed at once (it used to wait for the lock), and
    the snapshot keeps seeing the database as it was."""
    client, world, _ = api
    db_url, _ = world_db
    session_id = await open_session(client, world, 6)
    engine = create_engine(db_url)
    try:
        async with read_only_snapshot(engine) as db:
            report = await audit_session_id(db, session_id)
            assert report.ok, report
            before = await db.scalar(select(func.count()).select_from(EvalSession))
            opened = await asyncio.wait_for(open_session(client, world, 4), timeout=10)

            async def mark(writer: Any) -> None:  # a write committed on the same engine
                await writer.execute(
                    update(EvalSession).where(EvalSession.id == opened).values(n_delivered=0)
                )

            async with asyncio.timeout(10):
                async with unit_of_work(engine) as writer:
                    await mark(writer)
            assert await db.scalar(select(func.count()).select_from(EvalSession)) == before
    finally:
        await engine.dispose()
    assert (await audit(client, world, opened))["outcome"] == "match"


@pytest.mark.parametrize("backend", ["postgres"])
async def test_the_snapshot_is_read_only_repeatable_read_on_postgresql(
    world_db: tuple[str, World],
) -> None:
    """On PostgreSQL the re-derivation's snapshot is a read-only, repeatable-read
    transaction (``postgresql_readonly`` works with the driver): a write in it is refused."""
    db_url, _ = world_db
    engine = create_engine(db_url)
    try:
        async with read_only_snapshot(engine) as db:
            assert await db.scalar(text("SHOW transaction_read_only")) == "on"
            assert await db.scalar(text("SHOW transaction_isolation")) == "repeatable read"
            with pytest.raises(DBAPIError, match="read-only transaction"):
                await db.execute(update(EvalSession).values(n_delivered=0))
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
async def test_a_release_waits_for_an_in_flight_draw_of_its_organisation(
    api: Api, world_db: tuple[str, World]
) -> None:
    """Releases take the organisation's sampling lock, as draws do: an abort that gives
    families back while a draw for the same organisation holds the lock waits for that
    draw's commit, so the release is timed after it and a re-derivation of the draw, which
    orders events by time, sees the exposure the draw saw. (On SQLite every write
    transaction already holds the database's write lock.)"""
    client, world, _ = api
    db_url, _ = world_db
    holding = await open_session(client, world, 20)
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:  # a draw for organisation B, in flight
            await lock_org_sampling(db, world.b.id)
            aborting = asyncio.create_task(abort(client, world, holding))
            await asyncio.sleep(0.5)
            assert not aborting.done(), "the release did not wait for the draw"
            draw_commits_after = utcnow()
        await asyncio.wait_for(aborting, timeout=10)
    finally:
        await engine.dispose()

    async def first_release(db: Any) -> Any:
        return await db.scalar(
            select(func.min(ExposureRelease.released_at)).where(
                ExposureRelease.session_id == holding
            )
        )

    released_at = await in_db(db_url, first_release)
    assert released_at is not None and released_at > draw_commits_after
