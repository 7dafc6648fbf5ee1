"""The human review queue over HTTP on the running app, SQLite and PostgreSQL.

A session scored by a judge that never gives a readable rating (``judge-garbled``) has
answers that wait for a person: scoring opens their tasks; a reviewer (an outside expert's
key) lists, shows and scores them; a dual task closes after its second reviewer; a second
score by the same reviewer is 409 and the first stays; the session moves ``scored`` ->
``reviewed`` when its queue is empty; vendors reach nothing of it and other
organisations' evaluators see nothing of it. The audit sample, the disagreement reason and
the agreement report (against scikit-learn) are checked too.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sklearn.metrics import cohen_kappa_score

from judge.prompts import PROMPT_VERSION
from server.config import Settings
from server.review.sampling import (
    AnswerVerdicts,
    JudgeScore,
    ReviewPolicy,
    drawn_for_dual,
    systematic_draws,
)
from server.review.service import open_review_tasks
from server.review.states import ReviewReason
from tests.support.api import World, login, open_session, running_api, test_settings
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm
from tests.support.review import (
    REVIEW,
    TASKS,
    add_task,
    add_verdict,
    human_verdicts,
    reviewer_key,
    session_state,
)
from tests.support.sessions import (
    JUDGE_NAME,
    answer_for,
    answer_items,
    judged_settings,
    wait_until,
)

WorldDb = tuple[str, World]


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.1, 0.37, 1.0])
def test_the_systematic_draw_takes_its_share_to_within_one(rate: float) -> None:
    rng = random.Random(7)
    for _ in range(20):
        start = rng.random()
        draws = systematic_draws(rate=rate, start=start, seen=0, n=500)
        for m in (1, 10, 99, 500):
            expected = rate * m
            assert abs(sum(draws[:m]) - expected) < 1.0 + 1e-9, (rate, start, m)
        # drawing in pieces continues one sequence
        pieces = [
            *systematic_draws(rate=rate, start=start, seen=0, n=123),
            *systematic_draws(rate=rate, start=start, seen=123, n=377),
        ]
        assert pieces == draws


def test_every_answer_has_the_rate_as_its_chance() -> None:
    """Over random starts, answer k of a stratum is drawn with probability ``rate``."""
    rng = random.Random(11)
    rate, trials = 0.25, 4000
    hits = [0] * 8
    for _ in range(trials):
        for k, drawn in enumerate(systematic_draws(rate=rate, start=rng.random(), seen=0, n=8)):
            hits[k] += drawn
    for count in hits:
        assert abs(count / trials - rate) < 4 * (rate * (1 - rate) / trials) ** 0.5


def test_the_draw_refuses_bad_rates() -> None:
    with pytest.raises(ValueError, match="rate"):
        systematic_draws(rate=1.5, start=0.0, seen=0, n=1)
    with pytest.raises(ValueError, match="start"):
        systematic_draws(rate=0.5, start=1.0, seen=0, n=1)


def test_dual_annotation_draws_its_share() -> None:
    keys = [(uuid.uuid4(), position) for position in range(4000)]
    share = sum(drawn_for_dual(s, p, 0.1) for s, p in keys) / len(keys)
    assert abs(share - 0.1) < 4 * (0.1 * 0.9 / len(keys)) ** 0.5
    assert not any(drawn_for_dual(s, p, 0.0) for s, p in keys[:100])
    assert all(drawn_for_dual(s, p, 1.0) for s, p in keys[:100])


def test_reasons_in_order_of_priority() -> None:
    def answer(*verdicts: tuple[str, int | None, str]) -> AnswerVerdicts:
        return AnswerVerdicts(
            "math", [JudgeScore(j, s, m, needs_review=s is None) for j, s, m in verdicts]
        )

    both = answer(("a", None, "judge"), ("b", 0, "judge"), ("c", 3, "judge"))
    assert both.reason(2) == (ReviewReason.NEEDS_REVIEW, "a")
    assert answer(("a", 0, "judge"), ("b", 2, "judge")).reason(2) == (
        ReviewReason.DISAGREEMENT,
        None,
    )
    assert answer(("a", 1, "judge"), ("b", 2, "judge")).reason(2) is None
    assert answer(("a", 3, "objective")).audit_strata() == []
    assert answer(("b", 3, "similarity"), ("a", 2, "judge")).audit_strata() == [
        ("math", "a"),
        ("math", "b"),
    ]


# --------------------------------------------------------------------------- over HTTP


def garbled_settings(db_url: str, llm: FakeLlm, **extra: Any) -> Settings:
    """The in-process worker scores open answers with a judge that never rates."""
    judges = [{"name": JUDGE_NAME, "base_url": llm.base_url, "model": "judge-garbled"}]
    return judged_settings(db_url, llm, judges=judges, review_audit_rate=0.0, **extra)


async def scored_session(client: httpx.AsyncClient, db_url: str, world: World, n_items: int) -> str:
    """A session of org A answered right by its vendor and scored (or reviewed)."""
    assert world.a.model_id is not None
    evaluator = await login(client, world.a.keys["evaluator"])
    sid = str((await open_session(client, evaluator, world.a.model_id, n_items=n_items))["id"])
    vendor = await login(client, world.a.keys["vendor"], sid)
    await answer_items(client, db_url, sid, vendor, lambda item, _: answer_for(item, True))

    async def scored() -> bool:
        return await session_state(db_url, sid) in ("scored", "reviewed")

    await wait_until(scored, within_s=60, what="the session scored")
    return sid


async def task_ids(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> set[int]:
    response = await client.get(TASKS, params=params, headers=headers)
    assert response.status_code == 200, response.text
    return {task["task_id"] for task in response.json()["tasks"]}


async def test_review_flow_end_to_end(open_world_db: WorldDb, llm: FakeLlm) -> None:
    db_url, world = open_world_db
    settings = garbled_settings(db_url, llm, review_dual_rate=1.0)
    async with running_api(settings) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=6)
        assert await session_state(db_url, sid) == "scored"
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        admin = await login(client, world.a.keys["admin"])
        evaluator_a = await login(client, world.a.keys["evaluator"])
        evaluator_b = await login(client, world.b.keys["evaluator"])
        vendor = await login(client, world.a.keys["vendor"])

        queue = (await client.get(TASKS, headers=reviewer)).json()
        tasks = queue["tasks"]
        assert tasks and queue["next_after"] is None
        assert {t["reason"] for t in tasks} == {"needs_review"}
        assert len(tasks) == 6 and {t["qtype"] for t in tasks} == {"short_answer"}
        assert all(t["required"] == 2 and t["human_scores"] == 0 for t in tasks)
        ids = [t["task_id"] for t in tasks]
        assert await task_ids(client, evaluator_a) == set(ids)
        assert await task_ids(client, evaluator_b) == set()

        # blind: the task says what to score, never whose answer it is
        shown = (await client.get(f"{TASKS}/{ids[0]}", headers=reviewer)).json()
        assert shown["question"] and shown["reference"] and shown["answer"]
        assert [j["judge"] for j in shown["judges"]] == [JUDGE_NAME]
        assert shown["judges"][0]["score"] is None
        text = str(shown)
        for secret in (sid, str(world.a.id), str(world.a.model_id), "model-org-a", "org-a"):
            assert secret not in text
        assert shown["your_score"] is None

        # another organisation's evaluator neither sees nor scores it
        assert (await client.get(f"{TASKS}/{ids[0]}", headers=evaluator_b)).status_code == 404
        refused = await client.post(
            f"{TASKS}/{ids[0]}/score", json={"score": 3, "note": "x"}, headers=evaluator_b
        )
        assert refused.status_code == 404
        # vendors reach nothing of review
        for method, url, body in (
            ("GET", TASKS, None),
            ("GET", f"{TASKS}/{ids[0]}", None),
            ("POST", f"{TASKS}/{ids[0]}/score", {"score": 1}),
            ("POST", f"{TASKS}/{ids[0]}/skip", None),
            ("GET", f"{REVIEW}/agreement", None),
        ):
            got = await client.request(method, url, json=body, headers=vendor)
            assert got.status_code == 403, (method, url, got.text)

        # the reviewer scores every task once: each waits for its second reviewer
        for task_id in ids:
            first = await client.post(
                f"{TASKS}/{task_id}/score",
                json={"score": 2, "note": "partly right"},
                headers=reviewer,
            )
            assert first.status_code == 201, first.text
            assert (first.json()["state"], first.json()["human_scores"]) == ("open", 1)
        again = await client.post(
            f"{TASKS}/{ids[0]}/score",
            json={"score": 0, "note": "changed my mind"},
            headers=reviewer,
        )
        assert again.status_code == 409, again.text
        assert await task_ids(client, reviewer) == set()  # nothing left for this reviewer
        assert await task_ids(client, admin) == set(ids)  # the second reviewer's queue
        assert await session_state(db_url, sid) == "scored"
        shown = (await client.get(f"{TASKS}/{ids[0]}", headers=reviewer)).json()
        assert (shown["your_score"], shown["human_scores"]) == (2, 1)

        # the admin skips one, then scores them all: the last score closes the session
        skipped = await client.post(f"{TASKS}/{ids[0]}/skip", headers=admin)
        assert skipped.status_code == 200 and skipped.json()["skipped"] is True
        assert await task_ids(client, admin) == set(ids[1:])
        for task_id in ids:
            assert await session_state(db_url, sid) == "scored"
            done = await client.post(
                f"{TASKS}/{task_id}/score", json={"score": 3, "note": ""}, headers=admin
            )
            assert done.status_code == 201, done.text
            assert (done.json()["state"], done.json()["human_scores"]) == ("done", 2)
        late = await client.post(
            f"{TASKS}/{ids[0]}/score", json={"score": 1, "note": "late"}, headers=evaluator_a
        )
        assert late.status_code == 409  # the task has its two scores
        assert await session_state(db_url, sid) == "reviewed"

        humans = await human_verdicts(db_url, sid)
        assert len(humans) == 2 * len(ids)
        # the first reviewer's scores stand; the refused second attempt left nothing
        first_scores = {v.score for v in humans if v.detail == "partly right"}
        assert first_scores == {2} and not any(v.detail == "changed my mind" for v in humans)
        assert {v.method for v in humans} == {"human"}

        # what the vendor reads of the session says nothing of review
        session = (await client.get(f"/v1/sessions/{sid}", headers=vendor)).json()
        scoring = (await client.get(f"/v1/sessions/{sid}/scoring", headers=vendor)).json()
        assert session["state"] == "scored"
        assert scoring["state"] == "scored"
        assert "human" not in str(session) + str(scoring)


async def test_a_session_without_tasks_stays_scored(world_db: WorldDb, llm: FakeLlm) -> None:
    """With a judge that scores everything and no audit, nothing opens and nothing moves."""
    db_url, world = world_db
    async with running_api(judged_settings(db_url, llm, review_audit_rate=0.0)) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=6)
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        assert await task_ids(client, reviewer) == set()
        assert await session_state(db_url, sid) == "scored"


async def test_the_audit_sample_takes_every_judged_answer_at_rate_one(
    open_world_db: WorldDb, llm: FakeLlm
) -> None:
    """At rate 1 every answer the judge decided is drawn, and counted in its (discipline,
    judge) stratum (shares below 1 are checked with written verdicts below)."""
    db_url, world = open_world_db
    async with running_api(judged_settings(db_url, llm, review_audit_rate=1.0)) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=6)
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        queue = (await client.get(TASKS, headers=reviewer)).json()["tasks"]
    judged = [v for v in await judged_verdicts(db_url, sid) if v[2] in ("judge", "similarity")]
    assert len(judged) == 6
    assert len(queue) == len(judged)
    assert {t["reason"] for t in queue} == {"audit"}
    strata = await audit_counts(db_url)
    assert sum(seen for seen, _ in strata.values()) == len(judged)
    assert all(seen == drawn for seen, drawn in strata.values())


async def judged_verdicts(db_url: str, sid: str) -> list[tuple[int, str, str]]:
    from sqlalchemy import select

    from server.scoring.models import Verdict

    async with database_session(db_url) as db:
        rows = await db.execute(
            select(Verdict.position, Verdict.judge, Verdict.method).where(
                Verdict.session_id == uuid.UUID(sid), Verdict.prompt_version == PROMPT_VERSION
            )
        )
        return [(int(p), str(j), str(m)) for p, j, m in rows.tuples()]


async def audit_counts(db_url: str) -> dict[tuple[str, str], tuple[int, int]]:
    from sqlalchemy import select

    from server.review.models import AuditStratum

    async with database_session(db_url) as db:
        rows = (await db.execute(select(AuditStratum))).scalars()
        return {(r.discipline, r.judge): (r.seen, r.drawn) for r in rows}


@asynccontextmanager
async def unscored_api(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app without a scoring worker: answered sessions stay ``answered`` and tests
    write the verdicts themselves."""
    async with running_api(test_settings(db_url, scoring_in_process=False)) as (_, client):
        yield client


