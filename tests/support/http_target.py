"""A minimal HTTP/1.1 server on 127.0.0.1 that counts its connections: the far end of
tests that must show a request never left (the egress guard)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest


@dataclass
class Target:
    """A minimal HTTP/1.1 server: answers ``reply`` (bytes after the status line's
    headers) and counts the connections it accepted."""

    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    reply: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(head)
        writer.write(self.reply)
        await writer.drain()
        writer.close()


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    found = Target()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    async with server:
        yield found
