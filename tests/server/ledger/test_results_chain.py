"""The results ledger (``server.ledger.results``) on SQLite and PostgreSQL.

Verdicts written through the real paths (the in-process scoring worker with the local
judge server, a reviewer's score through ``/v1/review``, re-judging that withdraws
verdicts) get chained entries that verify against signed checkpoints; a verdict changed,
deleted or slipped in by the database owner is found by ``check_verdicts`` with its id;
with the ledger's append-only triggers out of the way, an entry edited, deleted or
inserted is found by the chain walk at the right row; two worker processes scoring at once
write two chains that both verify.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select, text

from judge.prompts import PROMPT_VERSION
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.ledger import verify
from server.ledger.chain import link
from server.ledger.models import ChainCheckpoint, ResultEntry
from server.ledger.results import (
    RESULTS_SPEC,
    WITHDRAWN,
    CheckpointSigner,
    VerdictProblem,
    VerdictReport,
    check_verdicts,
    describe,
    fields,
    record,
)
from server.ledger.signing import PublicKey, new_private_text, parse_private
from server.scoring import service
from server.scoring.models import Verdict
from server.scoring.worker import ScoringWorker
from tests.support.api import (
    JWT_SECRET,
    World,
    login,
    open_session,
    running_api,
    seed_world,
    test_settings,
)
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.cli import proctor
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm
from tests.support.review import TASKS, reviewer_key, session_state
from tests.support.sessions import JUDGE_NAME, answer_for, answer_items, wait_until

WorldDb = tuple[str, World]
REPO = Path(__file__).resolve().parents[3]
SIGNING_KEY = new_private_text()
KEYS: dict[str, PublicKey] = {
    (public := parse_private(SIGNING_KEY, source="test").public).key_id: public
}


@pytest.fixture
async def review_world_db(fresh_db_url: str) -> WorldDb:
    """A fresh database whose bank holds short-answer items only: every answer goes to the
    judge (so a judge that never rates leaves every answer for a reviewer)."""
    return fresh_db_url, await seed_world(fresh_db_url, qtypes=("short_answer",), per_cell=3)


def ledger_settings(db_url: str, llm: FakeLlm, *, model: str = "judge", **extra: Any) -> Settings:
    """In-process scoring by the local judge server, signing checkpoints every 4 rows."""
    values: dict[str, Any] = {
        "judges": [{"name": JUDGE_NAME, "base_url": llm.base_url, "model": model}],
        "scoring_in_process": True,
        "scoring_poll_s": 0.5,
        "review_audit_rate": 0.0,
        "audit_signing_key": SIGNING_KEY,
        "audit_checkpoint_rows": 4,
    }
    values.update(extra)
    return test_settings(db_url, **values)


async def scored_session(client: Any, db_url: str, world: World, n_items: int) -> str:
    """A session of org A answered by its vendor (right) and scored by the worker."""
    assert world.a.model_id is not None
    evaluator = await login(client, world.a.keys["evaluator"])
    sid = str((await open_session(client, evaluator, world.a.model_id, n_items=n_items))["id"])
    vendor = await login(client, world.a.keys["vendor"], sid)
    await answer_items(client, db_url, sid, vendor, lambda item, _: answer_for(item, True))

    async def scored() -> bool:
        return await session_state(db_url, sid) in ("scored", "reviewed")

    await wait_until(scored, within_s=60, what="the session scored")
    return sid


async def verified(db_url: str) -> verify.LogReport:
    async with database_session(db_url) as db:
        return await verify.verify_log(db, RESULTS_SPEC, KEYS)


async def checked(db_url: str) -> VerdictReport:
    async with database_session(db_url) as db:
        return await check_verdicts(db)


async def entries(db_url: str) -> list[ResultEntry]:
    async with database_session(db_url) as db:
        return list((await db.scalars(select(ResultEntry).order_by(ResultEntry.id))).all())


async def execute(db_url: str, sql: str, **params: Any) -> None:
    """Raw SQL as the database owner (the tests' connection owns every table)."""
    async with database_session(db_url) as db:
        await db.execute(text(sql), params)


async def unprotect_ledger(db_url: str) -> None:
    """Take the append-only triggers off ``result_ledger`` (what a database owner can do)."""
    async with database_session(db_url) as db:
        if db.bind.dialect.name == "postgresql":
            await db.execute(text("ALTER TABLE result_ledger DISABLE TRIGGER USER"))
        else:
            await db.execute(text("DROP TRIGGER result_ledger_no_update"))
            await db.execute(text("DROP TRIGGER result_ledger_no_delete"))


def assert_chains_verify(report: verify.LogReport) -> None:
    assert report.chains, "the ledger should have a chain"
    assert report.ok, report.failures
    assert all(chain.n_checkpoints >= 1 for chain in report.chains)


# --------------------------------------------------------------------------- writing


async def test_scores_of_judges_and_reviewers_are_chained_and_verify(
    review_world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = review_world_db
    settings = ledger_settings(db_url, llm, model="judge-garbled")
    async with running_api(settings) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=6)
        reviewer = await login(client, await reviewer_key(db_url, world.a.id))
        tasks = (await client.get(TASKS, headers=reviewer)).json()["tasks"]
        assert len(tasks) == 6
        for task in tasks[:2]:
            given = await client.post(
                f"{TASKS}/{task['task_id']}/score",
                json={"score": 2, "note": "ok"},
                headers=reviewer,
            )
            assert given.status_code == 201, given.text

    async with database_session(db_url) as db:
        verdicts = list((await db.scalars(select(Verdict).order_by(Verdict.id))).all())
    written = await entries(db_url)
    assert len(verdicts) == 8 and len(written) == 8
    by_verdict = {entry.verdict_id: entry for entry in written}
    for verdict in verdicts:
        entry = by_verdict[verdict.id]
        assert (entry.session_id, entry.position, entry.judge) == (
            verdict.session_id,
            verdict.position,
            verdict.judge,
        )
        assert (entry.score, entry.method, entry.needs_review) == (
            verdict.score,
            verdict.method,
            verdict.needs_review,
        )
    humans = [entry for entry in written if entry.judge.startswith("human:")]
    assert [(h.score, h.prompt_version, h.method) for h in humans] == [(2, "human", "human")] * 2
    assert {str(e.session_id) for e in written} == {sid}
    judged = [entry for entry in written if entry.method == "judge"]
    assert judged and all(e.needs_review and e.score is None for e in judged)

    report = await verified(db_url)
    assert_chains_verify(report)
    assert sum(chain.n_rows for chain in report.chains) == 8
    async with database_session(db_url) as db:
        checkpoints = (await db.scalars(select(ChainCheckpoint))).all()
    assert {c.log for c in checkpoints} >= {"results"}
    found = await checked(db_url)
    assert found.ok and found.findings == []
    assert (found.verdicts, found.matching, found.before_chaining) == (8, 8, 0)


async def test_rejudging_withdraws_verdicts_in_the_ledger(
    review_world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = review_world_db
    async with running_api(ledger_settings(db_url, llm, model="judge-garbled")) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=4)
    settings = ledger_settings(db_url, llm)
    async with database_session(db_url) as db:
        queued = await service.enqueue_session(
            db,
            session_id=uuid.UUID(sid),
            judge=JUDGE_NAME,
            prompt_version=PROMPT_VERSION,
            review_again=True,
            now=datetime.now(UTC),
        )
    assert queued == 4
    engine = create_engine(db_url)
    worker = ScoringWorker(engine=engine, settings=settings)
    assert (await worker.drain()).recorded == 4
    await worker.aclose()
    await engine.dispose()
    written = await entries(db_url)
    assert [e.method for e in written].count(WITHDRAWN) == 4
    assert len(written) == 12
    rescored = [e for e in written if e.method == "judge" and not e.needs_review]
    assert len(rescored) == 4 and all(e.score == 3 for e in rescored)
    assert_chains_verify(await verified(db_url))
    found = await checked(db_url)
    assert found.ok, [describe(f) for f in found.findings]
    assert (found.verdicts, found.matching, found.deleted) == (4, 4, 0)
    # PostgreSQL gives the new verdicts new ids; SQLite hands the withdrawn ids out again
    assert found.withdrawn == len(
        {e.verdict_id for e in written} - {e.verdict_id for e in rescored}
    )


# --------------------------------------------------------------------------- tampering


async def test_a_verdict_changed_deleted_or_slipped_in_is_found(
    world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = world_db
    async with running_api(ledger_settings(db_url, llm)) as (_, client):
        await scored_session(client, db_url, world, n_items=6)
    async with database_session(db_url) as db:
        verdicts = list((await db.scalars(select(Verdict).order_by(Verdict.id))).all())
    assert len(verdicts) == 6 and all(v.score == 3 for v in verdicts)
    assert (await checked(db_url)).ok

    changed, deleted, copied = verdicts[1], verdicts[3], verdicts[4]
    await execute(db_url, "UPDATE verdicts SET score = 0 WHERE id = :id", id=changed.id)
    await execute(db_url, "DELETE FROM verdicts WHERE id = :id", id=deleted.id)
    await execute(
        db_url,
        "INSERT INTO verdicts (session_id, position, judge, prompt_version, score, method, "
        "needs_review, calls, prompt_tokens, completion_tokens, cost, latency_ms, created_at) "
        "SELECT session_id, position, 'judge-forged', prompt_version, 3, method, needs_review, "
        "0, 0, 0, 0, 0, :now FROM verdicts WHERE id = :id",
        id=copied.id,
        now=datetime.now(UTC).replace(tzinfo=None) if "sqlite" in db_url else datetime.now(UTC),
    )
    report = await checked(db_url)
    assert not report.ok
    assert (report.changed, report.deleted, report.unrecorded) == (1, 1, 1)
    assert report.matching == 4
    by_problem = {finding.problem: finding for finding in report.findings}
    changed_finding = by_problem[VerdictProblem.CHANGED]
    assert changed_finding.verdict_id == changed.id
    assert changed_finding.position == changed.position
    assert changed_finding.differences == ["score"]
    assert changed_finding.expected is not None and changed_finding.found is not None
    assert (changed_finding.expected["score"], changed_finding.found["score"]) == (3, 0)
    assert "changed after it was recorded: score: ledger 3, verdict 0" in describe(changed_finding)
    assert by_problem[VerdictProblem.DELETED].verdict_id == deleted.id
    assert by_problem[VerdictProblem.DELETED].session_id == deleted.session_id
    unrecorded = by_problem[VerdictProblem.UNRECORDED]
    assert unrecorded.verdict_id not in {v.id for v in verdicts}
    assert unrecorded.found is not None
    assert unrecorded.found["judge"] == "judge-forged"
    async with database_session(db_url) as db:
        capped = await check_verdicts(db, limit=0)
    assert (capped.changed, capped.deleted, capped.unrecorded, capped.findings) == (1, 1, 1, [])
    # the chains themselves are intact: the ledger was not touched
    assert_chains_verify(await verified(db_url))

    # proctor audit verify reports the same, and fails
    env = {"PROCTOR_DATABASE_URL": db_url, "PROCTOR_AUDIT_SIGNING_KEY": SIGNING_KEY}
    run = await asyncio.to_thread(proctor, "audit", "verify", "--log", "results", "--json", env=env)
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    assert data["ok"] is False and data["logs"][0]["chains"]
    assert all(chain["failure"] is None for chain in data["logs"][0]["chains"])
    listed = {(f["problem"], f["verdict_id"]) for f in data["verdicts"]["findings"]}
    assert listed == {
        ("changed", changed.id),
        ("deleted", deleted.id),
        ("unrecorded", unrecorded.verdict_id),
    }
    run = await asyncio.to_thread(proctor, "audit", "verify", env=env)
    assert f"verdict {changed.id} (session {changed.session_id}" in run.stdout
    assert "verdicts: FAILED: 6 verdict(s), 4 match the ledger, 1 changed" in run.stdout


async def test_a_deleted_verdict_is_found_even_when_its_id_is_reused(
    world_db: WorldDb, llm: FakeLlm
) -> None:
    """SQLite hands the id of a deleted newest verdict to the next one: the deletion is
    still reported (on PostgreSQL the id stays free and the entry has no verdict)."""
    db_url, world = world_db
    async with running_api(ledger_settings(db_url, llm)) as (_, client):
        sid = await scored_session(client, db_url, world, n_items=3)
    async with database_session(db_url) as db:
        newest = await db.scalar(select(Verdict).order_by(Verdict.id.desc()).limit(1))
    assert newest is not None
    await execute(db_url, "DELETE FROM verdicts WHERE id = :id", id=newest.id)
    async with database_session(db_url) as db:
        await service.enqueue_session(
            db,
            session_id=uuid.UUID(sid),
            judge="judge-v2",
            prompt_version=PROMPT_VERSION,
            review_again=False,
            now=datetime.now(UTC),
        )
    judges = [{"name": "judge-v2", "base_url": llm.base_url, "model": "judge"}]
    engine = create_engine(db_url)
    worker = ScoringWorker(engine=engine, settings=ledger_settings(db_url, llm, judges=judges))
    assert (await worker.drain()).recorded == 3
    await worker.aclose()
    await engine.dispose()
    async with database_session(db_url) as db:
        reused = await db.get(Verdict, newest.id)
    if db_url.startswith("sqlite"):
        assert reused is not None and reused.judge == "judge-v2", "SQLite reuses the id"
    else:
        assert reused is None
    report = await checked(db_url)
    assert (report.deleted, report.changed, report.unrecorded) == (1, 0, 0)
    assert [(f.problem, f.verdict_id) for f in report.findings] == [
        (VerdictProblem.DELETED, newest.id)
    ]
    assert report.findings[0].expected is not None
    assert report.findings[0].expected["judge"] == newest.judge
    assert_chains_verify(await verified(db_url))


async def test_verdicts_written_before_chaining_are_not_tampering(
    world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = world_db
    async with running_api(ledger_settings(db_url, llm)) as (_, client):
        await scored_session(client, db_url, world, n_items=3)
    await execute(db_url, "UPDATE verdicts SET created_at = :then", then=datetime(2020, 1, 1))
    first = (await entries(db_url))[0]
    await unprotect_ledger(db_url)
    await execute(db_url, "DELETE FROM result_ledger WHERE id <> :id", id=first.id)
    report = await checked(db_url)
    assert report.before_chaining == 2 and report.matching == 1
    assert report.ok

    # emptying the ledger does not make a later verdict look older than it: the results
    # chains' signed checkpoints still say when chaining began
    later = datetime(2100, 1, 1)
    await execute(db_url, "UPDATE verdicts SET created_at = :t WHERE id = :id", t=later, id=1)
    await execute(db_url, "DELETE FROM result_ledger")
    report = await checked(db_url)
    assert (report.before_chaining, report.unrecorded, report.matching) == (2, 1, 0)
    assert [(f.problem, f.verdict_id) for f in report.findings] == [(VerdictProblem.UNRECORDED, 1)]


async def test_an_entry_edited_deleted_or_inserted_breaks_the_chain(
    world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = world_db
    settings = ledger_settings(db_url, llm, audit_checkpoint_rows=1000, audit_checkpoint_s=3600)
    async with running_api(settings) as (_, client):
        await scored_session(client, db_url, world, n_items=6)
    rows = await entries(db_url)
    assert len(rows) == 6 and len({row.chain for row in rows}) == 1
    assert_chains_verify(await verified(db_url))
    await unprotect_ledger(db_url)
    target = rows[2]

    # edited: the row's own hash no longer matches; check_verdicts sees it too
    await execute(db_url, "UPDATE result_ledger SET score = 0 WHERE id = :id", id=target.id)
    report = await verified(db_url)
    assert [(f.row_id, f.reason) for f in report.failures] == [(target.id, verify.Reason.EDITED)]
    assert [f.verdict_id for f in (await checked(db_url)).findings] == [target.verdict_id]
    await execute(db_url, "UPDATE result_ledger SET score = 3 WHERE id = :id", id=target.id)
    assert (await verified(db_url)).ok

    # deleted: the next row's link is broken
    await execute(db_url, "DELETE FROM result_ledger WHERE id = :id", id=target.id)
    report = await verified(db_url)
    assert [(f.row_id, f.reason) for f in report.failures] == [
        (rows[3].id, verify.Reason.BROKEN_LINK)
    ]
    assert [(f.problem, f.verdict_id) for f in (await checked(db_url)).findings] == [
        (VerdictProblem.UNRECORDED, target.verdict_id)
    ]

    # inserted: a forged row, well linked and hashed, between two rows breaks the next link
    forged = {**fields(target), "score": 0}
    await execute(
        db_url,
        "INSERT INTO result_ledger (id, chain, prev_hash, row_hash, at, verdict_id, "
        "session_id, position, judge, prompt_version, score, method, needs_review) VALUES "
        "(:id, :chain, :prev, :hash, :at, :verdict_id, :session_id, :position, :judge, "
        ":prompt_version, :score, :method, :needs_review)",
        id=target.id,
        chain=target.chain,
        prev=target.prev_hash,
        hash=link(target.prev_hash, forged),
        **{**_bindable(forged, db_url)},
    )
    report = await verified(db_url)
    assert [(f.row_id, f.reason) for f in report.failures] == [
        (rows[3].id, verify.Reason.BROKEN_LINK)
    ]


def _bindable(values: Mapping[str, Any], db_url: str) -> dict[str, Any]:
    """Values a raw statement can bind on both backends (SQLite stores UUIDs as hex and
    times without a zone)."""
    out = dict(values)
    if db_url.startswith("sqlite"):
        out["session_id"] = out["session_id"].hex
        out["at"] = out["at"].astimezone(UTC).replace(tzinfo=None)
    return out


# --------------------------------------------------------------------------- concurrency

WORKER = """
import asyncio, sys
from server.cli.unit_of_work import require_bank_keyring
from server.config import Settings
from server.database import create_engine
from server.database import create_engine
from server.scoring.worker import ScoringWorker

async def main():
    settings = Settings(_env_file=None)
    require_bank_keyring(settings)
    engine = create_engine(settings.effective_database_url)
    worker = ScoringWorker(engine=engine, settings=settings)
    stats = await worker.drain()
    await worker.aclose()
    await engine.dispose()
    print(stats.recorded)

asyncio.run(main())
"""


async def test_two_worker_processes_keep_their_chains_valid(
    world_db: WorldDb, llm: FakeLlm
) -> None:
    db_url, world = world_db
    settings = ledger_settings(db_url, llm, scoring_in_process=False)
    async with running_api(settings) as (_, client):
        assert world.a.model_id is not None
        evaluator = await login(client, world.a.keys["evaluator"])
        for _ in range(2):
            sid = str((await open_session(client, evaluator, world.a.model_id, n_items=24))["id"])
            vendor = await login(client, world.a.keys["vendor"], sid)
            await answer_items(client, db_url, sid, vendor, lambda item, _: answer_for(item, True))
    judge = {"name": JUDGE_NAME, "base_url": llm.base_url, "model": "judge"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_JUDGES=json.dumps([judge]),
        PROCTOR_JUDGE_CONCURRENCY="4",
        PROCTOR_AUDIT_SIGNING_KEY=SIGNING_KEY,
        PROCTOR_AUDIT_CHECKPOINT_ROWS="5",
    )
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WORKER,
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = [await asyncio.wait_for(proc.communicate(), 120) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()[-3000:]
    recorded = [int(out.decode().split()[-1]) for out, _ in outputs]
    assert sum(recorded) == 48
    rows = await entries(db_url)
    assert len(rows) == 48 and len({row.verdict_id for row in rows}) == 48
    report = await verified(db_url)
    assert_chains_verify(report)
    assert len(report.chains) == sum(1 for n in recorded if n), "one chain per writing process"
    assert all(chain.n_checkpoints >= 2 for chain in report.chains if chain.n_rows >= 10)
    assert (await checked(db_url)).ok


async def test_an_append_rolled_back_leaves_the_chain_valid(fresh_db_url: str) -> None:
    """A writer remembers its chain's head between appends; a transaction that appended
    (and signed a checkpoint) then rolled back must not leave the next append linked to
    rows that were never committed."""
    engine = create_engine(fresh_db_url)
    signer = CheckpointSigner(parse_private(SIGNING_KEY, source="test"), 3, 3600.0)
    session_id = uuid.uuid4()

    def verdict(n: int) -> SimpleNamespace:
        return SimpleNamespace(
            id=n,
            session_id=session_id,
            position=n,
            judge=JUDGE_NAME,
            prompt_version=PROMPT_VERSION,
            score=n % 4,
            method="judge",
            needs_review=False,
        )

    async with unit_of_work(engine) as db:
        await record(db, [verdict(1)], signer=signer)
    with contextlib.suppress(RuntimeError):
        async with unit_of_work(engine) as db:
            await record(db, [verdict(2), verdict(3)], signer=signer)  # signs a checkpoint
            raise RuntimeError("the writer's transaction fails")
    for n in range(4, 9):
        async with unit_of_work(engine) as db:
            await record(db, [verdict(n)], signer=signer)
    await engine.dispose()
    assert [e.verdict_id for e in await entries(fresh_db_url)] == [1, 4, 5, 6, 7, 8]
    report = await verified(fresh_db_url)
    assert report.ok, report.failures
    # signed at its first row and after rows 4-6 (the rolled-back checkpoint is gone)
    assert [(c.n_rows, c.n_checkpoints) for c in report.chains] == [(6, 2)]