async def answered_session(client: httpx.AsyncClient, db_url: str, world: World, n: int) -> str:
    """A session of org A with ``n`` answers, answered right by its vendor."""
    assert world.a.model_id is not None
    evaluator = await login(client, world.a.keys["evaluator"])
    sid = str((await open_session(client, evaluator, world.a.model_id, n_items=n))["id"])
    vendor = await login(client, world.a.keys["vendor"], sid)
    await answer_items(client, db_url, sid, vendor, lambda item, _: answer_for(item, True))
    return sid


async def test_open_review_tasks_reasons_and_strata(world_db: WorldDb) -> None:
    """Written verdicts: a needs_review answer, a panel's disagreement, a panel's agreement
    and judged answers; at audit rate 0.5 each stratum draws half to within one."""
    db_url, world = world_db
    async with unscored_api(db_url) as client:
        await check_reasons_and_strata(client, db_url, world)


async def check_reasons_and_strata(client: httpx.AsyncClient, db_url: str, world: World) -> None:
    sid = await answered_session(client, db_url, world, 12)
    for position in range(12):
        await clear_verdicts(db_url, sid, position)
    await add_verdict(db_url, sid, 0, judge="j1", score=None, prompt_version=PROMPT_VERSION)
    await add_verdict(db_url, sid, 1, judge="j1", score=0, prompt_version=PROMPT_VERSION)
    await add_verdict(db_url, sid, 1, judge="j2", score=3, prompt_version=PROMPT_VERSION)
    await add_verdict(db_url, sid, 2, judge="j1", score=2, prompt_version=PROMPT_VERSION)
    await add_verdict(db_url, sid, 2, judge="j2", score=3, prompt_version=PROMPT_VERSION)
    await add_verdict(db_url, sid, 2, judge="j3", score=1, prompt_version="old-prompt")
    for position in range(3, 12):
        await add_verdict(db_url, sid, position, judge="j1", score=3, prompt_version=PROMPT_VERSION)
    settings = Settings(_env_file=None, review_audit_rate=0.5, review_dual_rate=0.0)
    async with database_session(db_url) as db:
        opened = await open_review_tasks(
            db,
            session_ids=[uuid.UUID(sid)],
            policy=ReviewPolicy.from_settings(settings),
            now=datetime.now(UTC),
            rng=random.Random(3),
        )
    reviewer = await login(client, await reviewer_key(db_url, world.a.id))
    tasks = (await client.get(TASKS, headers=reviewer)).json()["tasks"]
    assert len(tasks) == opened
    reasons = [t["reason"] for t in tasks]
    assert reasons.count("needs_review") == 1 and reasons.count("disagreement") == 1
    strata = await audit_counts(db_url)
    for seen, drawn in strata.values():
        assert abs(drawn - 0.5 * seen) < 1.0
    # j1 decided positions 2..11, j2 position 2 (their panel agreed within a point)
    seen_by_judge: dict[str, int] = {}
    for (_, judge), (seen, _) in strata.items():
        seen_by_judge[judge] = seen_by_judge.get(judge, 0) + seen
    assert seen_by_judge == {"j1": 10, "j2": 1}
    assert reasons.count("audit") == sum(drawn for _, drawn in strata.values())
    # opening again changes nothing for answers with a task
    async with database_session(db_url) as db:
        await open_review_tasks(
            db,
            session_ids=[uuid.UUID(sid)],
            policy=ReviewPolicy.from_settings(settings),
            now=datetime.now(UTC),
        )
    again = (await client.get(TASKS, headers=reviewer)).json()["tasks"]
    assert {t["task_id"]: t["reason"] for t in tasks}.items() <= {
        t["task_id"]: t["reason"] for t in again
    }.items()


