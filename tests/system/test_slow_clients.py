"""``proctor serve`` cuts off clients that send a request too slowly (slowloris).

A real server process on the embedded SQLite default with 2 s header and body deadlines;
raw sockets trickle requests one byte every 0.3 s. Every wait is bounded in time and in
iterations, so a server that never closes fails the test instead of hanging it.
"""

from __future__ import annotations

import http.client
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from server.http_protocol import MAX_HEADER_BYTES
from tests.support.api import JWT_SECRET, LiveServer, live_server

HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
MARGIN_S = 1.5
"""Slack on a deadline: event-loop latency, one trickle interval, a loaded machine."""
TICK_S = 0.3
SLOW_HEADERS = b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n"
"""Never finished: the blank line that would end the headers is not in it."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``proctor serve`` with 2 s read deadlines (keep-alive follows: 2 s too)."""
    workdir = tmp_path_factory.mktemp("slow-clients")
    env = {
        "PROCTOR_DATA_DIR": str(workdir / "data"),
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_HTTP_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "PROCTOR_HTTP_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
    }
    with live_server(env, workdir) as running:
        try:
            yield running
        except BaseException:
            print(f"--- {running.log} (tail) ---\n{running.log.read_text()[-4000:]}")
            raise


@dataclass
class Trickler:
    """One raw connection sending ``payload`` a byte per tick, until the server closes it."""

    sock: socket.socket
    payload: bytes
    started: float
    sent: int = 0
    received: bytes = b""
    closed_after: float | None = None
    """Seconds from ``started`` to the server's close (EOF or reset); None while open."""

    def send_next(self, now: float) -> None:
        if self.closed_after is not None or self.sent >= len(self.payload):
            return
        try:
            self.sock.send(self.payload[self.sent : self.sent + 1])
            self.sent += 1
        except OSError:  # reset or broken pipe: the server closed it
            self.closed_after = now - self.started

    def read(self, now: float) -> None:
        try:
            chunk = self.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.received += chunk
        if not chunk:
            self.closed_after = now - self.started


def connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def trickle(tricklers: list[Trickler], *, limit_s: float, midway: float | None = None) -> float:
    """Send a byte per tick on every open connection and read whatever comes back, for at
    most ``limit_s`` (and ``limit_s / 0.05`` polls); returns when all are closed. If
    ``midway`` is set, returns early at that many seconds instead (to act mid-attack)."""
    start = min(t.started for t in tricklers)
    next_tick = time.monotonic()
    for _ in range(int(limit_s / 0.05) + len(tricklers) * 50):
        now = time.monotonic()
        open_ = [t for t in tricklers if t.closed_after is None]
        if not open_ or now - start > limit_s or (midway is not None and now - start > midway):
            break
        if now >= next_tick:
            for t in open_:
                t.send_next(now)
            next_tick += TICK_S
        readable, _, _ = select.select([t.sock for t in open_], [], [], 0.05)
        for t in open_:
            if t.sock in readable:
                t.read(time.monotonic())
    return time.monotonic() - start


def trickle_until_closed(sock: socket.socket, data: bytes, *, limit_s: float) -> Trickler:
    """Trickle ``data`` on the connected ``sock`` (see ``trickle``) and close it afterwards;
    the ``Trickler`` with what was sent, received and when the server closed."""
    sock.setblocking(False)
    trickler = Trickler(sock, data, time.monotonic())
    try:
        trickle([trickler], limit_s=limit_s)
    finally:
        sock.close()
    return trickler


def close_all(tricklers: list[Trickler]) -> None:
    for t in tricklers:
        t.sock.close()


def is_408(received: bytes) -> bool:
    return received.startswith(b"HTTP/1.1 408 ")


def test_slow_headers_are_cut_off_and_others_are_still_served(server: LiveServer) -> None:
    tricklers = []
    for _ in range(10):
        sock = connect(server)
        sock.setblocking(False)
        tricklers.append(Trickler(sock, SLOW_HEADERS, time.monotonic()))
    try:
        trickle(tricklers, limit_s=HEADER_TIMEOUT_S + MARGIN_S, midway=HEADER_TIMEOUT_S / 2)
        assert all(t.closed_after is None for t in tricklers), "closed before the deadline"
        assert all(0 < t.sent < len(SLOW_HEADERS) for t in tricklers)
        # mid-attack, a client that sends its request at once is served on a fresh connection
        normal = httpx.get(server.url + "/openapi.json", timeout=5.0)
        assert normal.status_code == 200
        trickle(tricklers, limit_s=HEADER_TIMEOUT_S + MARGIN_S)
    finally:
        close_all(tricklers)

    times = sorted(t.closed_after or float("inf") for t in tricklers)
    print(f"header deadline {HEADER_TIMEOUT_S} s: closed after {[round(x, 2) for x in times]} s")
    assert all(HEADER_TIMEOUT_S - 0.1 <= x <= HEADER_TIMEOUT_S + MARGIN_S for x in times), times
    assert all(not t.received or is_408(t.received) for t in tricklers)
    assert any(is_408(t.received) for t in tricklers), "no 408 response before the close"


