"""The chained audit log survives crashes: a real ``proctor serve``, then something dies
during a request storm, and ``verify_log`` still finds every chain intact.

1. ``kill -9`` of the server mid-storm (while audit rows are being written), then a new
   server, on the embedded SQLite default and on PostgreSQL: two chains (one per process),
   the killed one's rows verify up to its last committed row.
2. PostgreSQL stopped with ``pg_ctl stop -m immediate`` mid-storm: the audit rows of the
   outage are spooled; the server is then killed too (its spool file left behind), and the
   next server replays that file once PostgreSQL is back, chaining the rows into its own
   chain. No unchained row, every chain verifies.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from server.audit.models import AuditEntry
from server.database import upgrade
from server.ledger.signing import new_private_text, parse_private
from server.ledger.verify import AUDIT, LogReport, verify_log
from tests.support import services
from tests.support.api import JWT_SECRET, live_server, login, seed_world
from tests.support.audit import spool_files, wait_for_empty_spool
from tests.support.database import database_session, fetch_all

KEY_TEXT = new_private_text()
KEY = parse_private(KEY_TEXT, source="test").public
N_CLIENTS = 20
TIMEOUT = httpx.Timeout(15.0)


def serve_env(db_url: str, **extra: str) -> dict[str, str]:
    env = {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_AUDIT_SIGNING_KEY": KEY_TEXT,
        "PROCTOR_AUDIT_CHECKPOINT_ROWS": "50",
        "PROCTOR_RATE_LIMIT_PER_MINUTE": "1000000",
        "PROCTOR_RATE_LIMIT_ORG_PER_MINUTE": "10000000",
        "PROCTOR_AUTH_FAILURES_PER_MINUTE": "1000000",
    }
    env.update(extra)
    return env


@dataclass
class Storm:
    """Clients calling ``GET /v1/whoami`` until stopped; what they got."""

    outcomes: Counter[str] = field(default_factory=Counter)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def client(self, client: httpx.AsyncClient, headers: dict[str, str]) -> None:
        while not self.stop.is_set():
            try:
                response = await client.get("/v1/whoami", headers=headers)
                self.outcomes[str(response.status_code)] += 1
            except httpx.HTTPError:
                self.outcomes["connection error"] += 1
                await asyncio.sleep(0.01)

    async def until(self, status: str, n: int, timeout_s: float = 30.0) -> None:
        t0 = time.monotonic()
        while self.outcomes[status] < n:
            assert time.monotonic() - t0 < timeout_s, self.outcomes
            await asyncio.sleep(0.01)


async def verify(db_url: str) -> LogReport:
    async with database_session(db_url) as db:
        return await verify_log(db, AUDIT, {KEY.key_id: KEY})


async def chain_counts(db_url: str) -> dict[str | None, int]:
    rows = await fetch_all(
        db_url, select(AuditEntry.chain, func.count()).group_by(AuditEntry.chain)
    )
    return {chain: n for chain, n in rows}


async def test_kill_9_mid_storm_leaves_verifiable_chains(fresh_db_url: str, tmp_path: Path) -> None:
    db_url = fresh_db_url
    world = await seed_world(db_url)
    env = serve_env(db_url, PROCTOR_AUDIT_SPOOL_DIR=str(tmp_path / "spool"))
    storm = Storm()
    with live_server(env, tmp_path) as server:
        limits = httpx.Limits(max_connections=N_CLIENTS + 5)
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT, limits=limits) as client:
            headers = await login(client, world.a.keys["auditor"])
            tasks = [asyncio.create_task(storm.client(client, headers)) for _ in range(N_CLIENTS)]
            await storm.until("200", 300)
            await asyncio.to_thread(server.kill)
            killed_at = storm.outcomes["200"]
            await asyncio.sleep(0.2)
            await asyncio.to_thread(server.start)
            await storm.until("200", killed_at + 300)
            storm.stop.set()
            await asyncio.gather(*tasks)
    counts = await chain_counts(db_url)
    report = await verify(db_url)
    print(f"\n[chain, kill -9] {dict(storm.outcomes)}; rows per chain {counts}")
    assert report.ok, report.failures
    assert None not in counts, "a row without a chain"
    assert len(report.chains) == 2  # the killed process's chain and its successor's
    assert sum(counts.values()) >= storm.outcomes["200"]  # every acknowledged request
    assert all(chain.n_checkpoints >= 1 for chain in report.chains)
    assert storm.outcomes["connection error"] > 0  # requests were in flight at the kill


@pytest.mark.postgres
async def test_postgres_stop_mid_storm_spooled_rows_are_chained_on_replay(
    postgres_bindir: Path, tmp_path: Path
) -> None:
    with services.postgres_server(postgres_bindir) as pg:
        pg.create_database("proctor")
        db_url = pg.url("proctor")
        await asyncio.to_thread(upgrade, db_url)
        world = await seed_world(db_url)
        spool = tmp_path / "audit-spool"
        env = serve_env(db_url, PROCTOR_AUDIT_SPOOL_DIR=str(spool))
        storm = Storm()
        with live_server(env, tmp_path) as server:
            limits = httpx.Limits(max_connections=N_CLIENTS + 5)
            async with httpx.AsyncClient(
                base_url=server.url, timeout=TIMEOUT, limits=limits
            ) as client:
                headers = await login(client, world.a.keys["auditor"])
                tasks = [
                    asyncio.create_task(storm.client(client, headers)) for _ in range(N_CLIENTS)
                ]
                await storm.until("200", 300)
                await asyncio.to_thread(services.stop_postgres_immediately, pg)
                await storm.until("503", 200)  # the outage's requests, audited in the spool
                storm.stop.set()
                await asyncio.gather(*tasks)
                await asyncio.to_thread(server.kill)  # its spool file stays behind
                left = await asyncio.to_thread(spool_files, spool)
                assert left, "nothing was spooled"
                await asyncio.to_thread(services.start_postgres_again, pg)
                await asyncio.to_thread(server.start)  # replays the dead process's spool
                await wait_for_empty_spool(spool)
                response = await client.get("/v1/whoami", headers=headers)
                assert response.status_code == 200
        counts = await chain_counts(db_url)
        report = await verify(db_url)
        audited_503 = await fetch_all(
            db_url, select(func.count()).select_from(AuditEntry).where(AuditEntry.status == 503)
        )
        print(f"\n[chain, pg stop] {dict(storm.outcomes)}; rows per chain {counts}")
        assert report.ok, report.failures
        assert None not in counts, "a row without a chain"
        assert audited_503[0][0] >= storm.outcomes["503"]
        first, second = sorted(report.chains, key=lambda chain: chain.last_row_id or 0)
        # the spooled rows were written by the second process, chained into its chain
        async with database_session(db_url) as db:
            chains_of_503 = set(
                (
                    await db.scalars(
                        select(AuditEntry.chain).where(AuditEntry.status == 503).distinct()
                    )
                ).all()
            )
        assert chains_of_503 == {second.chain}, (chains_of_503, first.chain, second.chain)
