"""The audit spool, on a private PostgreSQL cluster stopped for real (``pg_ctl stop -m
immediate``): while it is down every request is answered (503 + Retry-After where the
database is needed, never 500) and its audit row goes to a spool file; once it is back the
rows are in ``audit_log`` exactly as they were spooled, once each, and the spool is empty.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.audit.spool import Spool, decode_rows
from server.audit.writer import AuditWriter, database_tag
from server.database import create_engine, upgrade
from tests.support import services
from tests.support.api import login, running_api, seed_world, test_settings
from tests.support.audit import audit_rows, last_audit_id, spool_files, wait_for_empty_spool

pytestmark = [pytest.mark.postgres]

FIELDS = ("at", "subject", "org_id", "session_id", "method", "route", "status", "client")


@pytest.fixture(scope="module")
def private_pg(postgres_bindir: Path) -> Iterator[services.PostgresServer]:
    """A cluster of this module's own: stopping it leaves the suite's server alone."""
    with services.postgres_server(postgres_bindir) as pg:
        yield pg


async def fresh_database(pg: services.PostgresServer) -> str:
    name = f"spool_{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(pg.create_database, name)
    url = pg.url(name)
    await asyncio.to_thread(upgrade, url)
    return url


class Outage:
    """Stops the private cluster immediately and starts it again; ``outage`` makes sure it
    runs again when the test ends, so the next test finds it up."""

    def __init__(self, pg: services.PostgresServer) -> None:
        self.pg = pg
        self.down = False

    async def stop(self) -> None:
        await asyncio.to_thread(services.stop_postgres_immediately, self.pg)
        self.down = True

    async def restart(self) -> None:
        await asyncio.to_thread(services.start_postgres_again, self.pg)
        self.down = False


@asynccontextmanager
async def outage(pg: services.PostgresServer) -> AsyncIterator[Outage]:
    control = Outage(pg)
    try:
        yield control
    finally:
        if control.down:
            await control.restart()


def spooled_rows(spool: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in spool_files(spool):
        with path.open("rb") as stream:
            rows.extend(decode_rows(stream, path))
    return rows


def spooled(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A spooled row's columns, as ``audit_log`` must hold them."""
    return (*(row.get(name) for name in FIELDS), row.get("repeats", 1))


def stored(entry: Any) -> tuple[Any, ...]:
    return (*(getattr(entry, name) for name in FIELDS), entry.repeats)


async def outage_requests(
    client: httpx.AsyncClient, key: str, headers: dict[str, str], rounds: int = 3
) -> list[tuple[str, httpx.Response]]:
    """Requests needing the database (a token, a session's next item, whoami) and one that
    does not (``/openapi.json``), ``rounds`` times: ``(what, response)``."""
    sent = []
    for _ in range(rounds):
        sent.append(("token", await client.post("/v1/auth/token", json={"api_key": key})))
        next_url = f"/v1/sessions/{uuid.uuid4()}/next"
        sent.append(("next", await client.get(next_url, headers=headers)))
        sent.append(("whoami", await client.get("/v1/whoami", headers=headers)))
        sent.append(("openapi", await client.get("/openapi.json")))
    return sent


def assert_outage_answers(sent: list[tuple[str, httpx.Response]]) -> None:
    """503 + Retry-After (problem+json) where the database is needed, never a 500."""
    assert {r.status_code for _, r in sent} <= {200, 503}, [(w, r.status_code) for w, r in sent]
    for what, response in sent:
        if what in ("token", "next"):
            assert response.status_code == 503, (what, response.text)
        if what == "openapi":
            assert response.status_code == 200, response.text
        if response.status_code == 503:
            assert response.headers["retry-after"] == "2"
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["title"] == "Service unavailable"