async def clear_verdicts(db_url: str, sid: str, position: int) -> None:
    from sqlalchemy import delete

    from server.scoring.models import Verdict

    async with database_session(db_url) as db:
        await db.execute(
            delete(Verdict).where(
                Verdict.session_id == uuid.UUID(sid), Verdict.position == position
            )
        )


async def test_agreement_report_matches_scikit_learn(world_db: WorldDb) -> None:
    db_url, world = world_db
    async with unscored_api(db_url) as client:
        await check_agreement(client, db_url, world)


async def check_agreement(client: httpx.AsyncClient, db_url: str, world: World) -> None:
    n = 16
    sid = await answered_session(client, db_url, world, n)
    rng = random.Random(5)
    first = [rng.randrange(4) for _ in range(n)]
    second = [s if rng.random() < 0.7 else rng.randrange(4) for s in first]
    judge = [s if rng.random() < 0.6 else rng.randrange(4) for s in first]
    for position in range(n):
        await clear_verdicts(db_url, sid, position)
        await add_verdict(
            db_url, sid, position, judge="human:r1", score=first[position], prompt_version="human"
        )
        if position % 2 == 0:
            await add_verdict(
                db_url,
                sid,
                position,
                judge="human:r2",
                score=second[position],
                prompt_version="human",
            )
        await add_verdict(
            db_url, sid, position, judge="jx", score=judge[position], prompt_version=PROMPT_VERSION
        )
    auditor = await login(client, world.a.keys["auditor"])
    report = (await client.get(f"{REVIEW}/agreement", headers=auditor)).json()
    dual = list(range(0, n, 2))
    reviewers = report["reviewers"]
    assert reviewers["n"] == len(dual)
    a, b = [first[p] for p in dual], [second[p] for p in dual]
    assert reviewers["kappa"]["estimate"] == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3])
    )
    assert reviewers["weighted_kappa"]["estimate"] == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic")
    )
    assert reviewers["exact"] == pytest.approx(
        sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    )
    [row] = report["by_judge"]
    assert (row["judge"], row["n"]) == ("jx", n)
    assert row["kappa"]["estimate"] == pytest.approx(
        cohen_kappa_score(first, judge, labels=[0, 1, 2, 3])
    )
    assert row["weighted_kappa"]["estimate"] == pytest.approx(
        cohen_kappa_score(first, judge, labels=[0, 1, 2, 3], weights="quadratic")
    )
    low, high = row["weighted_kappa"]["low"], row["weighted_kappa"]["high"]
    assert low <= row["weighted_kappa"]["estimate"] <= high
    assert sum(r["n"] for r in report["by_discipline"]) == n
    assert [r["group"] for r in report["by_model_family"]] == ["unknown"]
    # reviewers and vendors may not read it; evaluators neither
    for role in ("vendor", "evaluator"):
        headers = await login(client, world.a.keys[role])
        assert (await client.get(f"{REVIEW}/agreement", headers=headers)).status_code == 403
    reviewer = await login(client, await reviewer_key(db_url, world.a.id))
    assert (await client.get(f"{REVIEW}/agreement", headers=reviewer)).status_code == 403