def test_slow_body_is_cut_off_after_the_body_deadline(server: LiveServer) -> None:
    sock = connect(server)
    head = (
        b"POST /v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    sock.sendall(head)
    body = trickle_until_closed(
        sock, b'{"api_key": "' + b"k" * 984 + b'"}', limit_s=BODY_TIMEOUT_S + MARGIN_S
    )

    print(f"body deadline {BODY_TIMEOUT_S} s: closed after {body.closed_after} s, {body.sent} B")
    assert body.closed_after is not None, "a trickled body was never cut off"
    assert BODY_TIMEOUT_S - 0.1 <= body.closed_after <= BODY_TIMEOUT_S + MARGIN_S
    assert body.sent < 1000
    assert is_408(body.received), body.received[:200]
    assert b"application/problem+json" in body.received


def test_stray_bytes_between_requests_do_not_hold_a_connection(server: LiveServer) -> None:
    """After a response, CRLFs (which begin no request) trickled forever are cut off too."""
    sock = connect(server)
    sock.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n")
    response = read_response(sock)
    assert response.startswith(b"HTTP/1.1 401 "), response[:200]
    stray = trickle_until_closed(sock, b"\r\n" * 100, limit_s=HEADER_TIMEOUT_S + MARGIN_S)

    print(f"stray CRLFs: closed after {stray.closed_after} s, {stray.sent} B")
    assert stray.closed_after is not None, "stray bytes held the connection open"
    assert stray.closed_after <= HEADER_TIMEOUT_S + MARGIN_S


def send_in_pieces(sock: socket.socket, data: bytes, piece: int) -> tuple[int, bytes]:
    """Send ``data`` ``piece`` bytes at a time until it is all sent or the server answers or
    closes; returns the bytes sent and the answer (b'' if closed without one)."""
    sent = 0
    for _ in range(len(data) // piece + 1):
        if select.select([sock], [], [], 0.01)[0] or sent >= len(data):
            break
        try:
            sock.sendall(data[sent : sent + piece])
        except OSError:
            break
        sent += piece
    try:
        return sent, read_response(sock)
    except OSError:
        return sent, b""


def test_headers_past_the_size_cap_are_refused(server: LiveServer) -> None:
    """A header longer than ``MAX_HEADER_BYTES`` is answered 431 long before it ends, while
    one just under the cap, sent in small pieces, is served."""
    request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nX-Pad: "
    with connect(server) as sock:
        fits = request + b"a" * (MAX_HEADER_BYTES - len(request) - 100) + b"\r\n\r\n"
        sent, answer = send_in_pieces(sock, fits, 4096)
        assert sent >= len(fits)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    with connect(server) as sock:
        started = time.monotonic()
        sent, answer = send_in_pieces(sock, request + b"a" * 8 * 2**20, 16384)
        elapsed = time.monotonic() - started
    print(f"header size cap: refused after {sent} B sent, in {elapsed:.2f} s")
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert sent <= MAX_HEADER_BYTES + 512 * 1024
    assert elapsed < HEADER_TIMEOUT_S


def test_headers_completed_in_two_reads_are_counted_too(server: LiveServer) -> None:
    """The read a request begins in and the read that completes its headers count as
    well: a 70 KB header and a 467 KB token, each sent in two writes a moment apart, are
    refused with 431 and never reach the application (no 401 for the token). A body, even
    in the same write as its headers, is never counted."""
    for pad in (70_000, 467_000):
        head = b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        request = head + b"a" * pad + b"\r\n\r\n"
        half = len(request) // 2
        with connect(server) as sock:
            sock.sendall(request[:half])
            time.sleep(0.2)  # the server reads the first half on its own
            sent, answer = send_in_pieces(sock, request[half:], len(request))
        assert answer.startswith(b"HTTP/1.1 431 "), (pad, sent, answer[:200])
    body = b'{"api_key": "' + b"k" * 200_000 + b'"}'
    post = (
        b"POST /v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with connect(server) as sock:
        sock.sendall(post)
        answer = read_response(sock)
    assert not answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert answer.startswith(b"HTTP/1.1 4"), answer[:200]  # the body's own refusal


def read_response(sock: socket.socket) -> bytes:
    """One response whose headers end within 64 KiB (bounded reads, 5 s socket timeout)."""
    data = b""
    for _ in range(64):
        data += sock.recv(65536)
        if b"\r\n\r\n" in data:
            break
    return data


def test_a_kept_alive_connection_outlives_the_deadlines(server: LiveServer) -> None:
    """Prompt requests on one connection, the last one later than both deadlines together
    after the connection was made; each gap is within the keep-alive time."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    requests = [
        ("GET", "/openapi.json", None),
        ("POST", "/v1/auth/token", b'{"api_key": "not-a-key"}'),
        ("GET", "/openapi.json", None),
        ("POST", "/v1/auth/token", b'{"api_key": "not-a-key"}'),
    ]
    statuses, ports = [], []
    started = time.monotonic()
    try:
        for i, (method, path, body) in enumerate(requests):
            if i:
                time.sleep(HEADER_TIMEOUT_S * 0.75)
            headers = {"Content-Type": "application/json"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
            assert conn.sock is not None
            ports.append(conn.sock.getsockname()[1])
        lifetime = time.monotonic() - started
    finally:
        conn.close()

    assert lifetime > HEADER_TIMEOUT_S + BODY_TIMEOUT_S
    assert statuses == [200, 401, 200, 401]
    assert len(set(ports)) == 1, "the connection was not kept alive"
