"""``GET /v1/leaderboard`` from a cache on real PostgreSQL: invalidated by new verdicts,
anchor changes and review results written by anyone (another engine stands for another
worker), never stale; the database's change counter; and the aggregated reading of the
fixed sessions giving the same board as the row-by-row one."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, update

from bank.models import Item
from judge.prompts import PROMPT_VERSION
from server.database import create_engine, read_only_snapshot, unit_of_work
from server.leaderboard import aggregates, cache, inputs, service
from server.leaderboard.models import RankingAnchor
from server.review.models import ReviewTask
from server.review.raters import HUMAN_PROMPT_VERSION, human_rater
from server.scoring.assignment import JudgeAssignment
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from tests.support.api import JWT_SECRET, World, login, running_api, test_settings
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.scored import JUDGE, add_model, scored_session, seed_scores
from tests.support.services import RedisServer
from tests.support.serving import serving

pytestmark = pytest.mark.parametrize("backend", ["postgres"])


@dataclasses.dataclass
class Board:
    client: httpx.AsyncClient
    world: World
    db_url: str
    sessions: tuple[uuid.UUID, ...]


def settings_for(db_url: str, redis_url: str) -> Any:
    return test_settings(
        db_url,
        redis_url,
        judges=[{"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}],
        scoring_in_process=False,
        judge_drift_interval_s=0,
        leaderboard_resamples=200,
    )


@pytest.fixture
async def board(world_db: tuple[str, World], redis_server: RedisServer) -> AsyncIterator[Board]:
    db_url, world = world_db
    await seed_scores(db_url, world)
    engine = create_engine(db_url)
    async with unit_of_work(engine) as db:
        sessions = tuple((await db.execute(select(EvalSession.id))).scalars())
    await engine.dispose()
    async with running_api(settings_for(db_url, redis_server.url)) as (_, client):
        yield Board(client, world, db_url, sessions)


async def get_board(client: httpx.AsyncClient, key: str) -> dict[str, Any]:
    response = await client.get("/v1/leaderboard", headers=await login(client, key))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def means(body: dict[str, Any]) -> dict[str, float]:
    return {row["model_id"]: row["absolute"]["mean"] for row in body["models"]}


async def write(db_url: str, *rows: Any) -> None:
    """Rows added through an engine of its own: another worker's write."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            for row in rows:
                db.add(row)
                await db.flush()
    finally:
        await engine.dispose()


