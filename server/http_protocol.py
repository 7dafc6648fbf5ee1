"""uvicorn's httptools HTTP/1.1 protocol with request read deadlines (slowloris defence).

uvicorn bounds only the idle time between requests (``timeout_keep_alive``), and resets
even that on every byte received; a client sending its headers or body one byte at a time
holds a connection, and a slot of ``limit_concurrency``, for as long as it likes.
``DeadlineHttpToolsProtocol`` adds two deadlines per request:

- headers (``PROCTOR_HTTP_HEADER_TIMEOUT_S``): armed when the connection is made, and on a
  kept-alive connection when the next request's first byte arrives; disarmed when the
  headers are complete;
- body (``PROCTOR_HTTP_BODY_TIMEOUT_S``): armed when the headers are complete, disarmed when
  the message is (a request without a body completes at once).

On expiry the connection is closed, after a ``408`` problem+json response if nothing else
is being written on it. A request line and headers longer than ``MAX_HEADER_BYTES`` are
refused the same way with ``431`` (httptools buffers them without a limit of its own),
before the application sees the request: counted twice over, as the parser hands over the
URL and each header (exact, whatever reads they came in), and as reads that hold nothing
but headers arrive (so a header dripped in over many reads is refused before it is
complete, bounding what httptools buffers).

Time the application spends on a request is not bounded here (nothing is armed between
the end of a request and the end of its response), nor is a WebSocket once upgraded. A
body the application leaves unread past uvicorn's 64 KiB buffer pauses reading, and then
counts against the body deadline too.

uvicorn instantiates the class itself (in each worker process, which imports it by name),
so the deadlines are read from ``server.config.get_settings()``, once per connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from server.api.problems import PROBLEM_JSON
from server.config import get_settings
from server.errors import problem_type

MAX_HEADER_BYTES = 64 * 1024
"""Largest request line plus headers accepted (the URL and each header's name and value as
parsed); a request's body is never counted."""

Phase = Literal["idle", "headers", "body"]
"""What the connection is waiting for from the client: nothing (between requests, or while
the application works on one), the headers of a request, or its body."""


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that closes a connection whose client takes longer than
    ``http_header_timeout_s`` to send a request's headers or ``http_body_timeout_s`` to send
    its body. Pass the class itself as ``uvicorn.run(http=...)``."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        settings = get_settings()
        self.header_timeout_s = settings.http_header_timeout_s
        self.body_timeout_s = settings.http_body_timeout_s
        self.phase: Phase = "idle"
        self.deadline: asyncio.TimerHandle | None = None
        self.header_bytes = 0
        """Bytes of reads that were headers and nothing else, since the header deadline was
        armed (see ``data_received``)."""
        self.parsed_header_bytes = 0
        """Bytes of the URL and headers the parser handed over for the current request."""
        self.refused = False
        """The current request's headers were refused (431): the parser's later callbacks
        for it start nothing."""
        self.messages_begun = 0

    # --- deadline bookkeeping ---

    def _arm(self, phase: Phase, seconds: float) -> None:
        """Wait for ``phase`` for at most ``seconds`` from now (replacing any deadline)."""
        self._disarm()
        self.phase = phase
        self.header_bytes = 0
        self.deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        """Wait for nothing: cancel the running deadline, if any."""
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.phase = "idle"

    def _start_headers(self) -> None:
        """Arm the header deadline unless a request is already being received."""
        if self.phase == "idle" and not self.transport.is_closing():
            self._arm("headers", self.header_timeout_s)

    def _expire(self) -> None:
        """The client was too slow: answer 408 if nothing else is on the wire, then close."""
        phase, self.deadline = self.phase, None
        if self.transport.is_closing():
            self._disarm()
            return
        self.logger.info("Closing a connection from %s: request %s too slow.", self.client, phase)
        seconds = self.header_timeout_s if phase == "headers" else self.body_timeout_s
        detail = f"the request's {phase} did not arrive within {seconds:g} s"
        self._close(phase, self._problem(408, "Request timeout", detail))

    def _count_header_bytes(self, *, read: int = 0, parsed: int = 0) -> None:
        """Add ``read`` bytes of header-only reads and ``parsed`` bytes of parsed URL and
        headers; past ``MAX_HEADER_BYTES`` either way, 431 and close."""
        self.header_bytes += read
        self.parsed_header_bytes += parsed
        too_large = max(self.header_bytes, self.parsed_header_bytes) > MAX_HEADER_BYTES
        if too_large and not self.refused:
            self.refused = True
            if self.transport.is_closing():
                return
            self.logger.info("Closing a connection from %s: headers too large.", self.client)
            detail = f"the request line and headers exceed {MAX_HEADER_BYTES} bytes"
            self._close("headers", self._problem(431, "Request header fields too large", detail))

    def _close(self, phase: Phase, response: bytes) -> None:
        """Close the connection, sending ``response`` first if nothing else is on the wire."""
        self._disarm()
        if self._may_respond(phase):
            self.transport.write(response)
        self.transport.close()

    def _may_respond(self, phase: Phase) -> bool:
        """True if no response is, or may yet be, written on this connection."""
        if self.pipeline:
            return False
        if self.cycle is None or self.cycle.response_complete:
            return True
        return phase == "body" and not self.cycle.response_started

    def _problem(self, status: int, title: str, detail: str) -> bytes:
        """A complete problem+json response that closes the connection."""
        body = json.dumps(
            {
                "type": problem_type(title),
                "title": title,
                "status": status,
                "detail": detail,
            }
        ).encode()
        lines = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            lines += [name, b": ", value, b"\r\n"]
        lines += [
            b"content-type: " + PROBLEM_JSON.encode() + b"\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
        return b"".join(lines)

    # --- uvicorn hooks ---

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection; its first request's headers are due within the deadline."""
        super().connection_made(transport)
        self._arm("headers", self.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline of a connection that is gone."""
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Any byte between requests starts the next request's header deadline (stray
        CRLFs, which the parser skips without beginning a message, included); a read that
        is headers and nothing else counts against ``MAX_HEADER_BYTES``."""
        self._start_headers()
        phase, begun = self.phase, self.messages_begun
        super().data_received(data)
        if phase == self.phase == "headers" and begun == self.messages_begun:
            self._count_header_bytes(read=len(data))  # the whole read was headers

    def on_message_begin(self) -> None:
        """A request begins (possibly pipelined after another in the same read)."""
        self.messages_begun += 1
        self.parsed_header_bytes = 0
        self._start_headers()
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count_header_bytes(parsed=len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._count_header_bytes(parsed=len(name) + len(value))

    def on_headers_complete(self) -> None:
        """Headers in: the body deadline replaces the header deadline (none once upgraded
        to a WebSocket, which is no longer this protocol's). Refused headers start no
        request."""
        if self.refused:
            return
        super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            self._disarm()
        else:
            self._arm("body", self.body_timeout_s)

    def on_body(self, body: bytes) -> None:
        if not self.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """The whole request is in: nothing is due from the client until the next one."""
        self._disarm()
        if not self.refused:
            super().on_message_complete()
