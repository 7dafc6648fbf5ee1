"""Crash tests: a real ``proctor serve`` process on PostgreSQL (and Redis), then something dies.

1. ``kill -9`` of the API between two requests: the pending item survives, and the session
   finishes with every position answered exactly once.
2. PostgreSQL stopped with ``pg_ctl stop -m immediate`` (a crash: no checkpoint, recovery
   from the WAL on restart) while 20 clients drive 20 sessions: every answer acknowledged
   with 201 is in the database exactly once, and every client can carry on. During the
   outage nothing is a 500: requests needing the database get 503 + Retry-After, the others
   (``/openapi.json``) are served, and the audit rows of them all, spooled meanwhile, are in
   ``audit_log`` once PostgreSQL is back.
3. Redis (rate-limit counters only) killed and restarted on the same port mid-session:
   nothing is lost and the session lease still refuses a second token.

Test 2 runs on a private PostgreSQL cluster and test 3 on a private Redis, so the shared
session servers of the rest of the suite are never stopped.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select

from server.audit.models import AuditEntry
from server.database import upgrade
from server.ratelimit import REDIS_SKIP_S
from server.sessions.models import Answer, EvalSession
from tests.support import services
from tests.support.api import (
    JWT_SECRET,
    World,
    live_server,
    login,
    open_session,
    seed_world,
)
from tests.support.audit import wait_for_empty_spool
from tests.support.database import fetch_all, new_postgres_database

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TIMEOUT = httpx.Timeout(15.0)


def model_id(world: World) -> uuid.UUID:
    assert world.a.model_id is not None
    return world.a.model_id


def serve_env(db_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """``PROCTOR_*`` variables for a live server on ``db_url`` with Redis counters."""
    env = {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_REDIS_URL": redis_url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "100000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "1000000",
        "PROCTOR_MAX_CONCURRENT_SESSIONS": "50",
        "PROCTOR_MAX_SESSIONS_PER_PERIOD": "1000",
    }
    env.update(extra)
    return env


async def answer(
    client: httpx.AsyncClient, headers: dict[str, str], sid: str, item: dict[str, Any]
) -> httpx.Response:
    body = {"position": item["position"], "item_id": item["item_id"], "answer": "A"}
    return await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=headers)


async def drive(
    client: httpx.AsyncClient, headers: dict[str, str], sid: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """Take and answer items (at most ``limit``) until the session is done; the items."""
    done: list[dict[str, Any]] = []
    while limit is None or len(done) < limit:
        got = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
        if got.status_code == 204:
            break
        assert got.status_code == 200, got.text
        item = got.json()
        posted = await answer(client, headers, sid, item)
        assert posted.status_code == 201, posted.text
        assert posted.json()["position"] == item["position"]
        done.append(item)
    return done


async def answer_rows(db_url: str, session_ids: list[str]) -> dict[str, list[tuple[int, str]]]:
    """``session id -> [(position, item id), ...]`` from the ``answers`` table, ordered."""
    rows = await fetch_all(
        db_url,
        select(Answer.session_id, Answer.position, Answer.item_id)
        .where(Answer.session_id.in_([uuid.UUID(s) for s in session_ids]))
        .order_by(Answer.session_id, Answer.position),
    )
    found: dict[str, list[tuple[int, str]]] = {s: [] for s in session_ids}
    for sid, position, item_id in rows:
        found[str(sid)].append((position, str(item_id)))
    return found


async def session_states(db_url: str, session_ids: list[str]) -> dict[str, tuple[str, int, int]]:
    """``session id -> (state, n_delivered, n_completed)``."""
    rows = await fetch_all(
        db_url,
        select(
            EvalSession.id,
            EvalSession.state,
            EvalSession.n_delivered,
            EvalSession.n_completed,
        ).where(EvalSession.id.in_([uuid.UUID(s) for s in session_ids])),
    )
    return {str(r.id): (r.state, r.n_delivered, r.n_completed) for r in rows}


async def audited_acks(db_url: str, session_ids: list[str]) -> dict[str, int]:
    """``session id -> audit rows of answers acknowledged with 201``."""
    rows = await fetch_all(
        db_url,
        select(AuditEntry.session_id, func.count())
        .where(
            AuditEntry.session_id.in_([uuid.UUID(s) for s in session_ids]),
            AuditEntry.method == "POST",
            AuditEntry.route == "/v1/sessions/{session_id}/answers",
            AuditEntry.status == 201,
        )
        .group_by(AuditEntry.session_id),
    )
    counts = {s: 0 for s in session_ids}
    counts.update({str(sid): n for sid, n in rows})
    return counts


async def per_position_counts(db_url: str, sid: str) -> dict[int, int]:
    rows = await fetch_all(
        db_url,
        select(Answer.position, func.count())
        .where(Answer.session_id == uuid.UUID(sid))
        .group_by(Answer.position),
    )
    return {position: count for position, count in rows}


# --------------------------------------------------------------------------- #
# 1. kill -9 of the API process
# --------------------------------------------------------------------------- #


async def test_kill_9_keeps_the_pending_item_and_every_answer(
    postgres_server: services.PostgresServer,
    postgres_template: str,
    redis_server: services.RedisServer,
    tmp_path: Path,
) -> None:
    db_url = await new_postgres_database(postgres_server, postgres_template)
    world = await seed_world(db_url)
    key = world.a.keys["evaluator"]
    env = serve_env(db_url, redis_server.url, PROCTOR_LEASE_IDLE_S="1")
    with live_server(env, tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client:
            headers = await login(client, key)
            session = await open_session(client, headers, model_id(world), n_items=20)
            sid = session["id"]
            assert session["n_items"] == 20
            first = await drive(client, headers, sid, limit=10)
            assert [i["position"] for i in first] == list(range(10))
            pending = (await client.get(f"/v1/sessions/{sid}/next", headers=headers)).json()
            assert pending["position"] == 10

            server.kill()
            server.start()

            # The old token is still valid (same secret) and still holds the lease.
            again = await client.get(f"/v1/sessions/{sid}/next", headers=headers)
            assert again.status_code == 200, again.text
            assert again.json() == pending
            # A restarted client logs in again and gets the lease once it is idle.
            fresh = await login(client, key)
            await asyncio.sleep(1.2)
            resumed = await client.get(f"/v1/sessions/{sid}/next", headers=fresh)
            assert resumed.status_code == 200, resumed.text
            assert (resumed.json()["position"], resumed.json()["item_id"]) == (
                pending["position"],
                pending["item_id"],
            )
            rest = await drive(client, fresh, sid)
            assert [i["position"] for i in rest] == list(range(10, 20))
            final = (await client.get(f"/v1/sessions/{sid}", headers=fresh)).json()
            assert (final["state"], final["completed"], final["pending"]) == ("answered", 20, 0)

    counts = await per_position_counts(db_url, sid)
    assert counts == {p: 1 for p in range(20)}
    rows = (await answer_rows(db_url, [sid]))[sid]
    delivered = [(i["position"], i["item_id"]) for i in first + rest]
    assert rows == delivered
    assert (await session_states(db_url, [sid]))[sid] == ("answered", 20, 20)
    print(f"\n[kill -9] 20 answers acknowledged, {len(rows)} found, 0 duplicates")


# --------------------------------------------------------------------------- #
# 2. PostgreSQL immediate stop during a storm of 20 clients
# --------------------------------------------------------------------------- #

N_CLIENTS = 20
STORM_ITEMS = 10
STOP_AFTER = 40


@dataclass
class Driver:
    """One client driving one session, and what the server told it."""

    sid: str
    headers: dict[str, str]
    n_items: int
    acked: dict[int, str] = field(default_factory=dict)
    """position -> item id of answers acknowledged with 201."""
    seen: dict[int, str] = field(default_factory=dict)
    """position -> item id of items delivered by ``next`` (200)."""
    unacked: dict[int, str] = field(default_factory=dict)
    """Answers sent without a 201 (error status or transport error)."""
    outcomes: list[tuple[float, str]] = field(default_factory=list)
    """(monotonic time the response arrived, outcome) of every failed request."""
    without_retry_after: int = 0
    """503 responses without a Retry-After header."""
    finished_in_storm: bool = False


def note_failure(d: Driver, what: str, response: httpx.Response) -> None:
    d.outcomes.append((time.monotonic(), f"{what}:{response.status_code}"))
    if response.status_code == 503 and "retry-after" not in response.headers:
        d.without_retry_after += 1


async def storm(client: httpx.AsyncClient, d: Driver, stop: asyncio.Event) -> None:
    """next + answer until told to stop; errors are noted and retried after a pause."""
    url = f"/v1/sessions/{d.sid}"
    while not stop.is_set():
        try:
            got = await client.get(f"{url}/next", headers=d.headers)
        except httpx.TransportError as error:
            d.outcomes.append((time.monotonic(), f"next:{type(error).__name__}"))
            await asyncio.sleep(0.05)
            continue
        if got.status_code == 204:
            d.finished_in_storm = True
            return
        if got.status_code != 200:
            note_failure(d, "next", got)
            await asyncio.sleep(0.05)
            continue
        item = got.json()
        if item["position"] in d.seen:
            assert d.seen[item["position"]] == item["item_id"], "a position changed its item"
        d.seen[item["position"]] = item["item_id"]
        try:
            posted = await answer(client, d.headers, d.sid, item)
        except httpx.TransportError as error:
            d.unacked[item["position"]] = item["item_id"]
            d.outcomes.append((time.monotonic(), f"answer:{type(error).__name__}"))
            continue
        if posted.status_code == 201:
            assert posted.json()["position"] == item["position"]
            d.acked[item["position"]] = item["item_id"]
            d.unacked.pop(item["position"], None)
        else:
            if item["position"] not in d.acked:
                d.unacked[item["position"]] = item["item_id"]
            note_failure(d, "answer", posted)


async def probe_openapi(client: httpx.AsyncClient, stop: asyncio.Event) -> Counter[str]:
    """``GET /openapi.json`` (no database needed) every 50 ms until told to stop: outcomes
    (statuses, or the transport error's name)."""
    outcomes: Counter[str] = Counter()
    while not stop.is_set():
        try:
            outcomes[str((await client.get("/openapi.json")).status_code)] += 1
        except httpx.TransportError as error:
            outcomes[type(error).__name__] += 1
        await asyncio.sleep(0.05)
    return outcomes


async def audited_statuses(db_url: str) -> Counter[int]:
    """``status -> requests`` in ``audit_log`` (folded rows count their repeats)."""
    rows = await fetch_all(
        db_url,
        select(AuditEntry.status, func.sum(AuditEntry.repeats)).group_by(AuditEntry.status),
    )
    return Counter({status: int(n) for status, n in rows})


async def resume(client: httpx.AsyncClient, d: Driver, answered: int) -> Counter[str]:
    """After the restart: ``next`` gives the pending item, unacknowledged answers are
    either accepted (201) or already there (409), then the session is finished."""
    retries: Counter[str] = Counter()
    url = f"/v1/sessions/{d.sid}"
    got = await client.get(f"{url}/next", headers=d.headers)
    if answered == d.n_items:
        assert got.status_code == 204, got.text
        assert not set(d.unacked) - set(range(d.n_items))
    else:
        assert got.status_code == 200, got.text
        item = got.json()
        assert item["position"] == answered, (item, answered)
        if answered in d.seen:
            assert item["item_id"] == d.seen[answered], "the pending item changed"
        d.seen[answered] = item["item_id"]
    for position, item_id in sorted(d.unacked.items()):
        body = {"position": position, "item_id": item_id, "answer": "A"}
        posted = await client.post(f"{url}/answers", json=body, headers=d.headers)
        if posted.status_code == 201:
            assert position == answered, "an answer after the pending one was accepted"
            d.acked[position] = item_id
            retries["201"] += 1
        else:
            assert posted.status_code == 409, posted.text
            assert posted.json()["title"] == "Already answered", posted.text
            assert position < answered
            retries["409"] += 1
    d.unacked.clear()
    for item in await drive(client, d.headers, d.sid):
        d.seen[item["position"]] = item["item_id"]
        d.acked[item["position"]] = item["item_id"]
    return retries


async def test_postgres_immediate_stop_during_a_storm_loses_no_acknowledged_answer(
    postgres_bindir: Path, redis_server: services.RedisServer, tmp_path: Path
) -> None:
    with services.postgres_server(postgres_bindir) as pg:
        pg.create_database("proctor")
        db_url = pg.url("proctor")
        await asyncio.to_thread(upgrade, db_url)
        # 3 x 2 x 2 x 20 = 240 families for 20 sessions of 10 items, all of one organisation.
        world = await seed_world(db_url, per_cell=20)
        key = world.a.keys["evaluator"]
        spool = tmp_path / "audit-spool"
        env = serve_env(db_url, redis_server.url, PROCTOR_AUDIT_SPOOL_DIR=str(spool))
        limits = httpx.Limits(max_connections=N_CLIENTS + 5)
        with live_server(env, tmp_path) as server:
            async with httpx.AsyncClient(
                base_url=server.url, timeout=TIMEOUT, limits=limits
            ) as client:
                drivers = []
                for _ in range(N_CLIENTS):
                    headers = await login(client, key)
                    session = await open_session(
                        client, headers, model_id(world), n_items=STORM_ITEMS
                    )
                    drivers.append(Driver(session["id"], headers, session["n_items"]))
                assert all(d.n_items == STORM_ITEMS for d in drivers)

                stop = asyncio.Event()
                tasks = [asyncio.create_task(storm(client, d, stop)) for d in drivers]
                # As soon as the storm is under way: STOP_AFTER answers acknowledged (~2
                # per session). Not after a fixed time: the delivery is fast enough that
                # a session can have answered all its items within 1 s, and the stop must
                # hit every session mid-way.
                t_storm = time.monotonic()
                while sum(len(d.acked) for d in drivers) < STOP_AFTER:
                    assert time.monotonic() - t_storm < 20, "the storm is too slow"
                    await asyncio.sleep(0.01)
                t_stop = time.monotonic()
                await asyncio.to_thread(services.stop_postgres_immediately, pg)
                t_stopped = time.monotonic()
                openapi = asyncio.create_task(probe_openapi(client, stop))
                await asyncio.sleep(1.0)  # the clients keep hammering a server without database
                stop.set()
                await asyncio.gather(*tasks)
                openapi_statuses = await openapi

                acked_before = {d.sid: dict(d.acked) for d in drivers}
                n_acked = sum(len(a) for a in acked_before.values())
                most_acked = max(len(a) for a in acked_before.values())
                errors_before_stop = [o for d in drivers for t, o in d.outcomes if t < t_stop]
                outage = Counter(o for d in drivers for _, o in d.outcomes)
                assert not errors_before_stop, errors_before_stop
                assert 0 < n_acked < N_CLIENTS * STORM_ITEMS, "the stop did not hit the storm"
                assert not any(d.finished_in_storm for d in drivers)
                # The outage is answered 503 + Retry-After on every route: no 500, no
                # dropped connection.
                assert set(outage) <= {"next:503", "answer:503"}, outage
                n_503 = sum(outage.values())
                assert n_503 > 0, outage
                assert sum(d.without_retry_after for d in drivers) == 0
                assert set(openapi_statuses) == {"200"}, openapi_statuses

                await asyncio.to_thread(services.start_postgres_again, pg)
                t_back = time.monotonic()
                # The audit rows answered meanwhile were spooled; the server replays them.
                replay_s = await wait_for_empty_spool(spool)
                audited_503 = (await audited_statuses(db_url))[503]
                assert audited_503 >= n_503, (audited_503, n_503)

                sids = [d.sid for d in drivers]
                found = await answer_rows(db_url, sids)
                states = await session_states(db_url, sids)
                audited = await audited_acks(db_url, sids)
                missing, wrong = [], []
                for d in drivers:
                    rows = dict(found[d.sid])
                    assert len(rows) == len(found[d.sid])  # the PK: one row per position
                    # answers go strictly in order: positions 0..k-1, no gap
                    assert sorted(rows) == list(range(len(rows))), (d.sid, sorted(rows))
                    for position, item_id in acked_before[d.sid].items():
                        if position not in rows:
                            missing.append((d.sid, position))
                        elif rows[position] != item_id:
                            wrong.append((d.sid, position))
                    state, _, n_completed = states[d.sid]
                    assert n_completed == len(rows), (d.sid, states[d.sid], len(rows))
                    assert state == "active", (d.sid, states[d.sid], len(acked_before[d.sid]))
                    # an acknowledged request is audited before its status goes out
                    assert audited[d.sid] >= len(acked_before[d.sid]), (d.sid, audited[d.sid])
                assert not missing, f"acknowledged answers lost: {missing}"
                assert not wrong, f"acknowledged answers changed: {wrong}"
                n_found = sum(len(r) for r in found.values())

                retries: Counter[str] = Counter()
                for counted in await asyncio.gather(
                    *(resume(client, d, len(found[d.sid])) for d in drivers)
                ):
                    retries.update(counted)

        final = await answer_rows(db_url, sids)
        final_states = await session_states(db_url, sids)
        final_audited = await audited_acks(db_url, sids)
        for d in drivers:
            assert [p for p, _ in final[d.sid]] == list(range(STORM_ITEMS))
            assert d.acked.items() <= dict(final[d.sid]).items()
            assert dict(final[d.sid]) == {p: d.seen[p] for p in range(STORM_ITEMS)}
            assert final_states[d.sid] == ("answered", STORM_ITEMS, STORM_ITEMS)
            assert final_audited[d.sid] >= len(d.acked)
    final_rows = sum(len(r) for r in final.values())
    print(
        f"\n[pg immediate stop] {N_CLIENTS} sessions; {n_acked} answers acknowledged before "
        f"the stop (at most {most_acked} of {STORM_ITEMS} in one session), {n_found} found "
        f"after recovery ({n_found - n_acked} committed without an ack), 0 missing, "
        f"0 duplicates, {sum(audited.values())} audited 201s; retried "
        f"unacknowledged answers: {dict(retries)}; failures during the outage: {dict(outage)}; "
        f"stopped at +{t_stop - t_storm:.1f} s into the storm, pg_ctl stop took "
        f"{t_stopped - t_stop:.2f} s, back at +{t_back - t_stop:.1f} s; final rows {final_rows}; "
        f"/openapi.json during the outage: {dict(openapi_statuses)}; {n_503} 503s answered, "
        f"{audited_503} audited after the spool was replayed in {replay_s:.1f} s"
    )


# --------------------------------------------------------------------------- #
# 3. Redis killed and restarted mid-session
# --------------------------------------------------------------------------- #


async def test_redis_restart_mid_session_loses_nothing_and_keeps_the_lease(
    postgres_server: services.PostgresServer,
    postgres_template: str,
    redis_binary: Path,
    tmp_path: Path,
) -> None:
    db_url = await new_postgres_database(postgres_server, postgres_template)
    world = await seed_world(db_url)
    key = world.a.keys["evaluator"]
    restarted: subprocess.Popen[bytes] | None = None
    with services.redis_server(redis_binary) as redis_info:
        env = serve_env(db_url, redis_info.url, PROCTOR_LEASE_IDLE_S="30")
        probe = Redis.from_url(redis_info.url)
        try:
            with live_server(env, tmp_path) as server:
                async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client:
                    headers = await login(client, key)
                    session = await open_session(client, headers, model_id(world), n_items=20)
                    sid = session["id"]
                    first = await drive(client, headers, sid, limit=8)
                    assert await probe.keys("proctor:rl:*"), "the counters are not in Redis"

                    # Kill the Redis process (started by this test) with SIGKILL, by its pid.
                    pid = int((await probe.info("server"))["process_id"])
                    await probe.aclose()
                    os.kill(pid, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                    while services.redis_ping(redis_info.port):
                        assert time.monotonic() < deadline, "redis did not die"
                        await asyncio.sleep(0.02)

                    # Without Redis the limiter lets requests through: the session goes on.
                    during = await drive(client, headers, sid, limit=2)

                    restarted = await asyncio.to_thread(
                        services.start_redis_on, redis_binary, redis_info.port, tmp_path
                    )
                    probe = Redis.from_url(redis_info.url)
                    assert not await probe.keys("proctor:rl:*")  # a fresh, empty Redis
                    after = await drive(client, headers, sid, limit=2)
                    # After a failure the limiter leaves Redis alone for REDIS_SKIP_S
                    # (server/circuit.py); then a request finds the restarted Redis.
                    deadline = time.monotonic() + REDIS_SKIP_S + 10
                    while not await probe.keys("proctor:rl:*"):
                        assert time.monotonic() < deadline, "the server did not reconnect"
                        await client.get("/v1/whoami", headers=headers)
                        await asyncio.sleep(0.2)

                    # The lease rule does not live in Redis: a second token is refused.
                    other = await login(client, key)
                    refused = await client.get(f"/v1/sessions/{sid}/next", headers=other)
                    assert refused.status_code == 403, refused.text
                    assert "session in use" in refused.json()["detail"]

                    rest = await drive(client, headers, sid)
                    items = first + during + after + rest
                    assert [i["position"] for i in items] == list(range(20))
                    final = (await client.get(f"/v1/sessions/{sid}", headers=headers)).json()
                    assert (final["state"], final["completed"]) == ("answered", 20)
        finally:
            await probe.aclose()
            if restarted is not None:
                restarted.terminate()
                try:
                    restarted.wait(10)
                except subprocess.TimeoutExpired:
                    restarted.kill()
                    restarted.wait(10)

    assert await per_position_counts(db_url, sid) == {p: 1 for p in range(20)}
    rows = (await answer_rows(db_url, [sid]))[sid]
    assert rows == [(i["position"], i["item_id"]) for i in items]
    assert (await session_states(db_url, [sid]))[sid] == ("answered", 20, 20)
    print(
        f"\n[redis restart] same port {redis_info.port}; 20 answers acknowledged "
        f"({len(during)} while Redis was down), {len(rows)} found, 0 duplicates"
    )
