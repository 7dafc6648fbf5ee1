"""The console's leaderboard page over HTTP: rows, charts and anchor history; admins
designate the anchor through the form (R changes), other roles see no form and are refused;
CSRF; the CSV export with its formula-injection guard; hostile model names escaped.

Scored sessions are written straight to the database (the rows the scoring pipeline would
write, as ``tests.support.health`` does) so the tests stay fast."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from judge.prompts import PROMPT_VERSION
from server.csv_export import csv_text, safe_cell
from server.leaderboard.fields import DEFAULT_PUBLIC_FIELDS, Visibility, csv_columns
from tests.support.api import World, login, running_api, test_settings
from tests.support.console import console_login, csrf_token
from tests.support.scored import FORMULA, HOSTILE, JUDGE, add_model, scored_session, seed_scores
from tests.support.services import RedisServer


@dataclass
class Seeded:
    """The world, the scored models by role in the tests, and the app's client."""

    world: World
    client: httpx.AsyncClient
    strong: uuid.UUID
    """org-a's model: most answers right, two sessions, prices registered."""
    weak: uuid.UUID
    """org-b's model: a third right, two sessions."""
    hostile: uuid.UUID
    """org-b's model named ``HOSTILE``: one session."""
    formula: uuid.UUID
    """org-b's model named ``FORMULA``: one session."""


