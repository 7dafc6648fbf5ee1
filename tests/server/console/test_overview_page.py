"""The console's overview over HTTP: figures per role and the alerts (failing scoring jobs,
a stalled queue, flagged items), hostile error text escaped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select, update

from bank.item_status import change_status
from bank.models import Item, ItemStatus
from server.scoring.models import ScoringJob
from tests.support.api import World, evaluator_session
from tests.support.console import console_login
from tests.support.database import database_session
from tests.support.sessions import answer_items

Api = tuple[httpx.AsyncClient, World, FastAPI]
HOSTILE_ERROR = '<script>alert(1)</script> judge said "no"\nsecond line'


async def answered_positions(client: httpx.AsyncClient, world: World, db_url: str) -> str:
    """A session of org-a with two answers; its id."""
    headers, session_id = await evaluator_session(client, world.a, n_items=2)
    await answer_items(client, db_url, session_id, headers, lambda item, _: "The answer is (A).")
    return session_id


async def test_admins_see_every_section_and_evaluators_their_own(api: Api) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["admin"])
    html = (await client.get("/console")).text
    for section in ("Sessions", "Bank", "Scoring", "Judges", "Human review", "No alerts."):
        assert section in html, section
    client.cookies.clear()
    await console_login(client, world.b.keys["evaluator"])
    html = (await client.get("/console")).text
    assert "<h2>Sessions</h2>" in html and "<h2>Human review</h2>" in html
    for hidden in ("<h2>Bank</h2>", "<h2>Scoring</h2>", "<h2>Judges</h2>"):
        assert hidden not in html, hidden


async def test_alerts_name_failing_jobs_a_stalled_queue_and_flagged_items(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    session_id = await answered_positions(client, world, db_url)
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    later = datetime.now(UTC) + timedelta(days=1)
    async with database_session(db_url) as db:
        for position in (0, 1):
            db.add(
                ScoringJob(
                    session_id=uuid.UUID(session_id),
                    position=position,
                    judge="judge-x",
                    prompt_version="v-test",
                    state="queued",
                    attempts=3 + position,
                    last_error=HOSTILE_ERROR,
                    created_at=long_ago,
                    not_before=later,  # out of the in-process worker's reach
                )
            )
        flagged = list((await db.execute(select(Item.id).limit(3))).scalars())
        await change_status(db, item_ids=flagged, to=ItemStatus.FLAGGED, actor="test")
    await console_login(client, world.a.keys["admin"])
    html = (await client.get("/console")).text
    assert "2 scoring jobs keep failing" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "second line" not in html  # the first line of the error only
    assert "scoring is stalled" in html and "60 min" in html
    assert "3 flagged items await review" in html
    async with database_session(db_url) as db:  # the worker caught up: the alerts go
        await db.execute(update(ScoringJob).values(state="done"))
    html = (await client.get("/console")).text
    assert "keep failing" not in html and "scoring is stalled" not in html
