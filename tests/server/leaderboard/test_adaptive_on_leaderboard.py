"""Adaptive sessions on the leaderboard, end to end: sessions opened and answered through
the API, scored by the in-process worker (matchers at once, the local judge server for
open items), ranked by ``GET /v1/leaderboard``.

An adaptive session counts by its estimate of its pool's score (the one
``server.sessions.adaptive.session_estimates`` gives, checked here against Cochran's
stratified mean written out by hand for the ``neyman`` policy), never by the raw mean of
the items it chose: a model with a fixed and an adaptive session scores the mean of the
fixed session's eq. 1 and the adaptive session's estimate, and a model with an adaptive
session only is ranked too.
"""

from __future__ import annotations

import uuid

import pytest

from server.database import create_engine, unit_of_work
from server.scoring.assignment import JudgeAssignment
from server.sessions.adaptive import SessionEstimate, scores_of, session_estimates
from tests.server.sessions.test_adaptive_sessions import (
    by_discipline,
    run_session,
    settings_for,
    stored,
    stratified_mean,
)
from tests.support.api import World, login, running_api
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import JUDGE_NAME, verdicts


async def estimates_of(
    db_url: str,
    *session_ids: uuid.UUID,
    scores: dict[uuid.UUID, dict[int, float]] | None = None,
) -> dict[uuid.UUID, SessionEstimate]:
    """The estimates from ``scores``, by default the sessions' own as the leaderboard
    counts them (the one judge of the test's settings)."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            if scores is None:
                judges = JudgeAssignment.single(JUDGE_NAME)
                scores = await scores_of(db, session_ids=session_ids, judges=judges)
            return await session_estimates(db, session_ids=session_ids, scores=scores)
    finally:
        await engine.dispose()


async def eq1_of(db_url: str, session_id: uuid.UUID) -> float:
    """A fixed session's S from its stored verdicts (one judge: the verdict counts)."""
    scores = [v.score for v in await verdicts(db_url, session_id) if v.score is not None]
    return sum(scores) / (3 * len(scores)) * 100


async def test_adaptive_sessions_count_by_their_estimates_beside_fixed_ones(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.a.model_id is not None and world.b.model_id is not None
    rates = by_discipline({"d0": True, "d1": True, "d2": False})
    async with running_api(settings_for(db_url, llm)) as (_, client):
        fixed = await run_session(  # a weaker day: right in d0 only
            client,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=30,
            correct=by_discipline({"d0": True, "d1": False, "d2": False}),
            db_url=db_url,
            mode="fixed",
        )
        mixed = await run_session(
            client,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=120,
            correct=rates,
            db_url=db_url,
            adaptive={"policy": "neyman", "bound": "normal", "target_halfwidth": 12},
        )
        only = await run_session(
            client,
            keys=world.b.keys,
            model_id=world.b.model_id,
            n_items=80,
            correct=lambda item: item.qtype == "multiple_choice",
            db_url=db_url,
            adaptive={"policy": "model-assisted", "target_halfwidth": 10},
        )
        evaluator = await login(client, world.a.keys["evaluator"])
        response = await client.get("/v1/leaderboard", headers=evaluator)
        assert response.status_code == 200, response.text
        board = response.json()
        view = await client.get(
            "/v1/leaderboard", params={"view": "disciplines"}, headers=evaluator
        )
        assert view.status_code == 200, view.text

    estimates = await estimates_of(db_url, mixed.id, only.id)
    assert set(estimates) == {mixed.id, only.id}
    rows = {row["model_id"]: row for row in board["models"]}
    assert set(rows) == {str(world.a.model_id), str(world.b.model_id)}

    # model A: one fixed session and one adaptive session, S = mean of the two scores
    s_fixed = await eq1_of(db_url, fixed.id)
    held = await stored(db_url, mixed.id)
    by_hand = stratified_mean(held["pool"], held["scores"])
    assert estimates[mixed.id].score == pytest.approx(by_hand, abs=1e-9)
    raw = sum(held["scores"].values()) / (3 * len(held["scores"])) * 100
    assert abs(raw - by_hand) > 0.5, "the check needs a raw item mean unlike the estimate"
    assert abs(s_fixed - by_hand) > 10, "the two sessions must differ for the mean to show"
    a = rows[str(world.a.model_id)]
    assert a["sessions"] == 2 and a["adaptive_sessions"] == 1
    assert a["absolute"]["session_values"] == pytest.approx([s_fixed, by_hand], abs=1e-4)
    assert a["absolute"]["mean"] == pytest.approx((s_fixed + by_hand) / 2, abs=1e-4)
    assert a["absolute"]["mean"] != pytest.approx((s_fixed + raw) / 2, abs=0.2)
    assert a["absolute"]["ci_low"] <= a["absolute"]["mean"] <= a["absolute"]["ci_high"]

    # model B: an adaptive session only, ranked and grouped by its estimate
    b = rows[str(world.b.model_id)]
    estimate = estimates[only.id]
    assert b["sessions"] == b["adaptive_sessions"] == 1
    assert b["position"] in (1, 2) and b["group"] >= 1
    assert b["absolute"]["mean"] == pytest.approx(estimate.score, abs=1e-4)
    assert b["absolute"]["session_values"] == pytest.approx([estimate.score], abs=1e-4)
    assert b["absolute"]["ci_low"] < estimate.score < b["absolute"]["ci_high"]
    assert any(str(world.b.model_id) in group or b["name"] in group for group in board["groups"])
    assert b["disciplines"] == {
        name: {
            "score": pytest.approx(points / 10, abs=1e-4),
            "standard_error": pytest.approx(variance**0.5 / 10, abs=1e-4),
            "items": n,
        }
        for name, (points, variance, n) in estimate.disciplines.items()
    }
    assert b["latency"]["median_s"] is not None, "adaptive answers count in latency"
    ranked = {
        model["model_id"] for block in view.json()["disciplines"] for model in block["models"]
    }
    assert str(world.a.model_id) in ranked

    # the board's scores, not the session's own, make the estimate (its judges, reviewers
    # first): the same draws with every answer counted right give 100
    delivered = range(len(only.delivered))
    perfect = await estimates_of(db_url, only.id, scores={only.id: dict.fromkeys(delivered, 1.0)})
    assert perfect[only.id].score == pytest.approx(100.0)
    assert estimate.score < 90