async def test_a_warm_board_is_not_computed_again(
    board: Board, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_builds(monkeypatch)
    first = await get_board(board.client, board.world.a.keys["admin"])
    again = await get_board(board.client, board.world.a.keys["admin"])
    assert first == again
    assert calls == [1]


async def test_concurrent_requests_after_a_change_share_one_build(
    board: Board, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = board.world.a.keys["admin"]
    await get_board(board.client, key)
    calls = count_builds(monkeypatch)
    late = await add_model(board.db_url, board.world.a.id, "late-model")
    bodies = await asyncio.gather(*(get_board(board.client, key) for _ in range(4)))
    assert all(str(late) not in means(b) for b in bodies)  # registered, no session yet
    assert calls == [1]


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = cache.configured_leaderboard

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(cache, "configured_leaderboard", counted)
    return calls


async def test_a_new_verdict_from_another_worker_shows_at_once(board: Board) -> None:
    key = board.world.a.keys["admin"]
    before = await get_board(board.client, key)
    late = await add_model(board.db_url, board.world.a.id, "late-model")
    await scored_session(
        board.db_url,
        org_id=board.world.a.id,
        model_id=late,
        scores=[3] * 12,
        created_at=datetime(2026, 11, 5, tzinfo=UTC),
        offset=48,
    )
    after = await get_board(board.client, key)
    assert str(late) not in means(before)
    assert after["models"][0]["model_id"] == str(late)
    assert not after.get("stale")


async def test_a_single_verdict_changes_the_board(board: Board) -> None:
    """One more answer of a session, scored 0: its model's mean drops on the next read."""
    key = board.world.a.keys["admin"]
    model = str(board.world.a.model_id)
    before = means(await get_board(board.client, key))[model]
    engine = create_engine(board.db_url)
    async with unit_of_work(engine) as db:
        session_id, created = (
            await db.execute(
                select(EvalSession.id, EvalSession.created_at)
                .where(EvalSession.model_id == board.world.a.model_id)
                .order_by(EvalSession.created_at)
                .limit(1)
            )
        ).one()
        used = select(Answer.item_id).where(Answer.session_id == session_id)
        item = (await db.execute(select(Item.id).where(Item.id.not_in(used)).limit(1))).scalar()
    await engine.dispose()
    await write(
        board.db_url,
        Answer(
            session_id=session_id,
            position=12,
            item_id=item,
            answer="x",
            submitted_by="test",
            delivered_at=created,
            submitted_at=created + timedelta(seconds=2),
        ),
        Verdict(
            session_id=session_id,
            position=12,
            judge=JUDGE,
            prompt_version=PROMPT_VERSION,
            score=0,
            method="judge",
        ),
    )
    after = means(await get_board(board.client, key))[model]
    assert after < before


async def test_an_anchor_change_shows_at_once(board: Board) -> None:
    key = board.world.a.keys["admin"]
    before = await get_board(board.client, key)
    weak = str(board.world.b.model_id)
    assert before["anchor"]["model_id"] != weak
    await write(board.db_url, RankingAnchor(model_id=board.world.b.model_id, set_by="test"))
    after = await get_board(board.client, key)
    assert after["anchor"]["model_id"] == weak
    row = next(r for r in after["models"] if r["model_id"] == weak)
    assert row["relative"]["mean"] == pytest.approx(100.0)


async def test_a_board_computed_on_older_data_never_replaces_a_newer_one(board: Board) -> None:
    """A build that read the data before a change (a console refresh in its thread) and
    finishes after a board computed on the change must not put the older board back: the
    page after an anchor designation is served fresh, with the anchor (the console's flaky
    anchor test of CI stop 44)."""
    settings = settings_for(board.db_url, "redis://127.0.0.1:9")
    judges = JudgeAssignment.single(JUDGE)
    weak = board.world.b.model_id
    engine = create_engine(board.db_url)

    async def cached(db: Any, *, wait: bool = False) -> service.LeaderboardData:
        return await cache.cached_leaderboard(
            db,
            settings=settings,
            judges=judges,
            diagnostics=True,
            refresh_on=None if wait else engine,
        )

    try:
        async with read_only_snapshot(engine) as late:  # reads the data before the anchor
            await cache.data_version(late)
            await write(board.db_url, RankingAnchor(model_id=weak, set_by="test"))
            async with unit_of_work(engine) as db:
                assert (await cached(db, wait=True)).board.anchor == str(weak)
            older = await cached(late, wait=True)
            assert older.board.anchor != str(weak)  # its own snapshot's board
        async with unit_of_work(engine) as db:
            after = await cached(db)
    finally:
        await engine.dispose()
    assert not after.stale
    assert after.board.anchor == str(weak)


async def test_a_review_result_shows_at_once(board: Board) -> None:
    """A reviewer's score outranks the judge's: the answer's score changes, and with it
    its model's mean, on the next read."""
    key = board.world.a.keys["admin"]
    model = str(board.world.a.model_id)
    before = means(await get_board(board.client, key))[model]
    engine = create_engine(board.db_url)
    async with unit_of_work(engine) as db:
        session_id, position = (
            await db.execute(
                select(Verdict.session_id, Verdict.position)
                .join(EvalSession, EvalSession.id == Verdict.session_id)
                .where(EvalSession.model_id == board.world.a.model_id, Verdict.score == 3)
                .limit(1)
            )
        ).one()
    await engine.dispose()
    await write(
        board.db_url,
        Verdict(
            session_id=session_id,
            position=position,
            judge=human_rater("reviewer-1"),
            prompt_version=HUMAN_PROMPT_VERSION,
            score=0,
            method="human",
        ),
    )
    after = means(await get_board(board.client, key))[model]
    assert after < before


async def test_the_change_counter_moves_with_the_boards_inputs_only(board: Board) -> None:
    engine = create_engine(board.db_url)

    async def version() -> Any:
        async with unit_of_work(engine) as db:
            return await cache.data_version(db)

    async def changed(statement: Any) -> bool:
        before = await version()
        async with unit_of_work(engine) as db:
            await db.execute(statement)
        return bool(await version() != before)

    session = board.sessions[0]
    this_session = update(EvalSession).where(EvalSession.id == session)
    try:
        assert await changed(this_session.values(n_delivered=99)) is False
        assert await changed(update(Item).values(status="active")) is False
        assert await changed(this_session.values(state="reviewed"))
        assert await changed(update(Verdict).where(Verdict.session_id == session).values(score=1))
        assert await changed(
            insert(ReviewTask).values(
                session_id=session,
                position=0,
                reason="audit",
                judge=JUDGE,
                discipline="d0",
                required=1,
                state="open",
                created_at=datetime.now(UTC),
            )
        )
        assert await changed(update(ReviewTask).values(state="done"))
        # a session off the board moving between states the board does not read: no change
        assert await changed(this_session.values(state="active"))  # leaves the board
        assert await changed(this_session.values(state="answered")) is False
        assert await changed(this_session.values(state="scored"))  # back on it
    finally:
        await engine.dispose()


async def test_aggregated_fixed_scores_give_the_row_by_row_board(
    board: Board, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With reviewers' scores (one answer reviewed 1 and 2: rounded half to even to 2; one
    reviewed 2 and 3: to 2), an answer left for review and one reviewed after that, the
    aggregated reading gives the same board: scores, intervals, groups, rank ranges,
    relative scores, usage; discipline standard errors to 1e-12 (summed in another order)."""
    engine = create_engine(board.db_url)
    async with unit_of_work(engine) as db:
        answers = (
            await db.execute(
                select(Verdict.session_id, Verdict.position)
                .where(Verdict.judge == JUDGE)
                .order_by(Verdict.session_id, Verdict.position)
                .limit(4)
            )
        ).all()
        for (session_id, position), scores in zip(answers[:2], ([1, 2], [2, 3]), strict=True):
            for n, score in enumerate(scores):
                db.add(
                    Verdict(
                        session_id=session_id,
                        position=position,
                        judge=human_rater(f"reviewer-{n}"),
                        prompt_version=HUMAN_PROMPT_VERSION,
                        score=score,
                        method="human",
                    )
                )
        for session_id, position in answers[2:]:
            await db.execute(
                update(Verdict)
                .where(Verdict.session_id == session_id, Verdict.position == position)
                .values(score=None, needs_review=True)
            )
        db.add(
            Verdict(
                session_id=answers[3][0],
                position=answers[3][1],
                judge=human_rater("reviewer-0"),
                prompt_version=HUMAN_PROMPT_VERSION,
                score=1,
                method="human",
            )
        )
    judges = JudgeAssignment.single(JUDGE)
    used: list[bool] = []
    real = aggregates.aggregate_fixed_scores

    async def spied(*args: Any, **kwargs: Any) -> Any:
        used.append(True)
        return await real(*args, **kwargs)

    async def board_with(aggregated: bool) -> service.LeaderboardData:
        monkeypatch.setattr(inputs, "aggregate_fixed_scores", spied)
        if not aggregated:
            monkeypatch.setattr(inputs, "can_aggregate", lambda *a, **k: False)
        async with unit_of_work(engine) as db:
            return await service.leaderboard(
                db,
                judges=judges,
                prompt_version=PROMPT_VERSION,
                n_resamples=500,
                threshold=0.95,
                gap_threshold=5.0,
                diagnostics=True,
            )

    try:
        fast = await board_with(True)
        assert used == [True]
        slow = await board_with(False)
        assert used == [True]
    finally:
        await engine.dispose()
    assert fast.board.groups == slow.board.groups
    assert fast.board.anchor == slow.board.anchor
    for a, b in zip(fast.board.rows, slow.board.rows, strict=True):
        assert (a.key, a.position, a.group) == (b.key, b.position, b.group)
        assert a.rank_range == b.rank_range
        assert a.absolute == b.absolute
        assert a.relative == b.relative
        assert a.beats_next == b.beats_next
        assert a.usage == b.usage
        assert a.disciplines.keys() == b.disciplines.keys()
        for name, mine in a.disciplines.items():
            theirs = b.disciplines[name]
            assert (mine.score, mine.n_items) == (theirs.score, theirs.n_items)
            assert mine.standard_error == pytest.approx(theirs.standard_error, rel=1e-12)
    assert fast.models == slow.models
    assert fast.contamination == slow.contamination


async def test_two_server_workers_never_serve_a_board_older_than_a_write(
    world_db: tuple[str, World], tmp_path: Path
) -> None:
    """``proctor serve --workers 2``: each worker caches the board; a session scored by
    another process shows in every answer after it, whichever worker takes the request
    (each request on a new connection)."""
    db_url, world = world_db
    await seed_scores(db_url, world)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_JUDGES=json.dumps(
            [{"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "j"}]
        ),
        PROCTOR_SCORING_IN_PROCESS="false",
        PROCTOR_JUDGE_DRIFT_INTERVAL_S="0",
        PROCTOR_LEADERBOARD_RESAMPLES="200",
        PROCTOR_RATE_LIMIT_PER_MINUTE="100000",
    )
    log = tmp_path / "serve.log"
    with serving(env, log, "--workers", "2") as (url, proc):
        token = await started(url, proc, world.a.keys["admin"], log)
        headers = {"Authorization": f"Bearer {token}"}
        before = [await fresh_get(url, headers) for _ in range(8)]
        late = await add_model(db_url, world.a.id, "late-model")
        await scored_session(
            db_url,
            org_id=world.a.id,
            model_id=late,
            scores=[3] * 12,
            created_at=datetime(2026, 11, 5, tzinfo=UTC),
            offset=48,
        )
        after = [await fresh_get(url, headers) for _ in range(8)]
    assert all(str(late) not in means(body) for body in before)
    assert all(body["models"][0]["model_id"] == str(late) for body in after)


def tail(log: Path) -> str:
    return log.read_text()[-3000:]


async def started(url: str, proc: subprocess.Popen[bytes], key: str, log: Path) -> str:
    """Wait for the server; an admin token."""
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"proctor serve exited: {tail(log)}")
        try:
            async with httpx.AsyncClient(base_url=url, timeout=5) as client:
                response = await client.post("/v1/auth/token", json={"api_key": key})
                token: str = response.json()["access_token"]
                return token
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"proctor serve did not start: {tail(log)}")


async def fresh_get(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /v1/leaderboard`` on a new connection, so that either worker may take it."""
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        response = await client.get("/v1/leaderboard", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
