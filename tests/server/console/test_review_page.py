"""The console's review queue over HTTP on the running app (SQLite and PostgreSQL): the
queue and a task shown blind, scoring through the form (a human verdict that changes the
answer's score), skipping, invalid input kept, CSRF, who sees which task, hostile text."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete

from judge.prompts import PROMPT_VERSION
from server.scoring.models import Verdict
from tests.support.api import World, login, open_session, running_api, test_settings
from tests.support.console import console_login, csrf_token
from tests.support.database import database_session
from tests.support.review import TASKS, add_task, add_verdict, human_verdicts, reviewer_key
from tests.support.services import RedisServer
from tests.support.sessions import JUDGE_NAME, answer_items

HOSTILE = "<script>alert(1)</script>\"' é\U0001f600"


@dataclass
class Queue:
    client: httpx.AsyncClient
    world: World
    app: FastAPI
    db_url: str
    session_id: str
    tasks: list[int]
    """Open tasks of positions 0 and 1 of an org-a session; judge-v1 could not score
    position 0 (it waits for a person) and scored position 1 a 3."""


async def answered_session(client: httpx.AsyncClient, db_url: str, world: World) -> str:
    """A session of org A with two answers, the first of them hostile text."""
    assert world.a.model_id is not None
    evaluator = await login(client, world.a.keys["evaluator"])
    sid = str((await open_session(client, evaluator, world.a.model_id, n_items=2))["id"])
    vendor = await login(client, world.a.keys["vendor"], sid)
    await answer_items(
        client, db_url, sid, vendor, lambda item, position: HOSTILE if position == 0 else "42"
    )
    return sid


@pytest.fixture
async def queue(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Queue]:
    db_url, world = world_db
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    settings = test_settings(
        db_url,
        redis_url,
        judges=[{"name": JUDGE_NAME, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}],
        judge_drift_interval_s=0,
        scoring_in_process=False,
    )
    async with running_api(settings) as (app, client):
        sid = await answered_session(client, db_url, world)
        async with database_session(db_url) as db:
            await db.execute(delete(Verdict).where(Verdict.session_id == uuid.UUID(sid)))
        await add_verdict(
            db_url, sid, 0, judge=JUDGE_NAME, score=None, prompt_version=PROMPT_VERSION
        )
        await add_verdict(db_url, sid, 1, judge=JUDGE_NAME, score=3, prompt_version=PROMPT_VERSION)
        tasks = [await add_task(db_url, sid, 0), await add_task(db_url, sid, 1, reason="audit")]
        yield Queue(client, world, app, db_url, sid, tasks)


async def scoring(q: Queue) -> dict[str, int]:
    """The session's scoring figures as an admin reads them from the JSON API."""
    admin = await login(q.client, q.world.a.keys["admin"])
    body = (await q.client.get(f"/v1/sessions/{q.session_id}/scoring", headers=admin)).json()
    return {key: body[key] for key in ("scored", "needs_review", "points")}