async def test_hostile_scores_and_notes(world_db: WorldDb) -> None:
    db_url, world = world_db
    async with unscored_api(db_url) as client:
        await check_hostile(client, db_url, world)


async def check_hostile(client: httpx.AsyncClient, db_url: str, world: World) -> None:
    sid = await answered_session(client, db_url, world, 2)
    task = await add_task(db_url, sid, 0)
    admin = await login(client, world.a.keys["admin"])
    url = f"{TASKS}/{task}/score"
    for body in (
        {"score": 4},
        {"score": -1},
        {"score": 1.5},
        {"score": "3"},
        {"score": 2, "note": "x" * 4001},
        {"score": 2, "note": "a\x00b"},
        {"score": 2, "extra": 1},
        {},
    ):
        got = await client.post(url, json=body, headers=admin)
        assert got.status_code == 422, (body, got.text)
    lone_surrogate = b'{"score": 2, "note": "a\\ud800b"}'  # as a JSON escape
    headers = {**admin, "content-type": "application/json"}
    got = await client.post(url, content=lone_surrogate, headers=headers)
    assert got.status_code == 422, got.text
    for bad in ("0", "abc", str(2**63), "-1"):
        assert (await client.get(f"{TASKS}/{bad}", headers=admin)).status_code == 422
    assert (await client.get(f"{TASKS}/999999", headers=admin)).status_code == 404
    assert await human_verdicts(db_url, sid) == []
    ok = await client.post(url, json={"score": 2, "note": "<script>é\U0001f600"}, headers=admin)
    assert ok.status_code == 201, ok.text
    [verdict] = await human_verdicts(db_url, sid)
    assert (verdict.score, verdict.detail) == (2, "<script>é\U0001f600")


