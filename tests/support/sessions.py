"""The session driver (open a session, take every item, answer it through the API) and the
scoring tables read back, for tests that need answered or scored sessions."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
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
from tests.support.database import database_session
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


@dataclass(frozen=True)
class Answered:
    """One item as the session delivered it, the bank item behind it, and the answer sent."""

    shown: dict[str, Any]
    """The body of ``GET /next``."""
    item: Item
    answer: str

    @property
    def position(self) -> int:
        return int(self.shown["position"])


async def answer_items(
    client: httpx.AsyncClient,
    db_url: str,
    session_id: uuid.UUID | str,
    headers: dict[str, str],
    answer: Callable[[Item, int], str],
    *,
    usage: dict[str, int] | None = None,
    reports: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[Answered]:
    """Take items with ``GET /next`` and answer each with ``answer(item, position)`` (with
    ``usage`` and the ``reports`` fields, e.g. ``model_latency_s``, when given) until the
    session has none left (204) or ``limit`` are answered.

    Every ``next`` must give 200 or 204 and every answer 201; the bank item is read from
    ``db_url`` so that ``answer`` can be right or wrong on purpose.
    """
    answered: list[Answered] = []
    engine = create_engine(db_url)
    try:
        while limit is None or len(answered) < limit:
            got = await client.get(f"/v1/sessions/{session_id}/next", headers=headers)
            if got.status_code == 204:
                break
            assert got.status_code == 200, got.text
            shown = got.json()
            async with unit_of_work(engine) as db:
                item = await db.get(Item, uuid.UUID(shown["item_id"]))
            assert item is not None
            text = answer(item, shown["position"])
            body: dict[str, Any] = {
                "position": shown["position"],
                "item_id": str(item.id),
                "answer": text,
            }
            if usage is not None:
                body["usage"] = usage
            body.update(reports or {})
            posted = await client.post(
                f"/v1/sessions/{session_id}/answers", json=body, headers=headers
            )
            assert posted.status_code == 201, posted.text
            answered.append(Answered(shown, item, text))
    finally:
        await engine.dispose()
    return answered


async def wait_until_scored(db_url: str, session_id: uuid.UUID, *, within_s: float) -> None:
    """Wait until the session's state is ``scored`` (fails after ``within_s`` seconds)."""

    async def scored() -> bool:
        return bool((await table_counts(db_url, session_id))["state"] == "scored")

    await wait_until(scored, within_s=within_s, what=f"session {session_id} scored")


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
    correct: Callable[[int], bool] = lambda position: position % 2 == 0,
    think: bool = False,
) -> DrivenSession:
    """Open a session for organisation A and answer every item through the API as its
    vendor: right where ``correct(position)``, with a ``<think>`` block when ``think``."""
    assert world.a.model_id is not None
    admin = await login(client, world.a.keys["evaluator"])
    session = await open_session(client, admin, world.a.model_id, n_items=n_items)
    sid = uuid.UUID(session["id"])
    headers = await login(client, world.a.keys["vendor"], sid)

    def text(item: Item, position: int) -> str:
        reply = answer_for(item, bool(correct(position)))
        return f"<think>Working it out: {item.answer}?</think>{reply}" if think else reply

    answered = await answer_items(client, db_url, sid, headers, text)
    expected = {a.position: 3 if correct(a.position) else 0 for a in answered}
    return DrivenSession(sid, expected, {a.position: a.item.qtype for a in answered})


async def load_item(db_url: str, item_id: str | uuid.UUID) -> Item:
    """The bank item ``item_id`` (with its answer: tests only)."""
    async with database_session(db_url) as db:
        item = await db.get(Item, uuid.UUID(str(item_id)))
    assert item is not None, f"no item {item_id}"
    return item


async def verdicts(db_url: str, session_id: uuid.UUID) -> list[Verdict]:
    async with database_session(db_url) as db:
        rows = await db.execute(select(Verdict).where(Verdict.session_id == session_id))
        return list(rows.scalars())


async def table_counts(db_url: str, session_id: uuid.UUID) -> dict[str, Any]:
    """Answers, jobs by state, verdicts and distinct verdict keys, and the session state."""
    async with database_session(db_url) as db:
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


POLL_FIRST_S = 0.005
POLL_MAX_S = 0.1


async def wait_until(predicate: Any, *, within_s: float = 30.0, what: str = "condition") -> Any:
    """Poll the async ``predicate`` until it returns something truthy.

    The pause between polls starts at 5 ms and doubles up to 100 ms: a condition that holds
    almost at once (an answer scored by the in-process worker) is seen at once, and a long
    wait costs five polls more than a fixed 100 ms pause would."""
    deadline = time.monotonic() + within_s
    pause = POLL_FIRST_S
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s:.0f}s waiting for {what}")
        await asyncio.sleep(pause)
        pause = min(2 * pause, POLL_MAX_S)


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
