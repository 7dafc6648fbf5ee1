"""Serve an ASGI app with uvicorn from a background thread (the demo and tests).

Real HTTP on 127.0.0.1 without a subprocess: the app gets its own event loop in its own
thread, so synchronous callers and other event loops talk to it over the network.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn


@contextmanager
def serve_in_thread(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    lifespan: Literal["on", "off", "auto"] = "off",
    start_timeout_s: float = 60.0,
) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its root URL (``http://host:port``).

    ``port`` 0 picks a free port. RuntimeError if the server does not start in time (its
    lifespan failed, or the port is taken)."""
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan=lifespan)
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn:{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"the server on {host}:{port} did not start")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1] if port == 0 else port
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
