"""The leaderboard end to end: sessions answered through the API, scored by the in-process
worker with the local judge server, ranked by ``GET /v1/leaderboard``; the anchor's
designation and history; replay and anchor-set sessions (contamination checks)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import select

from bank.anchor_set import designate_anchor_set
from bank.models import Item
from server.database import create_engine, unit_of_work
from server.sessions.modes.replay import replay_mask
from tests.support.api import World, login, running_api, seed_world
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import (
    answer_for,
    answer_items,
    judged_settings,
    load_item,
    verdicts,
    wait_until_scored,
)

PUBLIC_ONLY = {"latency", "cost", "contamination", "organisation"}


@pytest.fixture
async def big_world(fresh_db_url: str) -> tuple[str, World]:
    """Room for several sessions per organisation (180 families)."""
    return fresh_db_url, await seed_world(fresh_db_url, per_cell=15)


REPORTED_S = 0.25
"""The model latency the strong model's client reports with every answer."""


def settings_for(db_url: str, llm: FakeLlm, **extra: Any) -> Any:
    return judged_settings(db_url, llm, leaderboard_resamples=500, **extra)


@dataclass
class Driven:
    id: uuid.UUID
    scores: list[int] = field(default_factory=list)
    """The score a correct scorer gives each position (3 right, 0 wrong)."""
    disciplines: list[str] = field(default_factory=list)


async def drive(
    client: httpx.AsyncClient,
    db_url: str,
    *,
    keys: dict[str, str],
    model_id: uuid.UUID,
    n_items: int,
    correct: Callable[[int], bool],
    mode: str = "fixed",
    usage: dict[str, int] | None = None,
    answer: Callable[[Item, int], str] | None = None,
    reports: dict[str, Any] | None = None,
) -> Driven:
    """Open a session as the evaluator, answer every item as the vendor, wait until scored."""
    evaluator = await login(client, keys["evaluator"])
    opened = await client.post(
        "/v1/sessions",
        json={"model_id": str(model_id), "n_items": n_items, "mode": mode},
        headers=evaluator,
    )
    assert opened.status_code == 201, opened.text
    assert opened.json()["mode"] == mode
    driven = Driven(uuid.UUID(opened.json()["id"]))
    headers = await login(client, keys["vendor"], driven.id)
    answered = await answer_items(
        client,
        db_url,
        driven.id,
        headers,
        answer or (lambda item, position: answer_for(item, correct(position))),
        usage=usage,
        reports=reports,
    )
    driven.scores = [3 if correct(a.position) else 0 for a in answered]
    driven.disciplines = [a.item.discipline for a in answered]
    await wait_until_scored(db_url, driven.id, within_s=60)
    return driven


def eq1(scores: list[int]) -> float:
    return sum(scores) / (3 * len(scores)) * 100


async def register(
    client: httpx.AsyncClient, keys: dict[str, str], name: str, **extra: Any
) -> uuid.UUID:
    headers = await login(client, keys["vendor"])
    response = await client.post(
        "/v1/models", json={"name": name, "api_snapshot": "v1", **extra}, headers=headers
    )
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["id"])


