"""The console's models pages over HTTP: the models each role may see with their session
counts and S; one model's sessions (newest first, paginated), trend, disciplines, latency,
cost and contamination; another organisation's model is 404 for an evaluator; hostile model
names escaped. Scored sessions come from the leaderboard page's tests' helpers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from tests.server.console.test_leaderboard_page import (
    HOSTILE,
    Seeded,
    api_board,
    seed_scores,
    settings_for,
)
from tests.support.api import World, login, running_api
from tests.support.console import console_login

SESSION_LINK = re.compile(r'href="/console/sessions/([0-9a-f-]{36})"')


@pytest.fixture
async def seeded(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Seeded]:
    db_url, world = world_db
    strong, weak, hostile, formula = await seed_scores(db_url, world)
    async with running_api(settings_for(db_url, backend, request)) as (_, client):
        yield Seeded(world, client, strong, weak, hostile, formula)


async def test_the_list_shows_each_roles_models_with_counts_and_scores(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    board = await api_board(client, world.a.keys["admin"])
    strong = next(m for m in board["models"] if m["model_id"] == str(seeded.strong))
    await console_login(client, world.a.keys["admin"])
    page = await client.get("/console/models")
    assert page.status_code == 200
    for model_id in (seeded.strong, seeded.weak, seeded.hostile, seeded.formula):
        assert f'href="/console/models/{model_id}"' in page.text
    assert "<th>Organisation</th>" in page.text and "org-b" in page.text
    assert f"{strong['absolute']['mean']:.2f}" in page.text
    assert f"{strong['absolute']['ci_low']:.2f}" in page.text
    weak_row = page.text.split(f'href="/console/models/{seeded.weak}"', 1)[1].split("</tr>")[0]
    cells = re.findall(r'<td class="num">([^<]*)</td>', weak_row)
    assert cells[:3] == ["3", "3", "0"]  # sessions, scored, open: two fixed and a replay
    # an evaluator sees its own organisation's models only
    client.cookies.clear()
    await console_login(client, world.a.keys["evaluator"])
    own = await client.get("/console/models")
    assert f'href="/console/models/{seeded.strong}"' in own.text
    assert f'href="/console/models/{seeded.weak}"' not in own.text
    assert "model-org-b" not in own.text and "<th>Organisation</th>" not in own.text
    headers = await login(client, world.a.keys["evaluator"])
    listed = (await client.get("/v1/models", headers=headers)).json()
    assert [m["id"] for m in listed] == [str(seeded.strong)]


async def test_a_model_page_shows_sessions_trend_disciplines_usage_and_contamination(
    seeded: Seeded,
) -> None:
    client, world = seeded.client, seeded.world
    board = await api_board(client, world.a.keys["admin"])
    row = next(m for m in board["models"] if m["model_id"] == str(seeded.strong))
    await console_login(client, world.a.keys["admin"])
    page = await client.get(f"/console/models/{seeded.strong}")
    assert page.status_code == 200
    html = page.text
    headers = await login(client, world.a.keys["admin"])
    sessions = (await client.get("/v1/admin/sessions", headers=headers)).json()
    own = [s for s in sessions if s["model_id"] == str(seeded.strong)]
    newest_first = sorted(own, key=lambda s: s["created_at"], reverse=True)
    assert SESSION_LINK.findall(html) == [s["id"] for s in newest_first]
    assert "S of each scored ranked session" in html  # the trend
    trend = html.split("Scores over time", 1)[1].split("</svg>", 1)[0]
    assert trend.count("<circle") == 2 and "<path" in trend
    for session_value in row["absolute"]["session_values"]:
        assert f"{session_value:.2f}" in html  # each session's S in the table
    for discipline, score in row["disciplines"].items():
        assert discipline in html and f"{score['score']:.2f}" in html
    assert "2.00 s" in html  # latency, as the answers were timed
    assert f"{row['cost']['usd_per_1k_items']:.4f}" in html and "100.0" in html
    assert "no scored replay session" in html and "no scored anchor-set session" in html
    assert f"{row['relative']['mean']:.2f}" in html and "Position" in html
    # the weak model: no usage reported (cost not recorded), its replay check
    weak = (await client.get(f"/console/models/{seeded.weak}")).text
    usage = weak.split("Latency and cost", 1)[1].split("Contamination", 1)[0]
    assert "not recorded" in usage and "no usage reported" in usage
    assert "3 / 12" in weak and "rate 0.250" in weak
    # pages of sessions
    later = await client.get(f"/console/models/{seeded.strong}?page=2")
    assert later.status_code == 200 and "No session on this page" in later.text


async def test_another_organisations_model_is_not_found_for_an_evaluator(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    await console_login(client, world.a.keys["evaluator"])
    assert (await client.get(f"/console/models/{seeded.strong}")).status_code == 200
    other = await client.get(f"/console/models/{seeded.weak}")
    assert other.status_code == 404 and "model-org-b" not in other.text
    assert (await client.get(f"/console/models/{seeded.hostile}")).status_code == 404
    unknown = "00000000-0000-4000-8000-000000000000"
    assert (await client.get(f"/console/models/{unknown}")).status_code == 404
    assert (await client.get("/console/models/not-a-uuid")).status_code == 422
    client.cookies.clear()
    await console_login(client, world.b.keys["evaluator"])
    assert (await client.get(f"/console/models/{seeded.weak}")).status_code == 200
    assert (await client.get(f"/console/models/{seeded.strong}")).status_code == 404
    # a model without any session yet
    headers = await login(client, world.b.keys["vendor"])
    fresh = await client.post(
        "/v1/models", json={"name": "fresh", "api_snapshot": "v2"}, headers=headers
    )
    empty = await client.get(f"/console/models/{fresh.json()['id']}")
    assert empty.status_code == 200
    assert "Not on the leaderboard" in empty.text and "No scored ranked session" in empty.text


async def test_hostile_model_names_are_escaped(seeded: Seeded) -> None:
    client, world = seeded.client, seeded.world
    await console_login(client, world.a.keys["auditor"])
    for path in ("/console/models", f"/console/models/{seeded.hostile}"):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert "<script>alert(1)</script>" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;" in page.text
    assert HOSTILE not in page.text
