"""``proctor serve`` as a real process group, for tests that need its worker processes.

``serving`` starts ``python -m server serve --port PORT ARGS`` in a session of its own, waits
until it answers ``/healthz``, and at the end stops the whole group: the master and the
uvicorn workers it spawned, so that a test killing the master never leaves orphaned workers
holding database connections for the rest of the run. ``serve_command`` and ``wait_ready``
are shared with ``tests.support.api.LiveServer`` (one process it kills and restarts).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from tests.support.paths import REPO_ROOT
from tests.support.ports import free_port

READY_WITHIN_S = 60.0
STOP_WITHIN_S = 20.0


@contextmanager
def serving(
    env: dict[str, str], log: Path, *args: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``proctor serve ARGS`` on a free port, once it answers ``/healthz``: its base URL and
    master process. Its output goes to ``log``; start-up failures raise with the log's tail."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            serve_command(port, *args),
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, log)
        yield url, proc
    finally:
        _stop_group(proc)


def serve_command(port: int, *args: str) -> list[str]:
    """The command line of ``proctor serve`` on ``port`` with ``args``, in this interpreter."""
    return [sys.executable, "-m", "server", "serve", "--port", str(port), *args]


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], log: Path, within: float = READY_WITHIN_S
) -> None:
    """Return once ``url`` answers ``/healthz`` with 200; raise with the tail of ``log`` if
    ``proc`` exits first or ``within`` seconds pass."""
    deadline = time.monotonic() + within
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"proctor serve exited: {log.read_text()[-3000:]}")
        with suppress(httpx.TransportError):
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"proctor serve did not start: {log.read_text()[-3000:]}")
        time.sleep(0.1)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole group (a test that wants a graceful stop signals the master itself
    first), then reap the master."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=STOP_WITHIN_S)