async def test_leaderboard_ranks_with_intervals_groups_views_and_anchor_history(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    async with running_api(settings_for(db_url, llm)) as (_, client):
        strong = await register(
            client, world.a.keys, "strong", usd_per_mtok_in=2.0, usd_per_mtok_out=8.0
        )
        weak = await register(client, world.b.keys, "weak")
        plans = {
            "strong": (world.a.keys, strong, lambda p: p % 6 != 5),
            "mid": (world.a.keys, world.a.model_id, lambda p: p % 2 == 0),
            "weak": (world.b.keys, weak, lambda p: p % 6 == 0),
        }
        runs: dict[str, list[Driven]] = {name: [] for name in plans}
        for name, (keys, model_id, correct) in plans.items():
            assert model_id is not None
            for _ in range(2):
                runs[name].append(
                    await drive(
                        client,
                        db_url,
                        keys=keys,
                        model_id=model_id,
                        n_items=18,
                        correct=correct,
                        usage={"prompt_tokens": 100, "completion_tokens": 50},
                        reports={"model_latency_s": REPORTED_S} if name == "strong" else None,
                    )
                )
        names = {str(strong): "strong", str(world.a.model_id): "model-org-a", str(weak): "weak"}
        evaluator = await login(client, world.a.keys["evaluator"])
        vendor = await login(client, world.b.keys["vendor"])
        admin = await login(client, world.a.keys["admin"])

        board = (await client.get("/v1/leaderboard", headers=evaluator)).json()
        public = (await client.get("/v1/leaderboard", headers=vendor)).json()
        by_discipline = (
            await client.get("/v1/leaderboard", params={"view": "disciplines"}, headers=vendor)
        ).json()
        with_baselines = (
            await client.get(
                "/v1/leaderboard",
                params={"baselines": "true", "diagnostics": "true"},
                headers=evaluator,
            )
        ).json()

        # the order, the scores (eq. 1 averaged over sessions) and relative to the top model
        rows = board["models"]
        assert [names[r["model_id"]] for r in rows] == ["strong", "model-org-a", "weak"]
        expected_s = {n: float(np.mean([eq1(d.scores) for d in runs[n]])) for n in runs}
        by_name = dict(zip(["strong", "mid", "weak"], rows, strict=True))
        for name, row in by_name.items():
            assert row["absolute"]["mean"] == pytest.approx(expected_s[name], abs=1e-3)
            assert row["absolute"]["session_values"] == pytest.approx(
                [eq1(d.scores) for d in runs[name]], abs=1e-3
            )
            assert row["relative"]["mean"] == pytest.approx(
                expected_s[name] / expected_s["strong"] * 100, abs=1e-3
            )
            for scale in ("absolute", "relative"):
                summary = row[scale]
                assert summary["ci_low"] <= summary["mean"] <= summary["ci_high"]
            assert row["sessions"] == 2
            low, high = row["rank_range"]
            assert low <= row["position"] <= high
        assert board["anchor"] == {
            "model_id": str(strong),
            "name": "strong",
            "designated": False,
            "note": None,
        }
        assert by_name["strong"]["group"] != by_name["weak"]["group"]
        assert sum(len(g) for g in board["groups"]) == 3

        # latency from the server's clock, cost from the reported usage and the prices
        assert by_name["strong"]["latency"]["median_s"] >= 0
        assert by_name["strong"]["latency"]["p95_s"] >= by_name["strong"]["latency"]["median_s"]
        # beside it, the model's own latency as the client reported it (36 answers)
        assert by_name["strong"]["latency"]["reported_median_s"] == pytest.approx(REPORTED_S)
        assert by_name["strong"]["latency"]["reported_n"] == 36
        assert by_name["weak"]["latency"]["reported_median_s"] is None
        assert by_name["weak"]["latency"]["reported_n"] == 0
        assert by_name["strong"]["cost"]["prompt_tokens_per_item"] == 100
        assert by_name["strong"]["cost"]["usd_per_1k_items"] == pytest.approx(0.6)
        assert by_name["weak"]["cost"]["usd_per_1k_items"] is None
        assert by_name["strong"]["organisation"] == "org-a"

        # Elo and Bradley-Terry from the items two organisations' models shared
        base = with_baselines["baselines"]
        assert [m["model_id"] for m in base["models"]] == [r["model_id"] for r in rows]
        assert "baselines" not in board and "diagnostics" not in board
        diagnostics = with_baselines["diagnostics"]
        assert sorted(diagnostics["models"]) == sorted(names.values())
        assert -1 <= diagnostics["anisotropy_index"] <= 2
        # each row says how sure it is to be above the next one
        for upper, lower in itertools.pairwise(rows):
            assert 0.5 <= upper["beats_next"] <= 1
            if upper["group"] != lower["group"]:
                assert upper["beats_next"] >= 0.95
        assert rows[-1]["beats_next"] is None
        # (an organisation is never served an item twice: only org A's models against org
        # B's can share items, so a model may have no comparison and no rating)
        rated = [names[m["model_id"]] for m in base["models"] if m["elo"] is not None]
        if base["n_comparisons"]:
            assert len(rated) >= 2 and "weak" in rated  # every comparison involves org B
        else:
            assert not rated and base["note"] == "no two models share an item"

        # vendors see the configured public fields only, with intervals and groups
        for row in public["models"]:
            assert not PUBLIC_ONLY & row.keys()
            assert {"absolute", "relative", "group", "rank_range", "position"} <= row.keys()
        assert [r["model_id"] for r in public["models"]] == [r["model_id"] for r in rows]

        # per discipline: pooled over both sessions, on the 10-point scale, best first
        for block in by_discipline["disciplines"]:
            got = {names[m["model_id"]]: m["score"] for m in block["models"]}
            assert list(got.values()) == sorted(got.values(), reverse=True)
            for name, alias in (("strong", "strong"), ("mid", "model-org-a"), ("weak", "weak")):
                pooled = [
                    s
                    for d in runs[name]
                    for s, disc in zip(d.scores, d.disciplines, strict=True)
                    if disc == block["discipline"]
                ]
                if pooled:
                    assert got[alias] == pytest.approx(np.mean(pooled) / 3 * 10, abs=1e-3)

        # an admin designates the middle model: every R is recomputed against it
        put = await client.put(
            "/v1/admin/leaderboard/anchor", json={"model_id": str(world.a.model_id)}, headers=admin
        )
        assert put.status_code == 200, put.text
        again = (await client.get("/v1/leaderboard", headers=evaluator)).json()
        assert again["anchor"]["designated"] is True
        assert again["anchor"]["name"] == "model-org-a"
        relative = {names[r["model_id"]]: r["relative"]["mean"] for r in again["models"]}
        assert relative["model-org-a"] == pytest.approx(100)
        assert relative["strong"] == pytest.approx(
            expected_s["strong"] / expected_s["mid"] * 100, abs=1e-3
        )
        refused = await client.put(
            "/v1/admin/leaderboard/anchor", json={"model_id": str(uuid.uuid4())}, headers=admin
        )
        assert refused.status_code == 404
        back = await client.put(
            "/v1/admin/leaderboard/anchor", json={"model_id": None}, headers=admin
        )
        assert back.status_code == 200
        history = (await client.get("/v1/leaderboard/anchors", headers=vendor)).json()
        assert [h["model_id"] for h in history] == [None, str(world.a.model_id)]
        final = (await client.get("/v1/leaderboard", headers=evaluator)).json()
        assert final["anchor"]["name"] == "strong" and final["anchor"]["designated"] is False


async def test_diagnostics_with_a_discipline_every_model_scores_0_in_answer_200_with_reasons(
    world_db: tuple[str, World], llm: FakeLlm
) -> None:
    """Regression: a discipline with difficulty 0 made ``?diagnostics=true`` answer 500."""
    db_url, world = world_db

    # both models get every D0 item wrong; "a" gets the rest right, "b" half of the rest
    def right_a(item: Item) -> bool:
        return item.discipline != "d0"

    def right_b(item: Item) -> bool:
        return item.discipline != "d0" and item.subdiscipline == "S0"

    async with running_api(settings_for(db_url, llm)) as (_, client):
        for org, right in ((world.a, right_a), (world.b, right_b)):
            assert org.model_id is not None

            def reply(item: Item, _: int, right: Callable[[Item], bool] = right) -> str:
                return answer_for(item, right(item))

            await drive(
                client,
                db_url,
                keys=org.keys,
                model_id=org.model_id,
                n_items=12,
                correct=lambda p: False,
                answer=reply,
            )
        answers = [
            await client.get(
                "/v1/leaderboard",
                params={"diagnostics": "true"},
                headers=await login(client, keys[role]),
            )
            for keys, role in ((world.a.keys, "admin"), (world.b.keys, "evaluator"))
        ]
    for response in answers:
        assert response.status_code == 200, response.text
        board = response.json()
        assert {d for row in board["models"] for d in row["disciplines"]} == {"d0", "d1", "d2"}
        found = board["diagnostics"]
        assert sorted(found["models"]) == ["model-org-a", "model-org-b"]
        assert found["capability_inconsistency"] is None
        assert found["unavailable"]["capability_inconsistency"] == (
            "discipline 'd0': every model scores 0, so its difficulty is undefined"
        )
        # the other statistics do not depend on D0's difficulty: still computed (RSA has
        # no weighting schemes for these disciplines, and says so)
        assert found["anisotropy_index"] == pytest.approx(0.0, abs=1e-9)
        assert found["rsa"] is None and "no weighting schemes" in found["unavailable"]["rsa"]
        assert set(found["unavailable"]) == {"capability_inconsistency", "rsa"}


def _hidden(item: Item) -> str:
    masked = replay_mask(item.question)
    assert masked is not None
    return masked.hidden


async def test_replay_sessions_mask_items_count_near_exact_completions_and_stay_unranked(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.a.model_id is not None
    async with running_api(settings_for(db_url, llm)) as (_, client):
        vendor = await login(client, world.a.keys["vendor"])
        refused = await client.post(
            "/v1/sessions",
            json={"model_id": str(world.a.model_id), "mode": "replay"},
            headers=vendor,
        )
        assert refused.status_code == 403
        await drive(
            client,
            db_url,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=6,
            correct=lambda p: True,
        )

        seen: list[dict[str, Any]] = []

        def complete(item: Item, position: int) -> str:
            seen.append({"item": item, "position": position})
            return _hidden(item) + " and so on" if position % 2 == 0 else "no idea at all"

        replay = await drive(
            client,
            db_url,
            keys=world.a.keys,
            model_id=world.a.model_id,
            n_items=8,
            correct=lambda p: p % 2 == 0,
            mode="replay",
            answer=complete,
        )
        # what the client was shown: the beginning only, no options
        headers = await login(client, world.a.keys["evaluator"])
        listed = (await client.get(f"/v1/sessions/{replay.id}", headers=headers)).json()
        assert listed["mode"] == "replay"
        found = {v.position: v for v in await verdicts(db_url, replay.id)}
        assert {p: v.score for p, v in found.items()} == {
            p: 3 if p % 2 == 0 else 0 for p in range(8)
        }
        assert {v.method for v in found.values()} == {"replay"}
        board = (await client.get("/v1/leaderboard", headers=headers)).json()
    row = board["models"][0]
    assert row["sessions"] == 1, "a replay session must not enter the ranking"
    assert row["contamination"]["replay"]["items"] == 8
    assert row["contamination"]["replay"]["near_exact"] == 4
    assert (
        0
        < row["contamination"]["replay"]["ci_low"]
        < 0.5
        < row["contamination"]["replay"]["ci_high"]
    )


async def test_replay_delivery_shows_only_the_beginning(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.a.model_id is not None
    async with running_api(settings_for(db_url, llm)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        opened = await client.post(
            "/v1/sessions",
            json={"model_id": str(world.a.model_id), "mode": "replay", "n_items": 3},
            headers=evaluator,
        )
        sid = opened.json()["id"]
        headers = await login(client, world.a.keys["vendor"], sid)
        delivered = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
    item = await load_item(db_url, delivered["item_id"])
    masked = replay_mask(item.question)
    assert masked is not None
    assert delivered["qtype"] == "replay" and delivered["options"] is None
    assert masked.prefix in delivered["question"]
    assert masked.hidden not in delivered["question"]
    assert item.answer not in delivered["question"] or item.answer in masked.prefix


async def test_anchor_set_is_served_only_by_anchor_sessions_and_gives_a_gap(
    big_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = big_world
    assert world.a.model_id is not None and world.b.model_id is not None
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            change = await designate_anchor_set(db, size=12, seed="5eed")
        async with unit_of_work(engine) as db:
            anchor_items = set(
                (await db.execute(select(Item.id).where(Item.status == "anchor"))).scalars()
            )
    finally:
        await engine.dispose()
    assert change.families == 12 and len(anchor_items) == change.items
    async with running_api(settings_for(db_url, llm)) as (_, client):
        served: dict[str, set[uuid.UUID]] = {"fixed": set(), "anchor": set()}

        def recorder(mode: str, right: Callable[[int], bool]) -> Callable[[Item, int], str]:
            def answer(item: Item, position: int) -> str:
                served[mode].add(item.id)
                return answer_for(item, right(position))

            return answer

        # org A does well on the bank and badly on the anchor set; org B the same on both
        for keys, model_id, public_right, anchor_right in (
            (world.a.keys, world.a.model_id, lambda p: p % 4 != 3, lambda p: p % 4 == 0),
            (world.b.keys, world.b.model_id, lambda p: p % 2 == 0, lambda p: p % 2 == 0),
        ):
            for _ in range(2):
                await drive(
                    client,
                    db_url,
                    keys=keys,
                    model_id=model_id,
                    n_items=60,
                    correct=public_right,
                    answer=recorder("fixed", public_right),
                )
            await drive(
                client,
                db_url,
                keys=keys,
                model_id=model_id,
                n_items=12,
                mode="anchor",
                correct=anchor_right,
                answer=recorder("anchor", anchor_right),
            )
        board = (
            await client.get("/v1/leaderboard", headers=await login(client, world.a.keys["admin"]))
        ).json()
    assert not served["fixed"] & anchor_items, "an ordinary session served an anchor-set item"
    assert served["anchor"] <= anchor_items and served["anchor"]
    gaps = {r["model_id"]: r["contamination"]["generalisation_gap"] for r in board["models"]}
    a_gap, b_gap = gaps[str(world.a.model_id)], gaps[str(world.b.model_id)]
    assert a_gap["gap"] == pytest.approx(a_gap["public"] - a_gap["anchor_set"], abs=1e-3)
    assert a_gap["public"] == pytest.approx(75, abs=1e-3) and a_gap["anchor_set"] == pytest.approx(
        25, abs=1e-3
    )
    assert b_gap["gap"] == pytest.approx(0, abs=1e-3)
    assert all(r["sessions"] == 2 for r in board["models"])
