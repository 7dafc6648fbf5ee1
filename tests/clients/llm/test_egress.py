"""The guard against server-side request forgery, attacked: every address form that
reaches the server's own network is refused before a connection is made, across
redirects and DNS rebinding; what an operator allows goes through; bodies are bounded.

The target is a real HTTP server on 127.0.0.1 that counts its connections, so "refused"
is checked at the far end too: the server saw nothing."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import pytest

from clients.llm.chat import ChatClient, ChatEndpoint
from clients.llm.egress import (
    EgressPolicy,
    EgressRefused,
    EgressResponseTooLarge,
    GuardedTransport,
)
from tests.support.http_target import Target

LOOPBACK_ONLY = EgressPolicy.allowing(["127.0.0.1/32"])


def client(policy: EgressPolicy | None = None, **options: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=GuardedTransport(policy, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # the cloud metadata service
        "100.64.0.1",  # shared address space
        "0.0.0.0",
        "192.0.2.1",  # documentation
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fe80::1%eth0",
        "fc00::1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo (carries a private client)
        "ff02::1",
    ],
)
def test_addresses_of_the_servers_own_network_are_refused(address: str) -> None:
    assert EgressPolicy().refusal(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert EgressPolicy().refusal(address) is None


def test_an_operator_allows_networks_and_hosts_by_name_and_bad_entries_are_named() -> None:
    policy = EgressPolicy.allowing(["10.0.0.0/8", "127.0.0.1", "Models.Internal."])
    assert policy.refusal("10.20.30.40") is None and policy.refusal("127.0.0.1") is None
    assert policy.refusal("127.0.0.2") is not None and policy.refusal("192.168.0.1") is not None
    assert policy.allows_host("models.internal") and not policy.allows_host("internal")
    with pytest.raises(ValueError, match="'not a host!'"):
        EgressPolicy.allowing(["not a host!"])


@pytest.mark.parametrize(
    ("url", "refused_by"),
    [
        ("http://127.0.0.1:{port}/", EgressRefused),
        ("http://localhost:{port}/", EgressRefused),
        ("http://[::1]:{port}/", EgressRefused),
        ("http://127.1:{port}/", EgressRefused),  # short form
        ("http://2130706433:{port}/", EgressRefused),  # decimal
        ("http://0x7f000001:{port}/", EgressRefused),  # hexadecimal
        ("http://0x7f.0.0.1:{port}/", EgressRefused),
        ("http://[::ffff:127.0.0.1]:{port}/", EgressRefused),
        ("http://0177.0.0.1:{port}/", httpx.InvalidURL),  # octal: httpx refuses the URL
    ],
)
async def test_every_spelling_of_loopback_is_refused_before_connecting(
    target: Target, url: str, refused_by: type[Exception]
) -> None:
    async with client() as http:
        with pytest.raises(refused_by):
            await http.get(url.format(port=target.port))
    assert target.connections == 0


async def test_an_allowed_network_is_reached(target: Target) -> None:
    async with client(LOOPBACK_ONLY) as http:
        response = await http.get(f"http://127.0.0.1:{target.port}/x")
    assert response.status_code == 200 and response.text == "ok" and target.connections == 1


async def test_a_redirect_to_a_private_address_is_refused(target: Target) -> None:
    target.reply = (
        b"HTTP/1.1 302 Found\r\nLocation: http://10.1.2.3:8080/internal\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    async with httpx.AsyncClient(
        transport=GuardedTransport(LOOPBACK_ONLY), follow_redirects=True
    ) as http:
        with pytest.raises(EgressRefused) as refused:
            await http.get(f"http://127.0.0.1:{target.port}/start")
    assert refused.value.host == "10.1.2.3" and "not a public address" in refused.value.reason
    assert target.connections == 1  # the first hop only


async def test_dns_rebinding_cannot_change_the_address_between_check_and_connect(
    target: Target,
) -> None:
    """The name resolves to an allowed address, then to a private one. Each connection
    resolves once and connects to the address it checked: the first reaches the allowed
    server (under the name: the Host header), the second is refused."""
    answers = [["127.0.0.1"], ["10.9.9.9"]]

    async def rebinding(host: str, port: int) -> Sequence[str]:
        assert host == "rebind.test"
        return answers.pop(0)

    async with client(LOOPBACK_ONLY, resolve=rebinding) as http:
        first = await http.get(f"http://rebind.test:{target.port}/")
        with pytest.raises(EgressRefused, match=r"10\.9\.9\.9"):
            await http.get(f"http://rebind.test:{target.port}/")
    assert first.status_code == 200 and target.connections == 1
    assert b"host: rebind.test" in target.requests[0].lower()


async def test_a_name_with_one_private_address_among_public_ones_is_refused(
    target: Target,
) -> None:
    async def mixed(host: str, port: int) -> Sequence[str]:
        return ["93.184.216.34", "127.0.0.1"]

    async with client(resolve=mixed) as http:
        with pytest.raises(EgressRefused, match=r"127\.0\.0\.1"):
            await http.get(f"http://mixed.test:{target.port}/")
    assert target.connections == 0


async def test_a_host_the_operator_allows_by_name_is_not_checked(target: Target) -> None:
    async with client(EgressPolicy.allowing(["localhost"])) as http:
        response = await http.get(f"http://localhost:{target.port}/")
    assert response.status_code == 200


async def test_a_body_past_the_limit_is_cut_off(target: Target) -> None:
    body = b"x" * 300_000
    target.reply = (
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    )
    async with client(LOOPBACK_ONLY, max_response_bytes=100_000) as http:
        with pytest.raises(EgressResponseTooLarge):
            await http.get(f"http://127.0.0.1:{target.port}/")
    async with client(LOOPBACK_ONLY, max_response_bytes=400_000) as http:
        assert len((await http.get(f"http://127.0.0.1:{target.port}/")).content) == len(body)


async def test_the_chat_client_does_not_retry_a_refused_address(target: Target) -> None:
    """A refusal is no transport error: the chat client's retry loop passes it on at once."""
    endpoint = ChatEndpoint(base_url=f"http://127.0.0.1:{target.port}/v1", model="m")
    chat = ChatClient(endpoint, transport=GuardedTransport())
    try:
        with pytest.raises(EgressRefused):
            await chat.complete([{"role": "user", "content": "hi"}])
    finally:
        await chat.aclose()
    assert target.connections == 0