async def test_an_outage_is_answered_503_and_its_spooled_audit_rows_are_replayed_exactly(
    private_pg: services.PostgresServer, tmp_path: Path
) -> None:
    db_url = await fresh_database(private_pg)
    world = await seed_world(db_url, per_cell=1)
    key = world.a.keys["evaluator"]
    spool = tmp_path / "spool"
    settings = test_settings(db_url, audit_spool_dir=spool)
    async with outage(private_pg) as pg, running_api(settings) as (app, client):
        headers = await login(client, key)
        before = await last_audit_id(db_url)
        await pg.stop()
        sent = await outage_requests(client, key, headers)
        assert_outage_answers(sent)
        assert app.state.runtime.audit.database_down

        # Every answered request's row is in the spool (fsynced before the answer).
        rows = await asyncio.to_thread(spooled_rows, spool)
        assert Counter((r["method"], r["status"]) for r in rows) == Counter(
            (response.request.method, response.status_code) for _, response in sent
        )
        next_ids = {uuid.UUID(r.request.url.path.split("/")[3]) for w, r in sent if w == "next"}
        assert {r["session_id"] for r in rows} - {None} == next_ids
        assert all(r["at"].tzinfo is not None for r in rows)

        await pg.restart()
        await wait_for_empty_spool(spool)

    replayed = await audit_rows(db_url, after=before)
    assert Counter(stored(e) for e in replayed) == Counter(spooled(r) for r in rows)
    assert list(spool.iterdir()) == []  # nothing rejected, nothing left half-made


async def test_a_spool_left_by_a_stopped_server_is_replayed_when_the_next_one_starts(
    private_pg: services.PostgresServer, tmp_path: Path
) -> None:
    db_url = await fresh_database(private_pg)
    world = await seed_world(db_url, per_cell=1)
    key = world.a.keys["evaluator"]
    spool = tmp_path / "spool"
    settings = test_settings(db_url, audit_spool_dir=spool)
    async with outage(private_pg) as pg:
        async with running_api(settings) as (_, client):
            headers = await login(client, key)
            before = await last_audit_id(db_url)
            await pg.stop()
            sent = await outage_requests(client, key, headers, rounds=2)
            assert_outage_answers(sent)
        # the server stopped with its rows spooled
        rows = await asyncio.to_thread(spooled_rows, spool)
        assert len(rows) == len(sent)
        await pg.restart()

    async with running_api(settings):
        await wait_for_empty_spool(spool)
    replayed = await audit_rows(db_url, after=before)
    assert Counter(stored(e) for e in replayed) == Counter(spooled(r) for r in rows)


async def test_two_writers_replay_each_spool_file_once(
    private_pg: services.PostgresServer, tmp_path: Path
) -> None:
    """Files a crashed process left (one ending in a torn line) are shared out between two
    writers that start together: each row once, each file deleted."""
    db_url = await fresh_database(private_pg)
    spool = tmp_path / "spool"
    engines = [create_engine(db_url) for _ in range(2)]
    tag = database_tag(engines[0])
    rows = [row(file, i) for file in range(6) for i in range(40)]
    for file in range(6):
        dead = Spool(spool, tag)
        await asyncio.to_thread(dead.append, rows[file * 40 : (file + 1) * 40])
        dead.rotate()
    with spool_files(spool)[0].open("ab") as torn:
        torn.write(b'{"at":{"$datetime":"2026-')  # the write a crash interrupted
    before = await last_audit_id(db_url)
    writers = [AuditWriter(engine, spool) for engine in engines]
    try:
        for writer in writers:
            writer.start()
        await wait_for_empty_spool(spool)
    finally:
        for writer, engine in zip(writers, engines, strict=True):
            await writer.stop()
            await engine.dispose()
    replayed = await audit_rows(db_url, after=before)
    assert Counter(stored(e) for e in replayed) == Counter(spooled(r) for r in rows)


def row(file: int, i: int) -> dict[str, Any]:
    """A distinct audit row: an offset that is not UTC, microseconds, UUIDs, repeats."""
    at = datetime(2026, 11, 23, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    return {
        "at": at + timedelta(seconds=file, microseconds=i),
        "subject": f"key:{file}-{i}",
        "org_id": uuid.uuid4(),
        "session_id": uuid.uuid4() if i % 2 else None,
        "method": "GET",
        "route": "/v1/sessions/{session_id}/next",
        "status": 503,
        "client": "10.0.0.1",
        "repeats": 1 + i % 3,
    }


def test_a_spool_file_is_claimed_only_once_its_writer_let_go_of_it(tmp_path: Path) -> None:
    writing = Spool(tmp_path, "db")
    rows = [row(0, i) for i in range(3)] + [{**row(0, 3), "at": datetime.now(UTC)}]
    writing.append(rows)
    [path] = spool_files(tmp_path)
    other = Spool(tmp_path, "db")
    assert other.claim(path) is None  # still being written: locked
    assert Spool(tmp_path, "another-db").closed_files() == []
    writing.rotate()
    claim = other.claim(path)
    assert claim is not None
    try:
        assert claim.rows == rows  # datetimes with their offset, UUIDs, ints, None
        assert other.claim(path) is None  # held for replay
    finally:
        claim.close()
