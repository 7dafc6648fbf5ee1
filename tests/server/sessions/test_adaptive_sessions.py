"""Adaptive sessions end to end: opened through the API, answered item by item, scored by
the in-process worker (matchers at once, the local judge server for open items), with the
server choosing every next item from the scores so far and ending the session when its
stopping rule fires."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from bank.models import Exposure, Item, SampleItem
from server.database import create_engine, unit_of_work
from server.scoring.models import Verdict
from server.sessions.models import AdaptiveDraw, AdaptiveRun, EvalSession
from tests.support.api import World, login, running_api
from tests.support.console import console_login
from tests.support.fake_llm import FakeLlm
from tests.support.scored import add_model, scored_session
from tests.support.sessions import (
    JUDGE_NAME,
    answer_for,
    answer_items,
    judged_settings,
    table_counts,
    wait_until,
    wait_until_scored,
)


def settings_for(db_url: str, llm: FakeLlm) -> Any:
    return judged_settings(db_url, llm, scoring_poll_s=0.2)


@dataclass
class Run:
    id: uuid.UUID
    opened: dict[str, Any]
    delivered: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)


async def run_session(
    client: httpx.AsyncClient,
    *,
    keys: dict[str, str],
    model_id: uuid.UUID,
    n_items: int,
    correct: Callable[[Item], bool],
    db_url: str,
    mode: str = "adaptive",
    adaptive: dict[str, Any] | None = None,
) -> Run:
    """Open a session as the evaluator, answer every item the server hands out, wait until
    every answer is scored, and read the session back.

    An adaptive session is answered one item at a time, each scored before the next is
    asked for: the server chooses and stops from what has been scored, so on a loaded
    machine a client faster than the scorer would get items its stopping rule would not
    have handed out (CI saw all 120 delivered)."""
    evaluator = await login(client, keys["evaluator"])
    body: dict[str, Any] = {"model_id": str(model_id), "n_items": n_items, "mode": mode}
    if adaptive is not None:
        body["adaptive"] = adaptive
    opened = await client.post("/v1/sessions", json=body, headers=evaluator)
    assert opened.status_code == 201, opened.text
    run = Run(uuid.UUID(opened.json()["id"]), opened.json())
    answered = []
    while True:
        step = await answer_items(
            client,
            db_url,
            run.id,
            evaluator,
            lambda item, _: answer_for(item, correct(item)),
            limit=None if mode != "adaptive" else 1,
        )
        answered += step
        if mode != "adaptive" or not step:
            break
        await wait_until(lambda: _all_scored(db_url, run.id), within_s=30, what="the answer scored")
    run.delivered = [a.shown for a in answered]
    await wait_until_scored(db_url, run.id, within_s=90)
    run.final = (await client.get(f"/v1/sessions/{run.id}", headers=evaluator)).json()
    return run


async def _all_scored(db_url: str, session_id: uuid.UUID) -> bool:
    counts = await table_counts(db_url, session_id)
    return bool(counts["verdicts"] >= counts["answers"])


def by_discipline(rates: dict[str, bool]) -> Callable[[Item], bool]:
    """Right on every item of the disciplines marked True, wrong on the others."""
    return lambda item: rates[item.discipline]


async def stored(db_url: str, session_id: uuid.UUID) -> dict[str, Any]:
    """What the database holds about the session: its run, pool, verdicts and exposures."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            record = await db.get(EvalSession, session_id)
            run = await db.get(AdaptiveRun, session_id)
            assert record is not None and run is not None
            pool = (
                await db.execute(
                    select(SampleItem.position, Item.id, Item.discipline, Item.qtype)
                    .join(Item, Item.id == SampleItem.item_id)
                    .where(SampleItem.sample_id == record.sample_id)
                )
            ).all()
            verdict_rows = (
                await db.execute(
                    select(Verdict.position, Verdict.score).where(Verdict.session_id == session_id)
                )
            ).all()
            scores = {int(position): score for position, score in verdict_rows}
            exposures = await db.scalar(
                select(func.count()).select_from(Exposure).where(Exposure.session_id == session_id)
            )
            return {
                "record": record,
                "run": run,
                "pool": pool,
                "scores": scores,
                "exposures": exposures,
            }
    finally:
        await engine.dispose()


def stratified_mean(pool: list[Any], scores: dict[int, int]) -> float:
    """Cochran's y_st (points) over discipline x type strata of the pool, by hand."""
    sizes = Counter((row.discipline, row.qtype) for row in pool)
    got: dict[tuple[str, str], list[float]] = {}
    for row in pool:
        if row.position in scores:
            got.setdefault((row.discipline, row.qtype), []).append(scores[row.position] / 3)
    total = sum(sizes.values())
    return 100 * sum(sizes[key] / total * sum(v) / len(v) for key, v in got.items())


