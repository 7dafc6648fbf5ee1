"""Benchmark: the outside review's abuse figures, measured again against ``proctor serve``.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_abuse.py [--body-mb 100] [--flood 1500] [--json FILE]

It starts ``proctor serve`` on the embedded SQLite default with the shipped limits (a
temporary data directory, a seeded world: two organisations, keys and a small bank) and
reports, each measured in this one run:

1. **Big bodies**: four concurrent unauthenticated ``--body-mb`` MB bodies to
   ``/v1/auth/token``, once with ``Content-Length`` and once chunked; the server's peak
   resident memory (``/proc/PID/status`` sampled every 20 ms) against its resting figure,
   and the statuses.
2. **Bad-token flood**: ``--flood`` requests with a bad token from one address; the
   statuses, and the audit rows they left with the requests those rows stand for.
3. **Refresh race**: 20 concurrent refreshes of one token; how many succeeded.
4. **Refresh bypass**: refresh before every request for up to 3,300 requests or 29 s with
   the limit at 1,200 per minute per key, inside one minute of the limiter's fixed windows;
   how many got through.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from server.database import upgrade
from tests.support.api import JWT_SECRET, World, live_server, login, seed_world
from tests.support.bank_keys import install_test_keyring

SAMPLE_S = 0.02
FLOODER = "127.0.0.2"
"""The flood comes from its own loopback address: past the refused-login limit that address
is refused everything, which the later phases (from 127.0.0.1) must not be."""
BIG_SENDER = "127.0.0.3"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class PeakMemory:
    """Samples a process's resident memory in a thread; ``peak`` in MiB."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_mib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(SAMPLE_S)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def chunks(total: int, size: int = 1 << 20) -> AsyncIterator[bytes]:
    block = b" " * size
    sent = 0
    while sent < total:
        yield block
        sent += size


async def big_bodies(url: str, pid: int, body_bytes: int) -> dict[str, Any]:
    resting = rss_mib(pid)
    out: dict[str, Any] = {"resting_mib": round(resting, 1)}
    transport = httpx.AsyncHTTPTransport(local_address=BIG_SENDER)
    async with httpx.AsyncClient(base_url=url, timeout=60, transport=transport) as client:
        for kind in ("content_length", "chunked"):

            async def one(kind: str = kind) -> str:
                headers = {"content-type": "application/json"}
                try:
                    if kind == "content_length":
                        body: Any = b" " * body_bytes
                    else:
                        body = chunks(body_bytes)
                    reply = await client.post("/v1/auth/token", content=body, headers=headers)
                    return str(reply.status_code)
                except httpx.TransportError as error:
                    return type(error).__name__

            with PeakMemory(pid) as memory:
                statuses = await asyncio.gather(*(one() for _ in range(4)))
            out[kind] = {
                "statuses": dict(Counter(statuses)),
                "peak_mib": round(memory.peak, 1),
                "growth_mib": round(memory.peak - resting, 1),
            }
    return out


def audit_of(db: Path, route: str) -> tuple[int, int]:
    """(audit rows, requests they stand for) of ``route``."""
    with sqlite3.connect(db) as connection:
        rows, requests = connection.execute(
            "SELECT count(*), coalesce(sum(repeats), 0) FROM audit_log WHERE route = ?",
            (route,),
        ).fetchone()
    return int(rows), int(requests)


async def flood(url: str, n: int) -> dict[str, Any]:
    statuses: Counter[int] = Counter()
    transport = httpx.AsyncHTTPTransport(local_address=FLOODER)
    async with httpx.AsyncClient(base_url=url, timeout=30, transport=transport) as client:
        bad = {"Authorization": "Bearer not-a-token"}
        started = time.perf_counter()
        for _ in range(n):
            statuses[(await client.get("/v1/models", headers=bad)).status_code] += 1
        elapsed = time.perf_counter() - started
    return {"requests": n, "statuses": dict(statuses), "seconds": round(elapsed, 1)}


async def refresh_race(url: str, key: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = await login(client, key)
        replies = await asyncio.gather(
            *(client.post("/v1/auth/refresh", headers=headers) for _ in range(20))
        )
    return {"refreshes": 20, "succeeded": sum(r.status_code == 200 for r in replies)}


async def refresh_bypass(url: str, key: str, limit_s: float = 29.0) -> dict[str, Any]:
    """Within one fixed window of the limiter (the run starts just after a minute begins:
    across a boundary a fixed window lets up to twice the limit through)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = await login(client, key)
        await asyncio.sleep(60 - time.time() % 60 + 0.1)
        got_through = 0
        statuses: Counter[int] = Counter()
        started = time.perf_counter()
        for _ in range(3300):
            if time.perf_counter() - started > limit_s:
                break
            renewed = await client.post("/v1/auth/refresh", headers=headers)
            statuses[renewed.status_code] += 1
            if renewed.status_code == 200:
                headers = {"Authorization": f"Bearer {renewed.json()['access_token']}"}
            reply = await client.get("/v1/whoami", headers=headers)
            statuses[reply.status_code] += 1
            got_through += renewed.status_code == 200
            got_through += reply.status_code == 200
            if reply.status_code == 429 and renewed.status_code == 429:
                break
    return {
        "limit_per_minute": 1200,
        "accepted": got_through,
        "statuses": dict(statuses),
        "seconds": round(time.perf_counter() - started, 1),
    }


async def seeded(db: Path) -> World:
    url = f"sqlite+aiosqlite:///{db}"
    upgrade(url)
    return await seed_world(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--body-mb", type=int, default=100)
    parser.add_argument("--flood", type=int, default=1500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    install_test_keyring()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        db = data_dir / "proctor.db"
        world = asyncio.run(seeded(db))
        env = {"PROCTOR_DATA_DIR": str(data_dir), "PROCTOR_JWT_SECRET": JWT_SECRET}
        with live_server(env, data_dir) as server:
            assert server.process is not None
            pid = server.process.pid
            results: dict[str, Any] = {}
            results["big_bodies"] = asyncio.run(
                big_bodies(server.url, pid, args.body_mb * 1024 * 1024)
            )
            results["flood"] = asyncio.run(flood(server.url, args.flood))
            results["refresh_race"] = asyncio.run(refresh_race(server.url, world.a.keys["vendor"]))
            results["refresh_bypass"] = asyncio.run(
                refresh_bypass(server.url, world.a.keys["evaluator"])
            )
        # the server has stopped: its folded refusals are flushed
        rows, requests = audit_of(db, "/v1/models")  # only the flood used this route
        results["flood"]["audit_rows"] = rows
        results["flood"]["audit_requests"] = requests
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