async def test_a_panel_s_disagreement_opens_a_task(open_world_db: WorldDb, llm: FakeLlm) -> None:
    """Two judges on every answer: one wants the reference itself (``judge-strict``), one
    accepts an answer that contains and explains it; such answers differ by 3 points and
    go to review as ``disagreement``."""
    db_url, world = open_world_db
    judges = [
        {"name": "lenient", "base_url": llm.base_url, "model": "judge"},
        {"name": "strict", "base_url": llm.base_url, "model": "judge-strict"},
    ]
    settings = judged_settings(
        db_url, llm, judges=judges, judge_panel=["lenient", "strict"], review_audit_rate=0.0
    )
    async with running_api(settings) as (_, client):
        assert world.a.model_id is not None
        evaluator = await login(client, world.a.keys["evaluator"])
        sid = str((await open_session(client, evaluator, world.a.model_id, n_items=3))["id"])
        vendor = await login(client, world.a.keys["vendor"], sid)
        await answer_items(
            client, db_url, sid, vendor, lambda item, _: f"{item.answer}, as it follows directly."
        )

        async def scored() -> bool:
            return await session_state(db_url, sid) == "scored"

        await wait_until(scored, within_s=60, what="the session scored")
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        tasks = (await client.get(TASKS, headers=reviewer)).json()["tasks"]
        assert [t["reason"] for t in tasks] == ["disagreement"] * 3
        shown = (await client.get(f"{TASKS}/{tasks[0]['task_id']}", headers=reviewer)).json()
        assert {j["judge"]: j["score"] for j in shown["judges"]} == {"lenient": 3, "strict": 0}


