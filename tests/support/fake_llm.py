"""A real local OpenAI-compatible server for tests: ``fakellm`` under uvicorn on 127.0.0.1.

``running_fake_llm(config)`` serves ``fakellm.app.create_app(config)`` from a background
thread with its own event loop, and yields a ``FakeLlm`` with the base URL (``.../v1``) and
access to the server's counters. Our judge client talks to it over real HTTP.

``start_fake_llm_process(cmd, workdir)`` runs it as its own process instead (benchmarks:
its CPU is then not the caller's) and returns a ``FakeLlmProcess``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fakellm.app import ServerConfig, create_app
from server.threaded import serve_in_thread
from tests.support.cpu_time import process_cpu_s
from tests.support.ports import free_port


@dataclass
class FakeLlm:
    base_url: str
    """``http://127.0.0.1:PORT/v1``"""
    root: str

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = httpx.get(f"{self.root}/stats", timeout=5).json()
        return result

    def reset(self) -> None:
        httpx.post(f"{self.root}/stats/reset", timeout=5)


@contextmanager
def running_fake_llm(config: ServerConfig | None = None) -> Iterator[FakeLlm]:
    """Serve the fake provider until the block ends."""
    with serve_in_thread(create_app(config or ServerConfig())) as root:
        yield FakeLlm(base_url=f"{root}/v1", root=root)


@dataclass
class FakeLlmProcess:
    """``proctor fake-llm serve`` running as a subprocess on ``root``."""

    proc: subprocess.Popen[bytes]
    root: str
    log: Path
    _before_reset: int = 0

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = httpx.get(f"{self.root}/stats", timeout=10).json()
        return result

    def reset(self) -> None:
        self._before_reset += int(self.stats()["requests"])
        httpx.post(f"{self.root}/stats/reset", timeout=10).raise_for_status()

    def draws_made(self) -> int:
        """Chat requests served since the start, resets included (each drew the dice once)."""
        return self._before_reset + int(self.stats()["requests"])

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the process has used so far."""
        return process_cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start_fake_llm_process(
    cmd: list[str], workdir: Path, *, timeout_s: float = 30.0
) -> FakeLlmProcess:
    """Run ``cmd`` (a ``fake-llm serve`` command line without ``--port``) on a free port,
    logging to ``workdir``; return once ``/stats`` answers. RuntimeError with the log's tail
    if the process exits or does not answer within ``timeout_s``."""
    port = free_port()
    log = workdir / f"fake-llm-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    fake = FakeLlmProcess(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"fake-llm exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            fake.stats()
            return fake
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                fake.stop()
                raise RuntimeError(
                    f"fake-llm did not answer on port {port}: {log.read_text()[-2000:]}"
                ) from None
            time.sleep(0.05)
