"""``proctor serve`` as real processes on PostgreSQL: metrics added up over several workers,
and a request in flight at SIGTERM answered, not reset."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.api import JWT_SECRET, World
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.serving import serving
from tests.support.sessions import drive_session

from .scrape import METRICS_TOKEN, Samples, bearer, parse, total

pytestmark = [pytest.mark.postgres]
METRICS_DIR_PREFIX = "proctor-metrics-"


def serve_env(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        PROCTOR_DATABASE_URL=db_url,
        PROCTOR_JWT_SECRET=JWT_SECRET,
        PROCTOR_BANK_KEYS=TEST_BANK_KEYS,
        PROCTOR_METRICS_TOKEN=METRICS_TOKEN,
        PROCTOR_RATE_LIMIT_PER_MINUTE="100000",
        PROCTOR_AUTH_FAILURES_PER_MINUTE="100000",
    )
    env.update(extra)
    return env


def fresh_request(method: str, url: str, **kwargs: object) -> httpx.Response:
    """One request on a new connection, so that any worker process may take it."""
    with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as client:
        return client.request(method, url, timeout=10, **kwargs)  # type: ignore[arg-type]


def scrape_once(url: str) -> Samples:
    response = fresh_request("GET", url + "/metrics", headers=bearer(METRICS_TOKEN))
    assert response.status_code == 200, response.text
    return parse(response.text)


def metrics_dirs(tmpdir: Path) -> set[Path]:
    return set(tmpdir.glob(METRICS_DIR_PREFIX + "*"))


async def test_two_workers_add_up_in_one_scrape(
    pg_world_db: tuple[str, World], tmp_path: Path
) -> None:
    db_url, world = pg_world_db
    # its own temporary directory: another test's `proctor serve` may be making one beside it
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    n_probes, n_items = 40, 4
    env = serve_env(db_url, TMPDIR=str(tmpdir))
    with serving(env, tmp_path / "serve.log", "--workers", "2") as (url, proc):
        made = metrics_dirs(tmpdir)
        assert len(made) == 1, made  # the workers' directory, made by proctor serve
        (directory,) = made
        for _ in range(n_probes):
            assert fresh_request("GET", url + "/healthz").status_code == 200
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=10) as client:
            await drive_session(client, db_url, world, n_items=n_items)
        pids = {path.name.rsplit("_", 1)[-1] for path in directory.glob("counter_*.db")}
        assert len(pids) == 2, pids  # both workers counted something
        # whichever worker answers a scrape, it reports what both counted
        for _ in range(6):
            samples = scrape_once(url)
            healthz = total(samples, "proctor_http_requests_total", route="/healthz")
            assert healthz >= n_probes + 1  # + the start-up poll
            assert total(samples, "proctor_items_delivered_total") == n_items
            assert total(samples, "proctor_answers_total") == n_items
            assert (
                total(samples, "proctor_sessions", state="answered")
                + total(samples, "proctor_sessions", state="scored")
                == 1
            )
            assert total(samples, "proctor_db_up") == 1
            assert ("proctor_db_pool_checked_out", frozenset()) in samples
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert not directory.exists()  # removed once the workers are gone


async def test_a_request_in_flight_at_sigterm_is_answered(
    pg_world_db: tuple[str, World], tmp_path: Path
) -> None:
    db_url, _ = pg_world_db
    body = json.dumps({"api_key": "pk_" + "q" * 40}).encode()
    head = (
        b"POST /v1/auth/token HTTP/1.1\r\nHost: proctor.test\r\n"
        b"Content-Type: application/json\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    env = serve_env(db_url, PROCTOR_SHUTDOWN_GRACE_S="20")
    with serving(env, tmp_path / "serve.log") as (url, proc):
        port = int(url.rsplit(":", 1)[1])
        reply = await asyncio.to_thread(across_sigterm, proc, port, head, body)
        # uvicorn finishes its graceful shutdown, then dies of the signal it caught
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
    status_line = reply.split(b"\r\n", 1)[0]
    assert status_line == b"HTTP/1.1 401 Unauthorized", reply[:300]
    assert b"x-request-id" in reply.lower()


def across_sigterm(proc: subprocess.Popen[bytes], port: int, head: bytes, body: bytes) -> bytes:
    """Start a request, SIGTERM the server, then finish the request; the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head + body[:10])  # the request has started; its body has not come
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        wait_until_refused(port)  # the server is shutting down: no new connections
        conn.sendall(body[10:])
        return read_response(conn)


def wait_until_refused(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError("the server kept accepting connections after SIGTERM")


def read_response(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)
