"""Several judges on every answer: three local judges of different behaviour (exact, noisy,
strict) score a session; each answer counts with the panel's median, answers they disagree
on by two points or more go to the review queue, and the leaderboard's interval includes
the judges' variance."""

from __future__ import annotations

import statistics
import uuid
from collections import defaultdict
from typing import Any

import pytest
from scipy.stats import pearsonr
from sqlalchemy import select

from bank.models import Item
from server.database import create_engine, unit_of_work
from server.review.models import ReviewTask
from server.review.states import ReviewReason
from server.scoring.models import Verdict
from server.sessions.models import EvalSession
from tests.support.api import World, login, open_session, running_api, seed_world
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import answer_for, answer_items, judged_settings, wait_until_scored

PANEL = {"j-exact": "judge", "j-noisy": "judge-noisy", "j-strict": "judge-strict"}


@pytest.fixture
async def plain_world(fresh_db_url: str) -> tuple[str, World]:
    """A bank without augmented variants: its open items are short answers."""
    return fresh_db_url, await seed_world(fresh_db_url, augment=False)


def panel_settings(db_url: str, llm: FakeLlm, **extra: Any) -> Any:
    judges = [
        {"name": name, "base_url": llm.base_url, "model": profile}
        for name, profile in PANEL.items()
    ]
    return judged_settings(
        db_url,
        llm,
        judges=judges,
        judge_panel=list(PANEL),
        review_audit_rate=0.0,
        review_dual_rate=0.0,
        **extra,
    )


def explained(item: Item, position: int) -> str:
    """Every fourth answer wrong, the others right; right open answers state the reference
    and explain it (the strict judge wants the reference alone, so it disagrees with the
    others on them)."""
    if position % 4 == 3:
        return answer_for(item, False)
    if item.qtype == "short_answer":
        return f"{item.answer} This follows from the sources of the period."
    return answer_for(item, True)


async def verdicts_by_answer(db_url: str, sid: str) -> dict[int, dict[str, int | None]]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(Verdict.position, Verdict.judge, Verdict.score).where(
                    Verdict.session_id == uuid.UUID(sid)
                )
            )
            out: dict[int, dict[str, int | None]] = defaultdict(dict)
            for position, judge, score in rows.tuples():
                out[position][judge] = score
            return dict(out)
    finally:
        await engine.dispose()


async def review_tasks(db_url: str, sid: str) -> dict[int, str]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(ReviewTask.position, ReviewTask.reason).where(
                    ReviewTask.session_id == uuid.UUID(sid)
                )
            )
            return {position: reason for position, reason in rows.tuples()}
    finally:
        await engine.dispose()


def scores(by_judge: dict[str, int | None]) -> list[int]:
    given = [score for score in by_judge.values() if score is not None]
    assert len(given) == len(by_judge), by_judge  # these judges always give a score
    return given


def width(row: dict[str, Any]) -> float:
    return float(row["absolute"]["ci_high"] - row["absolute"]["ci_low"])


async def test_three_judges_give_the_median_and_their_disagreements_go_to_review(
    plain_world: tuple[str, World], llm: FakeLlm
) -> None:
    db_url, world = plain_world
    assert world.a.model_id is not None
    async with running_api(panel_settings(db_url, llm)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        admin = await login(client, world.a.keys["admin"])
        sids = []
        for _ in range(2):
            sid = (await open_session(client, evaluator, world.a.model_id, n_items=12))["id"]
            answered = await answer_items(client, db_url, sid, evaluator, explained)
            assert {a.item.qtype for a in answered} == {"multiple_choice", "short_answer"}
            await wait_until_scored(db_url, uuid.UUID(sid), within_s=60)
            sids.append(sid)
        sid = sids[0]
        verdicts = await verdicts_by_answer(db_url, sid)
        assert all(set(by_judge) == set(PANEL) for by_judge in verdicts.values())
        medians = {p: statistics.median(scores(v)) for p, v in verdicts.items()}
        scoring = (await client.get(f"/v1/sessions/{sid}/scoring", headers=admin)).json()
        assert scoring["judges"] == list(PANEL)
        assert scoring["points"] == sum(round(m) for m in medians.values())
        spread = {p for p, v in verdicts.items() if max(scores(v)) - min(scores(v)) >= 2}
        assert spread, "the strict judge should disagree on explained open answers"
        tasks = await review_tasks(db_url, sid)
        assert tasks == {p: ReviewReason.DISAGREEMENT.value for p in spread}

        agreement = await client.get("/v1/admin/judges/panel-agreement", headers=admin)
        vendor = await login(client, world.a.keys["vendor"])
        refused = await client.get("/v1/admin/judges/panel-agreement", headers=vendor)
        panel_board = (await client.get("/v1/leaderboard", headers=admin)).json()
        alone = (await client.get("/v1/leaderboard?judge=j-exact", headers=admin)).json()
    assert refused.status_code == 403
    body = agreement.json()
    every = {sid: await verdicts_by_answer(db_url, sid) for sid in sids}
    shared = [v for by_answer in every.values() for v in by_answer.values()]
    assert body["answers"] == len(shared) and body["judges"] == sorted(PANEL)
    assert body["split"] == sum(max(scores(v)) - min(scores(v)) >= 2 for v in shared)
    for pair in body["pairs"]:
        x = [v[pair["first"]] for v in shared]
        y = [v[pair["second"]] for v in shared]
        assert pair["n"] == len(shared)
        assert pair["exact"] == pytest.approx(
            sum(a == b for a, b in zip(x, y, strict=True)) / len(x)
        )
        assert pair["pearson_r"] == pytest.approx(pearsonr(x, y).statistic), pair
    assert panel_board["judges"] == list(PANEL) and panel_board["panel_rule"] == "median"
    assert alone["judges"] == ["j-exact"]
    (with_judges,) = panel_board["models"]
    (one_judge,) = alone["models"]
    assert with_judges["under_review"] == 2
    # the bootstrap resamples the judges too: the strict judge's zeros widen the interval
    assert width(with_judges) > 1.5 * width(one_judge), (width(with_judges), width(one_judge))


async def test_vendors_see_a_reviewed_session_as_scored(
    plain_world: tuple[str, World], llm: FakeLlm
) -> None:
    """The state ``reviewed`` is the reviewers' business: vendors read ``scored``."""
    db_url, world = plain_world
    assert world.a.model_id is not None
    async with running_api(panel_settings(db_url, llm)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        vendor = await login(client, world.a.keys["vendor"])
        auditor = await login(client, world.a.keys["auditor"])
        sid = (await open_session(client, evaluator, world.a.model_id, n_items=2))["id"]
        await answer_items(client, db_url, sid, vendor, lambda item, _: answer_for(item, True))
        await wait_until_scored(db_url, uuid.UUID(sid), within_s=60)
        engine = create_engine(db_url)
        try:
            async with unit_of_work(engine) as db:
                record = await db.get(EvalSession, uuid.UUID(sid))
                assert record is not None
                record.state = "reviewed"
        finally:
            await engine.dispose()
        for headers, shown in ((vendor, "scored"), (evaluator, "scored"), (auditor, "reviewed")):
            session = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
            scoring = (await client.get(f"/v1/sessions/{sid}/scoring", headers=headers)).json()
            listed = (await client.get("/v1/sessions", headers=headers)).json()
            assert session["state"] == scoring["state"] == shown
            assert {s["state"] for s in listed if s["id"] == sid} == {shown}
