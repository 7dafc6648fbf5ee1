"""The egress settings: what an operator allows reaches the network, the rest is refused
at connect time, a bad entry is named when the settings load."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from clients.llm.egress import EgressRefused, EgressResponseTooLarge
from server.config import Settings
from server.egress import guarded_transport
from tests.support.api import test_settings
from tests.support.http_target import Target


async def _get(settings: Settings, url: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=guarded_transport(settings)) as http:
        return await http.get(url)


async def test_loopback_is_refused_until_the_operator_allows_it(target: Target) -> None:
    url = f"http://127.0.0.1:{target.port}/"
    with pytest.raises(EgressRefused):
        await _get(test_settings("sqlite+aiosqlite://"), url)
    assert target.connections == 0
    allowed = test_settings("sqlite+aiosqlite://", egress_allow=["127.0.0.1/32"])
    assert (await _get(allowed, url)).status_code == 200


async def test_the_response_limit_comes_from_the_settings(target: Target) -> None:
    body = b"y" * 5000
    target.reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n" + body
    settings = test_settings(
        "sqlite+aiosqlite://", egress_allow=["127.0.0.1"], egress_max_response_bytes=1024
    )
    with pytest.raises(EgressResponseTooLarge):
        await _get(settings, f"http://127.0.0.1:{target.port}/")


def test_the_allow_list_is_read_from_the_environment_and_a_bad_entry_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROCTOR_EGRESS_ALLOW", '["10.0.0.0/8", "models.internal"]')
    assert Settings().egress_allow == ["10.0.0.0/8", "models.internal"]
    monkeypatch.setenv("PROCTOR_EGRESS_ALLOW", '["10.0.0.0/8", "not a host"]')
    with pytest.raises(ValidationError, match="'not a host'"):
        Settings()


async def test_with_an_egress_proxy_the_proxy_is_the_one_address_connected_to(
    target: Target,
) -> None:
    """The proxy (here the counting server, on loopback, not otherwise allowed) receives
    the request for a name nothing here resolves: the guard connected to the proxy only."""
    settings = test_settings("sqlite+aiosqlite://", egress_proxy=f"http://127.0.0.1:{target.port}")
    response = await _get(settings, "http://models.example.test/v1/chat")
    assert response.status_code == 200 and target.connections == 1
    assert target.requests[0].startswith(b"GET http://models.example.test/v1/chat HTTP/1.1")
