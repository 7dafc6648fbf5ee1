"""Bank health on the server's own verdicts: the scheduled job's step (snapshot, flags
through the one status-change function, the cap, the new-verdict threshold) and the API
that reads snapshots (admins and auditors only), on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from bank.health.flags import FlagThresholds
from bank.health.report import HealthOptions
from bank.item_status import ItemStatus, change_status
from bank.models import HealthSnapshot, Item, ItemStatusChange, Stratum
from server.database import create_engine, unit_of_work
from server.health.service import latest_snapshot, refresh_health
from server.scoring.models import Verdict
from tests.support.api import World, login, running_api, seed_world, test_settings
from tests.support.health import (
    HEALTH_JUDGE_SETTINGS,
    HEALTH_JUDGES,
    originals,
    record_verdicts,
)
from tests.support.sessions import wait_until


async def _status(db_url: str, item_id: uuid.UUID) -> tuple[str, int, list[ItemStatusChange]]:
    """The item's status, its stratum's maintained ``n_active`` (checked against a count
    of the stratum's active items), and its status history."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            item = await db.get(Item, item_id)
            assert item is not None
            stratum = await db.get(Stratum, item.stratum_id)
            assert stratum is not None
            counted = await db.scalar(
                select(func.count())
                .select_from(Item)
                .where(Item.stratum_id == stratum.id, Item.status == ItemStatus.ACTIVE.value)
            )
            assert stratum.n_active == counted
            changes = (
                await db.execute(
                    select(ItemStatusChange)
                    .where(ItemStatusChange.item_id == item_id)
                    .order_by(ItemStatusChange.id)
                )
            ).scalars()
            return item.status, stratum.n_active, list(changes)
    finally:
        await engine.dispose()


@pytest.fixture
async def world(fresh_db_url: str) -> tuple[str, World, list[Item]]:
    w = await seed_world(fresh_db_url, per_cell=3)
    items = (await originals(fresh_db_url))[:20]
    return fresh_db_url, w, items


async def test_the_job_snapshots_flags_and_keeps_the_counters(
    world: tuple[str, World, list[Item]],
) -> None:
    db_url, w, items = world
    await record_verdicts(db_url, w, items, disputed=items[5])
    saturated, floor, disputed = items[0], items[1], items[5]
    _, active_before, _ = await _status(db_url, saturated.id)
    engine = create_engine(db_url)
    try:
        held = await refresh_health(
            engine,
            judges=HEALTH_JUDGES,
            population="all",
            min_new_verdicts=1,
            flag=True,
            max_flag_share=0.01,
        )
        assert held.snapshot_id is not None and held.flagged == 0 and held.held_back > 0
        assert (await _status(db_url, saturated.id))[0] == ItemStatus.ACTIVE.value

        outcome = await refresh_health(
            engine,
            judges=HEALTH_JUDGES,
            population="all",
            min_new_verdicts=1,
            flag=True,
            max_flag_share=1.0,
        )
        # Nothing new since the last snapshot's watermark: no snapshot, no flags.
        assert outcome.snapshot_id is None and outcome.new_verdicts == 0

        forced = await refresh_health(
            engine,
            judges=HEALTH_JUDGES,
            population="all",
            min_new_verdicts=0,
            flag=True,
            max_flag_share=1.0,
        )
    finally:
        await engine.dispose()
    assert forced.snapshot_id is not None and forced.flagged >= 3
    status, active_after, changes = await _status(db_url, saturated.id)
    assert status == ItemStatus.FLAGGED.value
    assert active_after < active_before
    assert changes[-1].reasons == ["saturated"] and changes[-1].snapshot_id == forced.snapshot_id
    assert (await _status(db_url, floor.id))[2][-1].reasons == ["floor"]
    assert "judge_disagreement" in (await _status(db_url, disputed.id))[2][-1].reasons


async def test_admins_and_auditors_read_the_latest_snapshot(
    world: tuple[str, World, list[Item]],
) -> None:
    db_url, w, items = world
    names = await record_verdicts(db_url, w, items)
    async with running_api(test_settings(db_url)) as (_, client):
        admin = await login(client, w.a.keys["admin"])
        missing = await client.get("/v1/admin/bank/health", headers=admin)
        assert missing.status_code == 404 and "no health snapshot" in missing.text
        engine = create_engine(db_url)
        try:
            await refresh_health(
                engine, judges=HEALTH_JUDGES, population="top:8", min_new_verdicts=1, flag=False
            )
        finally:
            await engine.dispose()

        got = await client.get("/v1/admin/bank/health", headers=admin)
        assert got.status_code == 200, got.text
        body = got.json()
        assert body["population"]["kind"] == "top" and body["population"]["n_models"] == 8
        assert set(body["population"]["models"]) <= set(names)
        assert body["bank"]["n_models"] == 8 and body["bank"]["n_items"] == len(items)
        assert str(items[0].id) in body["items"]
        assert body["items"][str(items[0].id)]["flags"] == ["saturated"]

        flagged = await client.get(
            "/v1/admin/bank/health", params={"items": "flagged"}, headers=admin
        )
        assert all(row["flags"] for row in flagged.json()["items"].values())
        assert (
            await client.get("/v1/admin/bank/health", params={"items": "bogus"}, headers=admin)
        ).status_code == 422

        auditor = await login(client, w.a.keys["auditor"])
        history = await client.get("/v1/admin/bank/health/history", headers=auditor)
        assert history.status_code == 200 and len(history.json()) == 1
        assert history.json()[0]["bank"]["n_models"] == 8
        for role in ("vendor", "evaluator"):
            headers = await login(client, w.a.keys[role])
            refused = await client.get("/v1/admin/bank/health", headers=headers)
            assert refused.status_code == 403, (role, refused.text)
        # No route computes health on a request.
        assert (await client.post("/v1/admin/bank/health", headers=admin)).status_code == 405


async def test_verdicts_awaiting_review_are_not_read(
    world: tuple[str, World, list[Item]],
) -> None:
    db_url, w, items = world
    await record_verdicts(db_url, w, items)
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            total = await db.scalar(select(func.count()).select_from(Verdict))
            first = await db.scalar(select(func.min(Verdict.id)))
            row = await db.get(Verdict, first)
            assert row is not None
            row.score = None  # awaiting review
        outcome = await refresh_health(
            engine, judges=HEALTH_JUDGES, population="all", min_new_verdicts=1, flag=False
        )
        async with unit_of_work(engine) as db:
            snapshot = await latest_snapshot(db)
    finally:
        await engine.dispose()
    assert outcome.new_verdicts == (total or 0) - 1 and snapshot is not None
    cells = sum(row["n"] for row in snapshot.report["items"].values())
    assert cells == (total or 0) - 1


async def test_the_in_process_job_snapshots_on_its_own(
    world: tuple[str, World, list[Item]],
) -> None:
    """The embedded default runs the job inside the API process: new verdicts produce a
    snapshot without any request or command."""
    db_url, w, items = world
    await record_verdicts(db_url, w, items)
    settings = test_settings(
        db_url,
        scoring_in_process=True,
        health_interval_s=0.2,
        health_min_new_verdicts=1,
        **HEALTH_JUDGE_SETTINGS,
    )
    engine = create_engine(db_url)
    try:

        async def snapshot_stored() -> bool:
            async with unit_of_work(engine) as db:
                return await latest_snapshot(db) is not None

        async with running_api(settings):
            await wait_until(snapshot_stored, within_s=30, what="a health snapshot")
        async with unit_of_work(engine) as db:
            snapshot = await latest_snapshot(db)
    finally:
        await engine.dispose()
    assert snapshot is not None and snapshot.population["n_models"] == 10


async def test_a_kept_item_stays_active_until_another_rule_fires(
    world: tuple[str, World, list[Item]],
) -> None:
    db_url, w, items = world
    await record_verdicts(db_url, w, items)
    middle = items[2]  # neither saturated nor at the floor
    low_cas = HealthOptions(thresholds=FlagThresholds(low_cas=1.0))  # flags every such item
    engine = create_engine(db_url)

    async def refresh(options: HealthOptions) -> None:
        await refresh_health(
            engine,
            judges=HEALTH_JUDGES,
            population="all",
            min_new_verdicts=0,
            flag=True,
            options=options,
        )

    try:
        await refresh(low_cas)
        assert (await _status(db_url, middle.id))[2][-1].reasons == ["low_cas"]
        async with unit_of_work(engine) as db:  # the reviewer keeps it
            await change_status(
                db, item_ids=[middle.id], to=ItemStatus.ACTIVE, actor="admin", reasons=["keep"]
            )
        await refresh(low_cas)  # the same reason again: the keep stands
        assert (await _status(db_url, middle.id))[0] == ItemStatus.ACTIVE.value
        await refresh(HealthOptions(thresholds=FlagThresholds(saturated_p=0.05)))
    finally:
        await engine.dispose()
    status, _, changes = await _status(db_url, middle.id)  # a new reason: flagged again
    assert status == ItemStatus.FLAGGED.value and changes[-1].reasons == ["saturated"]


async def test_unread_verdicts_do_not_count_as_new_and_old_snapshots_go(
    world: tuple[str, World, list[Item]],
) -> None:
    db_url, w, items = world
    await record_verdicts(db_url, w, items)
    engine = create_engine(db_url)
    try:
        first = await refresh_health(
            engine, judges=HEALTH_JUDGES, population="all", min_new_verdicts=1, flag=False
        )
        assert first.snapshot_id is not None
        async with unit_of_work(engine) as db:  # a newer verdict awaiting review
            newest = await db.get(Verdict, await db.scalar(select(func.max(Verdict.id))))
            assert newest is not None
            db.add(
                Verdict(
                    session_id=newest.session_id,
                    position=newest.position,
                    judge="judge-late",
                    prompt_version=newest.prompt_version,
                    score=None,
                    needs_review=True,
                    method="judge",
                )
            )
        for _ in range(3):
            tick = await refresh_health(
                engine, judges=HEALTH_JUDGES, population="all", min_new_verdicts=1, flag=False
            )
            assert tick.snapshot_id is None and tick.new_verdicts == 0
        for _ in range(3):
            await refresh_health(
                engine,
                judges=HEALTH_JUDGES,
                population="top:8",
                min_new_verdicts=0,
                flag=False,
                keep_snapshots=2,
            )
        async with unit_of_work(engine) as db:
            texts = (await db.execute(select(HealthSnapshot.population_text))).scalars().all()
    finally:
        await engine.dispose()
    assert sorted(texts) == ["all", "top:8", "top:8"]