async def test_a_reviewer_scores_and_skips_through_the_forms(queue: Queue) -> None:
    q, (first, second) = queue, queue.tasks
    client = q.client
    await console_login(client, await reviewer_key(q.db_url, q.world.a.id))
    listing = await client.get("/console/review")
    assert listing.status_code == 200
    assert f'href="/console/review/{first}"' in listing.text
    assert f'href="/console/review/{second}"' in listing.text
    task = await client.get(f"/console/review/{first}")
    assert task.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39; é\U0001f600" in task.text
    assert "<script>alert" not in task.text
    assert "model-org-a" not in task.text and q.session_id not in task.text, "shown blind"
    token = csrf_token(task.text)
    before = await scoring(q)
    assert before == {"scored": 1, "needs_review": 1, "points": 3}

    url = f"/console/review/{first}/score"
    assert (await client.post(url, data={"score": "2"})).status_code == 403
    wrong = await client.post(url, data={"score": "2", "csrf_token": "x" * 43})
    assert wrong.status_code == 403
    for bad in ("7", "x", "", "-1", "2.0"):
        refused = await client.post(
            url, data={"score": bad, "note": "keep <b>me</b>", "csrf_token": token}
        )
        assert refused.status_code == 422, bad
        assert "keep &lt;b&gt;me&lt;/b&gt;</textarea>" in refused.text
    nul = await client.post(url, data={"score": "2", "note": "a\x00b", "csrf_token": token})
    assert nul.status_code == 422
    long = await client.post(url, data={"score": "2", "note": "n" * 4001, "csrf_token": token})
    assert long.status_code == 422
    assert await human_verdicts(q.db_url, q.session_id) == []

    scored = await client.post(
        url, data={"score": "2", "note": "half <i>right</i>", "csrf_token": token}
    )
    assert scored.status_code == 303
    assert scored.headers["location"] == f"/console/review/{second}?notice=scored"
    [verdict] = await human_verdicts(q.db_url, q.session_id)
    assert (verdict.position, verdict.score, verdict.detail) == (0, 2, "half <i>right</i>")
    assert await scoring(q) == {"scored": 2, "needs_review": 0, "points": 5}
    again = await client.post(url, data={"score": "3", "csrf_token": token})
    assert again.status_code == 409
    shown = await client.get(f"/console/review/{first}")
    assert "You scored this answer 2." in shown.text and 'name="score"' not in shown.text

    following = await client.get(scored.headers["location"])
    assert "Score recorded" in following.text
    skipped = await client.post(f"/console/review/{second}/skip", data={"csrf_token": token})
    assert skipped.status_code == 303
    assert skipped.headers["location"] == "/console/review?notice=skipped-end"
    empty = await client.get(skipped.headers["location"])
    assert "Task skipped" in empty.text and "No task waits for you" in empty.text
    admin = await login(client, q.world.a.keys["admin"])
    left = (await client.get(TASKS, headers=admin)).json()["tasks"]
    assert [t["task_id"] for t in left] == [second], "others still see a skipped task"


async def test_filters_and_pages(queue: Queue) -> None:
    q, (first, second) = queue, queue.tasks
    await console_login(q.client, q.world.a.keys["admin"])
    audit = await q.client.get("/console/review?reason=audit")
    assert (
        f"/console/review/{second}" in audit.text and f"/console/review/{first}" not in audit.text
    )
    other = await q.client.get("/console/review?discipline=%3Cscript%3E")
    assert "No task waits for you under these filters" in other.text
    assert 'value="&lt;script&gt;"' in other.text
    later = await q.client.get(f"/console/review?after={first}")
    assert (
        f"/console/review/{second}" in later.text and f"/console/review/{first}" not in later.text
    )
    assert 'rel="first"' in later.text
    for bad in ("reason=bogus", "after=abc", "after=-1", f"discipline={'d' * 101}"):
        assert (await q.client.get(f"/console/review?{bad}")).status_code == 422, bad
    for bad in ("0", "abc", str(2**63)):
        assert (await q.client.get(f"/console/review/{bad}")).status_code == 422, bad
    assert (await q.client.get("/console/review/999999")).status_code == 404


async def test_evaluators_see_their_own_organisations_tasks_only(queue: Queue) -> None:
    q, (first, _) = queue, queue.tasks
    await console_login(q.client, q.world.b.keys["evaluator"])
    listing = await q.client.get("/console/review")
    assert listing.status_code == 200 and f"/console/review/{first}" not in listing.text
    token = csrf_token(listing.text)
    assert (await q.client.get(f"/console/review/{first}")).status_code == 404
    posted = await q.client.post(
        f"/console/review/{first}/score", data={"score": "1", "csrf_token": token}
    )
    assert posted.status_code == 404
    skipped = await q.client.post(f"/console/review/{first}/skip", data={"csrf_token": token})
    assert skipped.status_code == 404
    assert await human_verdicts(q.db_url, q.session_id) == []
    q.client.cookies.clear()
    await console_login(q.client, q.world.a.keys["evaluator"])
    assert (await q.client.get(f"/console/review/{first}")).status_code == 200


async def test_auditors_cannot_open_or_post_to_the_queue(queue: Queue) -> None:
    q, (first, _) = queue, queue.tasks
    await console_login(q.client, q.world.a.keys["auditor"])
    judges = await q.client.get("/console/judges")
    token = csrf_token(judges.text)
    assert (await q.client.get("/console/review")).status_code == 403
    assert (await q.client.get(f"/console/review/{first}")).status_code == 403
    for action, data in (("score", {"score": "1"}), ("skip", {})):
        posted = await q.client.post(
            f"/console/review/{first}/{action}", data={**data, "csrf_token": token}
        )
        assert posted.status_code == 403
    assert await human_verdicts(q.db_url, q.session_id) == []
    assert re.search(r'href="/console/review"', judges.text) is None
