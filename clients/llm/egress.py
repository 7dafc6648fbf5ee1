"""Calls to addresses someone else chose: the guard against server-side request forgery.

When the server calls a URL a vendor gave it (a model's endpoint), the URL may point at
the server's own network: a database on 127.0.0.1, a metadata service on 169.254.169.254,
an admin port on a private address. :class:`GuardedTransport` is an httpx transport that
refuses such addresses by default and lets an operator allow hosts or networks by name.

How it decides, and why there:

* **At connect time, on the address connected to.** The check sits in the connection
  pool's network backend (``connect_tcp``): the host name is resolved once, every
  resolved address is checked, and the socket is opened to that checked address (the
  TLS server name stays the host's). A name that resolves to a public address when
  checked and to 127.0.0.1 a moment later (DNS rebinding) cannot slip through: there is
  no moment between the check and the connect for it to change.
* **After resolution.** ``127.1``, ``2130706433``, ``0x7f.0.0.1`` and ``0177.0.0.1`` are
  all 127.0.0.1 once resolved; checking the address, not the spelling, covers every form.
* **Every hop.** A redirect is a new request through the same transport, so a 302 to a
  private address is refused like a first request to it.
* **What is refused:** every address that is not globally routable
  (``ipaddress``'s ``is_global``: loopback, private, link-local and the metadata
  address, shared address space, unspecified, reserved, documentation ranges), every
  multicast address, and IPv6 forms that carry such an IPv4 address (mapped, 6to4,
  Teredo).
* **What an operator may allow** (:class:`EgressPolicy`): networks (``127.0.0.1/32``,
  ``10.0.0.0/8``) and host names (their resolved addresses are then not checked); an
  egress proxy, which is then the one address connected to (and allowed).
* **Limits:** a response body larger than ``max_response_bytes`` is cut off with
  :class:`EgressResponseTooLarge`; time limits are httpx's timeouts, set by the caller.

The transport replaces the network backend of httpx's own pool (``AsyncHTTPTransport``),
so everything else (HTTP/1.1, keep-alive, proxies, TLS) is httpx's; httpcore offers the
network backend as its extension point for exactly this.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "EgressError",
    "EgressPolicy",
    "EgressRefused",
    "EgressResponseTooLarge",
    "GuardedTransport",
    "Resolver",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: how a host name becomes addresses to connect to."""

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""The largest response body read from an endpoint (a chat completion is kilobytes)."""


class EgressError(Exception):
    """Base of the guard's refusals (not an ``httpx.TransportError``: retrying cannot
    help, so a caller's retry loop must not retry it)."""


class EgressRefused(EgressError):
    """The guard refused to connect to ``host`` (``reason`` says why)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"refused to connect to {host!r}: {reason}")
        self.host = host
        self.reason = reason


class EgressResponseTooLarge(EgressError):
    """A response body went past ``limit`` bytes; the rest was not read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response body is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Which addresses may be connected to besides globally routable ones."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    """Host names connected to whatever they resolve to (lower case, no trailing dot)."""

    @classmethod
    def allowing(cls, entries: Iterable[str]) -> EgressPolicy:
        """A policy from an operator's list: each entry an address, a network in CIDR
        form, or a host name. ``ValueError`` names an entry that is none of these."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in entries:
            text = entry.strip()
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                if not _is_host_name(text):
                    raise ValueError(
                        f"not an address, a network or a host name: {entry!r}"
                    ) from None
                hosts.add(text.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def refusal(self, address: str) -> str | None:
        """Why ``address`` (an IP address as text) may not be connected to, or None."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{address!r} is not an IP address"
        if any(ip in network for network in self.allowed_networks):
            return None
        for carried in _carried(ip):
            if carried.is_multicast:
                return f"{carried} is a multicast address"
            if not carried.is_global:
                return f"{carried} is not a public address (loopback, private or reserved)"
        return None

    def allows_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.allowed_hosts


def _carried(ip: IPAddress) -> list[IPAddress]:
    """``ip`` and any IPv4 address an IPv6 form carries (mapped, 6to4, Teredo)."""
    found: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        found += [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if ip.teredo is not None:
            found += list(ip.teredo)
    return found


def _is_host_name(text: str) -> bool:
    labels = text.rstrip(".").split(".")
    return (
        bool(text)
        and len(text) <= 253
        and all(
            0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
            for label in labels
        )
    )


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The operating system's resolution of ``host`` (numeric forms included)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the check in ``connect_tcp``."""

    def __init__(
        self, policy: EgressPolicy, resolve: Resolver, inner: httpcore.AsyncNetworkBackend
    ) -> None:
        self._policy = policy
        self._resolve = resolve
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = host
        if not self._policy.allows_host(host):
            address = await self._checked_address(host, port, within_s=timeout)
        return await self._inner.connect_tcp(
            address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def _checked_address(self, host: str, port: int, within_s: float | None) -> str:
        """The first resolved address of ``host``, if no resolved address is refused."""
        try:
            async with asyncio.timeout(within_s):
                addresses = await self._resolve(host, port)
        except (OSError, TimeoutError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"{host!r} resolves to no address")
        for address in addresses:
            reason = self._policy.refusal(address)
            if reason is not None:
                raise _Refusal(host, reason)
        return addresses[0]

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise _Refusal(path, "Unix sockets are never connected to")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _Refusal(httpcore.ConnectError):
    """Raised inside httpcore; :class:`GuardedTransport` turns it into EgressRefused."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(reason)
        self.host = host
        self.reason = reason


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that connects only where ``policy`` allows (see the module
    docstring) and reads at most ``max_response_bytes`` of a body. ``resolve`` replaces
    the system's resolver (tests); ``proxy`` sends every request through an egress proxy
    the operator runs (then the proxy is the only address connected to)."""

    def __init__(
        self,
        policy: EgressPolicy | None = None,
        *,
        resolve: Resolver = system_resolver,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        proxy: str | None = None,
        inner_backend: httpcore.AsyncNetworkBackend | None = None,
        **transport_options: Any,
    ) -> None:
        policy = policy or EgressPolicy()
        if proxy is not None:
            proxy_host = httpx.URL(proxy).host
            policy = EgressPolicy(
                policy.allowed_networks, policy.allowed_hosts | {proxy_host.lower()}
            )
        self._http = httpx.AsyncHTTPTransport(proxy=proxy, **transport_options)
        backend = _GuardedBackend(policy, resolve, inner_backend or httpcore.AnyIOBackend())
        # httpcore's documented extension point; httpx builds the pool without a way to
        # pass it, so it is set on the pool httpx built.
        self._http._pool._network_backend = backend
        self._max = max_response_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._http.handle_async_request(request)
        except httpx.ConnectError as exc:
            refusal = exc.__cause__
            if isinstance(refusal, _Refusal):
                raise EgressRefused(refusal.host, refusal.reason) from None
            raise
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _Limited(response.stream, self._max)
        return response

    async def aclose(self) -> None:
        await self._http.aclose()


class _Limited(httpx.AsyncByteStream):
    """A response body cut off past ``limit`` bytes."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise EgressResponseTooLarge(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