def settings_for(db_url: str, backend: str, request: pytest.FixtureRequest) -> Any:
    """A judge configured (no calibration set: the gate is open, it is the default judge)
    that never runs (no worker): verdicts are written by the test."""
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    return test_settings(
        db_url,
        redis_url,
        judges=[{"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}],
        scoring_in_process=False,
        judge_drift_interval_s=0,
        leaderboard_resamples=200,
    )


@pytest.fixture
async def seeded(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Seeded]:
    db_url, world = world_db
    strong, weak, hostile, formula = await seed_scores(db_url, world)
    async with running_api(settings_for(db_url, backend, request)) as (_, client):
        yield Seeded(world, client, strong, weak, hostile, formula)


async def api_board(client: httpx.AsyncClient, key: str) -> dict[str, Any]:
    headers = await login(client, key)
    response = await client.get("/v1/leaderboard", headers=headers)
    assert response.status_code == 200, response.text
    board: dict[str, Any] = response.json()
    return board


async def test_the_page_shows_rows_charts_population_and_anchor_history(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    board = await api_board(client, world.a.keys["auditor"])
    await console_login(client, world.a.keys["auditor"])
    page = await client.get("/console/leaderboard")
    assert page.status_code == 200, page.text
    html = page.text
    for row in board["models"]:
        assert f"/console/models/{row['model_id']}" in html
        assert f"{row['absolute']['mean']:.2f}" in html
        assert f"{row['relative']['ci_low']:.2f}" in html
    assert "model-org-a" in html and "org-b" in html  # names and organisations
    assert html.count('<svg class="chart"') >= 3  # R, S and the heatmap
    assert "Per discipline" in html and "Diagnostics" in html and "Anisotropy index" in html
    assert "BT log-strength" not in html and "?baselines=1" in html  # on request only
    with_baselines = (await client.get("/console/leaderboard?baselines=1")).text
    assert "BT log-strength" in with_baselines and "per-item comparisons" in with_baselines
    assert "Scored fixed sessions" in html and JUDGE in html and PROMPT_VERSION in html
    assert "replay 3/12" in html  # weak's contamination check
    assert "Never designated" in html
    assert 'action="/console/leaderboard/anchor"' not in html  # auditors: no form
    # an anchor designated through the API shows in the history as current
    admin = await login(client, world.a.keys["admin"])
    put = await client.put(
        "/v1/admin/leaderboard/anchor", json={"model_id": str(seeded.weak)}, headers=admin
    )
    assert put.status_code == 200, put.text
    again = (await client.get("/console/leaderboard")).text
    assert "Never designated" not in again and "current" in again
    history = again.split("Anchor history", 1)[1]
    assert "model-org-b" in history and put.json()["set_by"] in history


async def test_an_admin_designates_the_anchor_and_r_changes(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    before = await api_board(client, world.a.keys["admin"])
    rows = {row["model_id"]: row for row in before["models"]}
    assert before["models"][0]["model_id"] == str(seeded.strong)
    assert rows[str(seeded.strong)]["relative"]["mean"] == pytest.approx(100)
    await console_login(client, world.a.keys["admin"])
    page = await client.get("/console/leaderboard")
    assert 'action="/console/leaderboard/anchor"' in page.text
    token = csrf_token(page.text)
    sent = await client.post(
        "/console/leaderboard/anchor", data={"csrf_token": token, "model": str(seeded.weak)}
    )
    assert sent.status_code == 303
    assert sent.headers["location"] == "/console/leaderboard?notice=anchor-set"
    after = await api_board(client, world.a.keys["admin"])
    rows = {row["model_id"]: row for row in after["models"]}
    assert after["anchor"]["model_id"] == str(seeded.weak) and after["anchor"]["designated"]
    assert rows[str(seeded.weak)]["relative"]["mean"] == pytest.approx(100)
    assert rows[str(seeded.strong)]["relative"]["mean"] > 100
    shown = await client.get(sent.headers["location"])
    assert "Anchor designated" in shown.text and "designated</span>" in shown.text
    headers = await login(client, world.a.keys["admin"])
    history = (await client.get("/v1/leaderboard/anchors", headers=headers)).json()
    assert history[0]["model_id"] == str(seeded.weak)
    assert history[0]["set_by"] in shown.text  # the admin's subject
    # back to the top model
    back = await client.post(
        "/console/leaderboard/anchor", data={"csrf_token": token, "model": "top"}
    )
    assert back.status_code == 303
    board = await api_board(client, world.a.keys["admin"])
    assert board["anchor"]["designated"] is False
    assert board["models"][0]["relative"]["mean"] == pytest.approx(100)
    # an unknown model or a value that is no model: the page again with the reason
    for value in (str(uuid.uuid4()), "nonsense", ""):
        refused = await client.post(
            "/console/leaderboard/anchor", data={"csrf_token": token, "model": value}
        )
        assert refused.status_code == 422, value
        assert 'class="notice bad"' in refused.text and "Anchor history" in refused.text
    assert len((await client.get("/v1/leaderboard/anchors", headers=headers)).json()) == 2


@pytest.mark.parametrize("role", ["auditor", "evaluator"])
async def test_other_roles_see_no_anchor_form_and_are_refused(seeded: Seeded, role: str) -> None:
    client, world = seeded.client, seeded.world
    await console_login(client, world.a.keys[role])
    page = await client.get("/console/leaderboard")
    assert page.status_code == 200
    assert 'action="/console/leaderboard/anchor"' not in page.text
    assert 'name="model"' not in page.text
    token = csrf_token(page.text)  # the logout form's
    refused = await client.post(
        "/console/leaderboard/anchor", data={"csrf_token": token, "model": str(seeded.weak)}
    )
    assert refused.status_code == 403
    headers = await login(client, world.a.keys["admin"])
    assert (await client.get("/v1/leaderboard/anchors", headers=headers)).json() == []


async def test_the_anchor_form_needs_its_csrf_token(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    await console_login(client, world.a.keys["admin"])
    for data in ({"model": "top"}, {"model": "top", "csrf_token": "x" * 43}):
        refused = await client.post("/console/leaderboard/anchor", data=data)
        assert refused.status_code == 403, data
    page = await client.get("/console/leaderboard")
    cross = await client.post(
        "/console/leaderboard/anchor",
        data={"model": "top", "csrf_token": csrf_token(page.text)},
        headers={"origin": "http://evil.test"},
    )
    assert cross.status_code == 403
    headers = await login(client, world.a.keys["admin"])
    assert (await client.get("/v1/leaderboard/anchors", headers=headers)).json() == []


async def test_the_csv_export_holds_every_row_with_formulas_defused(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    board = await api_board(client, world.a.keys["evaluator"])
    await console_login(client, world.a.keys["evaluator"])
    response = await client.get("/console/leaderboard.csv")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    disposition = response.headers["content-disposition"]
    assert disposition.startswith("attachment;") and ".csv" in disposition
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [r["model_id"] for r in rows] == [m["model_id"] for m in board["models"]]
    by_id = {r["model_id"]: r for r in rows}
    assert by_id[str(seeded.formula)]["name"] == "'" + FORMULA
    assert by_id[str(seeded.hostile)]["name"] == HOSTILE  # text, not a formula: unchanged
    strong = by_id[str(seeded.strong)]
    expected = next(m for m in board["models"] if m["model_id"] == str(seeded.strong))
    assert float(strong["absolute"]) == pytest.approx(expected["absolute"]["mean"], abs=1e-3)
    assert strong["organisation"] == "org-a" and float(strong["latency_median_s"]) == 2.0
    assert float(strong["usd_per_1k_items"]) > 0
    for discipline, score in expected["disciplines"].items():
        assert float(strong[discipline]) == pytest.approx(score["score"])
    assert not any(
        cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row.values() if cell
    )


async def test_hostile_model_names_are_escaped(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    await console_login(client, world.a.keys["admin"])
    html = (await client.get("/console/leaderboard")).text
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_csv_columns_follow_the_visible_fields() -> None:
    public = Visibility(frozenset(DEFAULT_PUBLIC_FIELDS))
    shown = csv_columns(public, ("math", "code"))
    assert "model_id" in shown and "name" in shown and "math" in shown
    assert not {"organisation", "latency_median_s", "usd_per_1k_items"} & set(shown)
    narrow = Visibility(frozenset({"absolute"}))
    assert csv_columns(narrow, ("math",)) == [
        "model_id",
        "absolute",
        "absolute_ci_low",
        "absolute_ci_high",
        "absolute_variance",
    ]
    assert "organisation" in csv_columns(Visibility(None), ())


def test_formula_cells_get_a_leading_quote() -> None:
    for text in ("=1+2", "+1+1", "-1+A1", "@SUM(A1)", "\t=x", "\r=x", "=cmd|' /C calc'!A0"):
        assert safe_cell(text) == "'" + text
    for value in ("plain", "a=b", 1.5, -2, 0, "-0.25", "+3"):  # numbers, as text or not
        assert safe_cell(value) == value
    assert safe_cell(None) == ""
    text = csv_text(["name", "=col"], [{"name": "@x", "=col": -1.5}])
    assert text.splitlines() == ["name,'=col", "'@x,-1.5"]


async def test_the_page_follows_new_scores_computed_off_the_request(
    seeded: Seeded, world_db: tuple[str, World]
) -> None:
    """The console reuses a computed leaderboard while its data is unchanged; after a
    change it shows the previous board, marked stale, while the new one is computed in
    the background, then the new one."""
    client, world = seeded.client, seeded.world
    db_url, _ = world_db
    await console_login(client, world.a.keys["admin"])
    before = (await client.get("/console/leaderboard")).text
    assert "late-model" not in before
    late = await add_model(db_url, world.a.id, "late-model")
    await scored_session(
        db_url,
        org_id=world.a.id,
        model_id=late,
        scores=[3] * 12,
        created_at=datetime(2026, 11, 5, tzinfo=UTC),
        offset=48,
    )
    stale = (await client.get("/console/leaderboard")).text
    assert f"/console/models/{late}" not in stale and "being computed" in stale
    for _ in range(200):  # the background refresh replaces it
        after = (await client.get("/console/leaderboard")).text
        if "being computed" not in after:
            break
        await asyncio.sleep(0.05)
    assert f"/console/models/{late}" in after
    board = await api_board(client, world.a.keys["admin"])
    assert board["models"][0]["model_id"] == str(late)  # all right: now the top model
    assert "late-model</strong>" in after  # and the anchor of R
    models = (await client.get(f"/console/models/{late}")).text
    assert "100.00" in models and "Position" in models
