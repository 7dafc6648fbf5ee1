"""A real local OpenAI-compatible server for tests: ``fakellm`` under uvicorn on 127.0.0.1.

``running_fake_llm(config)`` serves ``fakellm.app.create_app(config)`` from a background
thread with its own event loop, and yields a ``FakeLlm`` with the base URL (``.../v1``) and
access to the server's counters. Our judge client talks to it over real HTTP.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from fakellm.app import ServerConfig, create_app
from tests.services import free_port


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
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config or ServerConfig()),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, name=f"fake-llm:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake LLM server did not start")
        time.sleep(0.01)
    root = f"http://127.0.0.1:{port}"
    try:
        yield FakeLlm(base_url=f"{root}/v1", root=root)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
