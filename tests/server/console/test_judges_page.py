"""The console's Judges page over HTTP on the running app (SQLite and PostgreSQL): each
configured judge's gate status with its kappas and intervals, per discipline, the default
judge, open drifts, calibration sets and agreement; who may open it; hostile text escaped."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from judge.prompts import PROMPT_VERSION
from server.calibration.models import CalibrationKind, CalibrationSource, JudgeDrift
from server.calibration.runner import agreement_figures
from server.calibration.service import CalibrationRow, create_set
from server.scoring.models import JudgeCalibration
from tests.server.calibration.support import calibration_rows
from tests.support.api import World, login, running_api, test_settings
from tests.support.console import console_login
from tests.support.database import database_session
from tests.support.review import reviewer_key
from tests.support.services import RedisServer

Api = tuple[httpx.AsyncClient, World, FastAPI]
HOSTILE = "<script>alert(1)</script>\"'"
DRIFT_DETAIL = "<img src=x onerror=alert(2)> fell below"
JUDGES = {"judge-a": "model-a", "judge-b": HOSTILE, "judge-c": "model-c"}
"""judge-a passes the gate (the default), judge-b has no run (uncalibrated; its model is
hostile text), judge-c's run agrees with people by chance only (refused) and drifts."""


def judge_settings(db_url: str, redis_url: str | None) -> Any:
    """Settings with ``JUDGES`` on an endpoint nobody calls (no scoring worker, no drift
    check) and a gate that accepts the 60-answer set."""
    return test_settings(
        db_url,
        redis_url,
        judges=[
            {"name": name, "base_url": "http://127.0.0.1:9/v1", "model": model}
            for name, model in JUDGES.items()
        ],
        judge_min_calibration_n=50,
        judge_drift_interval_s=0,
        scoring_in_process=False,
    )


def as_row(row: dict[str, str]) -> CalibrationRow:
    typed: dict[str, Any] = {**row, "human_score": int(row["human_score"])}
    return CalibrationRow(**typed)


async def seed_calibration(db_url: str) -> None:
    """A 60-answer set (chemistry and physics) and full runs of judge-a (close to people)
    and judge-c (random), and an open drift of judge-c."""
    rows = calibration_rows(60)
    human = [int(row["human_score"]) for row in rows]
    clusters: list[str | None] = [row["cluster"] for row in rows]
    close = [h if i % 12 else min(3, h + 1) for i, h in enumerate(human)]
    rng = random.Random(3)
    noise = [rng.randrange(4) for _ in human]
    async with database_session(db_url) as db:
        chosen = await create_set(
            db,
            name="gold",
            rows=[as_row(row) for row in rows],
            source=CalibrationSource.CSV,
            created_by="test",
        )
        stored = {}
        for judge, scores in (("judge-a", close), ("judge-c", noise)):
            figures = agreement_figures(human, list(scores), clusters)
            stored[judge] = JudgeCalibration(
                judge=judge,
                prompt_version=PROMPT_VERSION,
                reference="human",
                kappa=figures.kappa,
                kappa_low=figures.kappa_low,
                kappa_high=figures.kappa_high,
                weighted_kappa=figures.weighted_kappa,
                weighted_low=figures.weighted_low,
                weighted_high=figures.weighted_high,
                exact=figures.exact,
                within_one=figures.within_one,
                n=figures.n,
                source_sha256=chosen.sha256,
                set_id=chosen.id,
                model=JUDGES[judge],
                kind=CalibrationKind.FULL.value,
                scores=list(scores),
            )
            db.add(stored[judge])
        await db.flush()
        run = stored["judge-c"]
        db.add(
            JudgeDrift(
                judge="judge-c",
                prompt_version=PROMPT_VERSION,
                baseline_id=run.id,
                run_id=run.id,
                detail=DRIFT_DETAIL,
            )
        )


@pytest.fixture
async def judges_api(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, World, FastAPI, str]]:
    """The app with ``JUDGES`` configured on a database holding their calibration."""
    db_url, world = world_db
    await seed_calibration(db_url)
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    async with running_api(judge_settings(db_url, redis_url)) as (app, client):
        yield client, world, app, db_url


def row_of(html: str, judge: str) -> str:
    """The gate table's row of ``judge``."""
    start = html.index(f"<td>{judge}")
    return html[start : html.index("</tr>", start)]


async def test_judges_page_shows_the_gate_the_default_judge_and_drift(
    judges_api: tuple[httpx.AsyncClient, World, FastAPI, str],
) -> None:
    client, world, _, _ = judges_api
    await console_login(client, world.a.keys["admin"])
    started = time.perf_counter()
    page = await client.get("/console/judges")
    elapsed = time.perf_counter() - started
    assert page.status_code == 200, page.text
    html = page.text
    print(f"judges page: {elapsed * 1000:.0f} ms")
    assert 'Default judge</span><span class="value">judge-a</span>' in html
    assert "passed" in row_of(html, "judge-a") and "default" in row_of(html, "judge-a")
    assert "uncalibrated" in row_of(html, "judge-b")
    assert "refused" in row_of(html, "judge-c")
    assert "default" not in row_of(html, "judge-c")
    # figures with intervals, the chart, per-discipline kappas, the set, the drift
    admin = await login(client, world.a.keys["admin"])
    judges = (await client.get("/v1/admin/judges", headers=admin)).json()
    run = next(j["run"] for j in judges["judges"] if j["name"] == "judge-a")
    shown = f"{run['weighted_kappa']:.3f}"
    assert shown in row_of(html, "judge-a")
    assert f"[{run['weighted_low']:.3f}, {run['weighted_high']:.3f}]" in row_of(html, "judge-a")
    assert '<svg class="chart"' in html
    assert "<td>judge-a</td><td>chemistry</td>" in html
    assert "<td>judge-a</td><td>physics</td>" in html
    assert "gold" in html and "gate</span>" in html
    assert "No judge is drifting" not in html
    # hostile text from the settings and the database is escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<script>alert" not in html and "<img src=x" not in html


async def test_auditors_read_judges_but_not_the_review_queue(
    judges_api: tuple[httpx.AsyncClient, World, FastAPI, str],
) -> None:
    client, world, _, _ = judges_api
    await console_login(client, world.a.keys["auditor"])
    page = await client.get("/console/judges")
    assert page.status_code == 200 and "judge-a" in page.text
    assert "<form" not in page.text.split("</header>", 1)[1], "the page has no controls"
    assert (await client.get("/console/review")).status_code == 403
    assert 'href="/console/review"' not in page.text


async def test_reviewers_see_only_the_review_queue(
    judges_api: tuple[httpx.AsyncClient, World, FastAPI, str],
) -> None:
    client, world, app, db_url = judges_api
    landing = await console_login(client, await reviewer_key(db_url, world.a.id))
    assert landing.headers["location"] == "/console/review"
    queue = await client.get("/console/review")
    assert queue.status_code == 200
    assert 'href="/console/judges"' not in queue.text
    served = {getattr(route, "path", None) for route in app.routes}
    pages = ["/console", "/console/judges", "/console/leaderboard", "/console/models"]
    pages += ["/console/sessions", "/console/bank", "/console/orgs", "/console/audit"]
    for path in pages:
        if path in served:
            response = await client.get(path)
            assert response.status_code == 403, path
    assert (await client.get("/console/judges")).status_code == 403