REVIEWER_ROUTES = frozenset(
    {
        ("GET", "/v1/whoami"),
        ("POST", "/v1/auth/refresh"),
        ("GET", "/v1/review/tasks"),
        ("GET", "/v1/review/tasks/{task_id}"),
        ("POST", "/v1/review/tasks/{task_id}/score"),
        ("POST", "/v1/review/tasks/{task_id}/skip"),
    }
)
"""What an outside reviewer's key may call besides the public routes: nothing else."""


async def test_a_reviewer_reaches_the_review_queue_and_nothing_else(
    api: tuple[httpx.AsyncClient, World, Any], world_db: WorldDb
) -> None:
    """The reviewer's column of the route matrix (``tests/system/test_route_matrix.py``,
    whose roles are those of ``seed_world``)."""
    from tests.system import test_route_matrix as matrix

    client, world, app = api
    db_url, _ = world_db
    key = await reviewer_key(db_url, world.a.id)
    headers = {role: await login(client, world.a.keys[role]) for role in ("admin", "evaluator")}
    headers["reviewer"] = await login(client, key)
    assert world.a.model_id is not None
    shared = str((await open_session(client, headers["evaluator"], world.a.model_id, 3))["id"])
    state = matrix.Matrix(client, world, headers, shared, [], app)
    wrong = []
    for method, path in sorted(matrix.INTENDED):
        allowed = matrix.INTENDED[(method, path)]
        if allowed in (matrix.PUBLIC, matrix.SCRAPE):  # no role reaches the scrape either
            continue
        call = await matrix.PREPARE[(method, path)](state, None)
        if path == "/v1/auth/refresh":  # a refresh uses its token up: a fresh one
            sent = await login(client, key)
        else:
            sent = headers["reviewer"]
        response = await client.request(method, call.url, json=call.json, headers=sent)
        may = (method, path) in REVIEWER_ROUTES
        if may != (200 <= response.status_code < 300) or (not may and response.status_code != 403):
            wrong.append(f"{method} {path}: {response.status_code} {response.text[:120]}")
        await state.close_opened()
    assert wrong == []


async def mark_scored(db_url: str, sid: str) -> None:
    from sqlalchemy import update

    from server.sessions.models import EvalSession

    async with database_session(db_url) as db:
        await db.execute(
            update(EvalSession).where(EvalSession.id == uuid.UUID(sid)).values(state="scored")
        )


async def test_two_reviewers_closing_the_last_two_tasks_at_once(world_db: WorldDb) -> None:
    """The session row lock serialises the check for open tasks: whichever score commits
    second sees the other's task done and moves the session to ``reviewed``."""
    db_url, world = world_db
    async with unscored_api(db_url) as client:
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        admin = await login(client, world.a.keys["admin"])
        for _ in range(4):
            sid = await answered_session(client, db_url, world, 2)
            await mark_scored(db_url, sid)
            tasks = [await add_task(db_url, sid, position) for position in (0, 1)]
            results = await asyncio.gather(
                *(
                    client.post(f"{TASKS}/{task}/score", json={"score": 1}, headers=headers)
                    for task, headers in zip(tasks, (reviewer, admin), strict=True)
                )
            )
            assert [r.status_code for r in results] == [201, 201], [r.text for r in results]
            assert await session_state(db_url, sid) == "reviewed"