async def after_two_fixed_models(
    db_url: str, world: World, llm: FakeLlm, adaptive: dict[str, Any]
) -> Run:
    """Two models of organisation B answer 100-item fixed sessions (one right outside d2,
    one right in d0 only); then A's model, right outside d1, runs a 150-item adaptive
    session with the ``adaptive`` options."""
    assert world.a.model_id is not None and world.b.model_id is not None
    async with running_api(settings_for(db_url, llm)) as (_, client):
        vendor_b = await login(client, world.b.keys["vendor"])
        second = await client.post(
            "/v1/models", json={"name": "second", "api_snapshot": "v1"}, headers=vendor_b
        )
        assert second.status_code == 201, second.text
        for model_id, correct in (
            (world.b.model_id, lambda item: item.discipline != "d2"),
            (uuid.UUID(second.json()["id"]), lambda item: item.discipline == "d0"),
        ):
            await run_session(
                client,
                keys=world.b.keys,
                model_id=model_id,
                n_items=100,
                correct=correct,
                db_url=db_url,
                mode="fixed",
            )
        return await run_session(
            client,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=150,
            correct=lambda item: item.discipline != "d1",
            db_url=db_url,
            adaptive=adaptive,
        )


async def test_adaptive_session_stops_when_precise_and_returns_the_rest_of_its_pool(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.a.model_id is not None
    async with running_api(settings_for(db_url, llm)) as (_, client):
        rates = {"d0": True, "d1": True, "d2": False}
        run = await run_session(
            client,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=120,
            correct=by_discipline(rates),
            db_url=db_url,
            adaptive={"policy": "neyman", "bound": "normal", "target_halfwidth": 12},
        )
    opened = run.opened["adaptive"]
    assert (opened["policy"], opened["bound"], opened["target_halfwidth"]) == (
        "neyman",
        "normal",
        12,
    )
    assert opened["budget"] == 120 and opened["stop_reason"] is None

    n = len(run.delivered)
    final = run.final
    assert [d["position"] for d in run.delivered] == list(range(n)), "delivered strictly in order"
    assert len({d["item_id"] for d in run.delivered}) == n
    assert 12 <= n < 120, "stopped early"
    assert final["adaptive"]["stop_reason"] == "precise"
    assert (final["state"], final["n_items"], final["completed"], final["allocated"]) == (
        "scored",
        n,
        n,
        0,
    )
    db = await stored(db_url, run.id)
    assert db["exposures"] == n, "the undelivered rest of the pool went back to the organisation"
    assert len(db["pool"]) == 120
    # every stratum of the pool (discipline x type, augmented types included) was piloted
    strata = {(row.discipline, row.qtype) for row in db["pool"]}
    assert len(strata) >= 6
    assert {(d["discipline"], d["qtype"]) for d in run.delivered} == strata
    delivered_ids = {uuid.UUID(d["item_id"]) for d in run.delivered}
    assert {row.id for row in db["pool"] if row.position < n} == delivered_ids
    assert sorted(db["scores"]) == list(range(n))
    estimate = final["adaptive"]["estimate"]
    assert estimate == pytest.approx(stratified_mean(db["pool"], db["scores"]), abs=1e-9)
    # two of three disciplines right: the pool's mean is 2/3 of the strata by weight
    truth = 100 * sum(rates[row.discipline] for row in db["pool"]) / len(db["pool"])
    assert abs(estimate - truth) <= final["adaptive"]["halfwidth"]
    assert final["adaptive"]["halfwidth"] <= 12
    assert db["run"].checks_done >= 1 and db["run"].n_scored <= n


async def test_adaptive_session_without_a_reachable_target_runs_to_its_budget(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.b.model_id is not None
    async with running_api(settings_for(db_url, llm)) as (_, client):
        run = await run_session(
            client,
            keys=world.b.keys,
            model_id=world.b.model_id,
            n_items=40,
            correct=lambda item: item.qtype == "multiple_choice",
            db_url=db_url,
            adaptive={"policy": "uniform", "bound": "hoeffding-serfling", "target_halfwidth": 1},
        )
    assert len(run.delivered) == 40
    assert run.final["adaptive"]["stop_reason"] == "budget"
    assert run.final["n_items"] == 40 and run.final["state"] == "scored"
    assert (await stored(db_url, run.id))["exposures"] == 40


async def test_neyman_irt_learns_item_parameters_from_other_models_only(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    """Two models of organisation B answer fixed sessions first; organisation A's adaptive
    session then fits its pool's parameters on their verdicts and runs with them."""
    db_url, world = big_world
    run = await after_two_fixed_models(
        db_url, world, llm, {"policy": "neyman-irt", "bound": "normal", "target_halfwidth": 15}
    )
    db = await stored(db_url, run.id)
    assert db["run"].history_models == 2
    parameters = db["run"].item_parameters
    pool_ids = {str(row.id) for row in db["pool"]}
    assert parameters and set(parameters) <= pool_ids
    assert all(0.2 <= a <= 4.0 for a, _ in parameters.values())
    assert run.final["adaptive"]["history_models"] == 2
    assert run.final["adaptive"]["stop_reason"] in {"precise", "budget"}
    n = len(run.delivered)
    assert run.final["n_items"] == n and run.final["state"] == "scored"


async def test_adaptive_options_are_validated(big_world: tuple[str, World], llm: FakeLlm) -> None:
    db_url, world = big_world
    async with running_api(settings_for(db_url, llm)) as (_, client):
        vendor = await login(client, world.a.keys["vendor"])
        base = {"model_id": str(world.a.model_id)}
        cases = [
            ({**base, "mode": "fixed", "adaptive": {"policy": "neyman"}}, 422),
            ({**base, "mode": "adaptive", "adaptive": {"policy": "bandit"}}, 422),
            ({**base, "mode": "adaptive", "adaptive": {"delta": 1.5}}, 422),
            ({**base, "mode": "adaptive", "adaptive": {"target_halfwidth": 0}}, 422),
        ]
        for body, status in cases:
            response = await client.post("/v1/sessions", json=body, headers=vendor)
            assert response.status_code == status, (body, response.text)
        # a vendor may not open one: its item choice and stopping follow the verdicts
        refused = await client.post(
            "/v1/sessions", json={**base, "mode": "adaptive"}, headers=vendor
        )
        assert refused.status_code == 403, refused.text
        # an evaluator opens one with the server's defaults
        evaluator = await login(client, world.a.keys["evaluator"])
        opened = await client.post(
            "/v1/sessions", json={**base, "mode": "adaptive"}, headers=evaluator
        )
        assert opened.status_code == 201, opened.text
        defaults = opened.json()["adaptive"]
        assert (defaults["policy"], defaults["bound"], defaults["target_halfwidth"]) == (
            "model-assisted",
            "normal",
            7.25,
        )
        assert defaults["history_models"] == 0 and defaults["estimate"] is None


def des_raj_by_hand(pool: list[Any], draws: list[AdaptiveDraw], scores: dict[int, int]) -> float:
    """The model-assisted estimate (points) from the stored draws and the verdicts: per
    discipline x type stratum, t_k = scores drawn before + predictions of the unseen +
    (y_k - p_k) / q_k, averaged; strata totals summed."""
    stratum_of = {row.position: (row.discipline, row.qtype) for row in pool}
    sizes = Counter(stratum_of.values())
    by_stratum: dict[tuple[str, str], list[AdaptiveDraw]] = {}
    for draw in sorted(draws, key=lambda d: d.position):
        by_stratum.setdefault(stratum_of[draw.position], []).append(draw)
    total = 0.0
    for key, size in sizes.items():
        rows = by_stratum[key]
        if len(rows) == size:
            total += sum(scores[d.position] / 3 for d in rows)
            continue
        seen, estimates = 0.0, []
        for d in rows:
            y = scores[d.position] / 3
            estimates.append(seen + d.unseen_predicted + (y - d.predicted) / d.probability)
            seen += y
        total += sum(estimates) / len(estimates)
    return 100 * min(max(total / len(pool), 0.0), 1.0)


async def stored_draws(db_url: str, session_id: uuid.UUID) -> list[AdaptiveDraw]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.scalars(
                select(AdaptiveDraw).where(AdaptiveDraw.session_id == session_id)
            )
            return list(rows.all())
    finally:
        await engine.dispose()


async def test_model_assisted_session_draws_from_every_discipline_and_stores_its_draws(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    """Two models of organisation B answer fixed sessions first; A's model-assisted session
    fits its pool's parameters on their verdicts, covers every stratum, stores how each
    item was drawn, and reports the estimate those draws give."""
    db_url, world = big_world
    run = await after_two_fixed_models(
        db_url, world, llm, {"policy": "model-assisted", "target_halfwidth": 15}
    )
    async with running_api(settings_for(db_url, llm)) as (_, client):
        assert (await console_login(client, world.a.keys["admin"])).status_code == 303
        page = (await client.get(f"/console/sessions/{run.id}")).text
    db = await stored(db_url, run.id)
    assert db["run"].policy == "model-assisted" and db["run"].bound == "normal"
    assert db["run"].history_models == 2 and db["run"].item_parameters
    n = len(run.delivered)
    assert [d["position"] for d in run.delivered] == list(range(n)), "delivered strictly in order"
    assert run.final["n_items"] == n < 150 and run.final["state"] == "scored"
    assert run.final["adaptive"]["stop_reason"] in {"precise", "settled"}
    strata = {(row.discipline, row.qtype) for row in db["pool"]}
    assert {(d["discipline"], d["qtype"]) for d in run.delivered} == strata, "content quotas"
    draws = await stored_draws(db_url, run.id)
    assert sorted(d.position for d in draws) == list(range(n)), "one stored draw per delivery"
    assert all(0 < d.probability <= 1 and 0 <= d.predicted <= 1 for d in draws)
    estimate = run.final["adaptive"]["estimate"]
    assert estimate == pytest.approx(des_raj_by_hand(db["pool"], draws, db["scores"]), abs=1e-9)
    truth = 100 * sum(row.discipline != "d1" for row in db["pool"]) / len(db["pool"])
    assert abs(estimate - truth) <= run.final["adaptive"]["halfwidth"]
    assert db["exposures"] == n, "the undelivered rest of the pool went back"
    # per-discipline estimates: every discipline's items are all right or all wrong
    disciplines = run.final["adaptive"]["disciplines"]
    assert set(disciplines) == {"d0", "d1", "d2"}
    for name, figures in disciplines.items():
        right = 0.0 if name == "d1" else 100.0
        assert abs(figures["estimate"] - right) <= max(figures["halfwidth"], 1e-9) * 2
        assert figures["n_items"] == sum(d["discipline"] == name for d in run.delivered)
        # the console's session page lists the same figures
        cells = (
            f'<td class="text">{name}</td><td class="num">{figures["estimate"]:,.1f}</td>'
            f'<td class="num">{figures["halfwidth"]:,.1f}</td>'
        )
        assert cells in page


async def test_model_assisted_session_stops_once_its_place_on_the_board_is_settled(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    """Other models' fixed sessions score about 10% and 20% (by the judge the server
    counts: the neighbours are read as the leaderboard reads them); a model that answers
    every item right is above both long before a 1-point half-width is reached, so the
    rank-aware rule stops it."""
    db_url, world = big_world
    assert world.a.model_id is not None and world.b.model_id is not None
    now = datetime.now(UTC)
    for name, right_every, offset in (("low", 10, 0), ("lower", 5, 60)):
        model_id = await add_model(db_url, world.b.id, name)
        scores = [0 if p % right_every else 3 for p in range(60)]
        await scored_session(
            db_url,
            org_id=world.b.id,
            model_id=model_id,
            scores=scores,
            created_at=now - timedelta(hours=1),
            offset=offset,
            judge=JUDGE_NAME,
        )
    async with running_api(settings_for(db_url, llm)) as (_, client):
        run = await run_session(
            client,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=200,
            correct=lambda item: True,
            db_url=db_url,
            adaptive={"policy": "model-assisted", "target_halfwidth": 1},
        )
    assert run.final["adaptive"]["stop_reason"] == "settled"
    assert len(run.delivered) < 200
    assert run.final["adaptive"]["estimate"] > 50


async def test_a_vendor_of_the_organisation_can_neither_see_nor_answer_an_adaptive_item(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    """Driving an adaptive session takes ``sessions:adaptive`` on every path: the
    pending item is not handed to a vendor that takes over an idle lease, nor may it
    answer; its refused requests keep no lease, so the evaluator goes on."""
    db_url, world = big_world
    settings = judged_settings(db_url, llm, scoring_poll_s=0.2, lease_idle_s=0.1)
    async with running_api(settings) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        vendor = await login(client, world.a.keys["vendor"])
        opened = await client.post(
            "/v1/sessions",
            json={"model_id": str(world.a.model_id), "mode": "adaptive", "n_items": 30},
            headers=evaluator,
        )
        assert opened.status_code == 201, opened.text
        sid = opened.json()["id"]
        item = await client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
        assert item.status_code == 200, item.text
        await asyncio.sleep(0.3)  # the evaluator's lease is idle past lease_idle_s
        taken = await client.get(f"/v1/sessions/{sid}/next", headers=vendor)
        assert taken.status_code == 403, taken.text
        body = {"position": 0, "item_id": item.json()["item_id"], "answer": "x"}
        answered = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=vendor)
        assert answered.status_code == 403, answered.text
        again = await client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
        assert again.status_code == 200 and again.json()["item_id"] == item.json()["item_id"]
