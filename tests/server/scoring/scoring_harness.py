"""Driving sessions to completion and reading the scoring tables, for scoring tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import func, select

from bank.models import Item
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.scoring.models import ScoringJob, Verdict
from server.sessions.models import Answer, EvalSession
from tests.support.api import World, login, open_session, test_settings
from tests.support.fake_llm import FakeLlm

WRONG_LETTER = {"A": "B", "B": "C", "C": "D", "D": "A"}
WRONG_TRUE_FALSE = {"True": "False", "False": "True", "正确": "错误", "错误": "正确"}


def answer_for(item: Item, correct: bool) -> str:
    """A plausible model answer to ``item``: right or wrong on purpose."""
    if item.qtype == "multiple_choice":
        letter = item.answer if correct else WRONG_LETTER[item.answer]
        return f"The answer is ({letter}) because the sum works out."
    if item.qtype == "true_false":
        return f"{item.answer if correct else WRONG_TRUE_FALSE[item.answer]}. It follows directly."
    if item.qtype == "fill_in":
        return item.answer if correct else "98765"
    return item.answer if correct else "I do not know anything about that."


@dataclass
class DrivenSession:
    id: uuid.UUID
    expected: dict[int, int]
    """Position -> the score a correct scorer gives (3 right, 0 wrong)."""
    qtypes: dict[int, str]


async def drive_session(
    client: httpx.AsyncClient,
    db_url: str,
    world: World,
    *,
    n_items: int,
    correct: Any = lambda position: position % 2 == 0,
    think: bool = False,
) -> DrivenSession:
    """Open a session for organisation A and answer every item through the API."""
    assert world.a.model_id is not None
    admin = await login(client, world.a.keys["evaluator"])
    session = await open_session(client, admin, world.a.model_id, n_items=n_items)
    sid = uuid.UUID(session["id"])
    headers = await login(client, world.a.keys["vendor"], sid)
    engine = create_engine(db_url)
    expected: dict[int, int] = {}
    qtypes: dict[int, str] = {}
    try:
        while True:
            response = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
            if response.status_code == 204:
                break
            assert response.status_code == 200, response.text
            delivered = response.json()
            async with unit_of_work(engine) as db:
                item = await db.get(Item, uuid.UUID(delivered["item_id"]))
            assert item is not None
            right = bool(correct(delivered["position"]))
            text = answer_for(item, right)
            if think:
                text = f"<think>Working it out: {item.answer}?</think>{text}"
            answered = await client.post(
                f"/v1/sessions/{sid}/answers",
                json={"position": delivered["position"], "item_id": str(item.id), "answer": text},
                headers=headers,
            )
            assert answered.status_code == 201, answered.text
            expected[delivered["position"]] = 3 if right else 0
            qtypes[delivered["position"]] = item.qtype
    finally:
        await engine.dispose()
    return DrivenSession(sid, expected, qtypes)


async def load_item(db_url: str, item_id: str | uuid.UUID) -> Item:
    """The bank item ``item_id`` (with its answer: tests only)."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            item = await db.get(Item, uuid.UUID(str(item_id)))
    finally:
        await engine.dispose()
    assert item is not None, f"no item {item_id}"
    return item


async def verdicts(db_url: str, session_id: uuid.UUID) -> list[Verdict]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(select(Verdict).where(Verdict.session_id == session_id))
            return list(rows.scalars())
    finally:
        await engine.dispose()


async def table_counts(db_url: str, session_id: uuid.UUID) -> dict[str, Any]:
    """Answers, jobs by state, verdicts and distinct verdict keys, and the session state."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            answers = await db.scalar(
                select(func.count()).select_from(Answer).where(Answer.session_id == session_id)
            )
            rows = await db.execute(
                select(ScoringJob.state, func.count())
                .where(ScoringJob.session_id == session_id)
                .group_by(ScoringJob.state)
            )
            jobs = {state: count for state, count in rows.tuples()}
            n_verdicts = await db.scalar(
                select(func.count()).select_from(Verdict).where(Verdict.session_id == session_id)
            )
            keys = (
                await db.execute(
                    select(Verdict.position, Verdict.judge, Verdict.prompt_version)
                    .where(Verdict.session_id == session_id)
                    .distinct()
                )
            ).all()
            state = (await db.get(EvalSession, session_id)).state  # type: ignore[union-attr]
        return {
            "answers": answers,
            "jobs": jobs,
            "verdicts": n_verdicts,
            "distinct_verdicts": len(keys),
            "state": state,
        }
    finally:
        await engine.dispose()


async def wait_until(predicate: Any, *, within_s: float = 30.0, what: str = "condition") -> Any:
    """Poll the async ``predicate`` until it returns something truthy."""
    deadline = time.monotonic() + within_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)


JUDGE_NAME = "judge-v1"


def judged_settings(db_url: str, llm: FakeLlm, **extra: Any) -> Settings:
    """Settings for an in-process API whose worker scores open answers with the local
    judge server (``judge`` profile of ``llm``) and polls often."""
    fields: dict[str, Any] = {
        "judges": [{"name": JUDGE_NAME, "base_url": llm.base_url, "model": "judge"}],
        "scoring_in_process": True,
        "scoring_poll_s": 0.5,
        **extra,
    }
    return test_settings(db_url, **fields)
