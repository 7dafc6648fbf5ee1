"""The per-process memory of live tokens: bounded staleness for revocations made elsewhere,
none for revocations made through this process."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import jwt
import pytest
from fastapi import FastAPI

from bank.database import utcnow
from server.auth.models import RevokedToken
from server.auth.revocation_cache import LIVE_FOR_S, REVOCATIONS, RevocationCache
from server.auth.tokens import TOKEN_TYPE
from server.database import unit_of_work
from tests.support.api import World, login

Api = tuple[httpx.AsyncClient, World, FastAPI]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def jti_of(headers: dict[str, str]) -> str:
    return str(payload_of(headers)["jti"])


def payload_of(headers: dict[str, str]) -> dict[str, Any]:
    token = headers["Authorization"].removeprefix("Bearer ")
    payload: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return payload


def signed(app: FastAPI, payload: dict[str, Any]) -> dict[str, str]:
    """Headers with ``payload`` signed by the server's own key (what a holder of the
    signing secret could mint)."""
    keys = app.state.runtime.codec.keys
    token = jwt.encode(
        payload, keys.signing_key, algorithm=keys.algorithm, headers={"typ": TOKEN_TYPE}
    )
    return {"Authorization": f"Bearer {token}"}


def test_a_live_token_is_remembered_only_within_the_bound() -> None:
    clock = FakeClock()
    cache = RevocationCache(live_for_s=5.0, clock=clock)
    assert not cache.is_known_live("a")
    cache.remember_live("a", generation=cache.generation)
    clock.now += 4.9
    assert cache.is_known_live("a")
    clock.now += 0.2
    assert not cache.is_known_live("a")


def test_a_revocation_forgets_everything_and_a_verdict_read_before_it() -> None:
    cache = RevocationCache(clock=FakeClock())
    cache.remember_live("a", generation=cache.generation)
    started = cache.generation  # a request asks the database ...
    cache.forget_all()  # ... while a revocation is written
    cache.remember_live("b", generation=started)
    assert not cache.is_known_live("a")
    assert not cache.is_known_live("b")


def test_the_memory_is_bounded() -> None:
    cache = RevocationCache(max_entries=3, clock=FakeClock())
    for jti in "abcd":
        cache.remember_live(jti, generation=cache.generation)
    assert cache.is_known_live("d")
    assert sum(cache.is_known_live(j) for j in "abc") < 3


async def test_a_revocation_through_this_process_counts_at_once(api: Api) -> None:
    client, world, app = api
    admin = await login(client, world.a.keys["admin"])
    vendor = await login(client, world.a.keys["vendor"])
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 200
    claims = app.state.runtime.codec.verify(vendor["Authorization"].removeprefix("Bearer "))
    assert REVOCATIONS.is_known_live(claims)  # remembered as live
    revoked = await client.post(
        "/v1/admin/tokens/revoke", json={"jti": jti_of(vendor)}, headers=admin
    )
    assert revoked.status_code == 200, revoked.text
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 401


async def test_a_revocation_by_another_process_counts_within_the_bound(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world, app = api
    clock = FakeClock()
    monkeypatch.setattr(REVOCATIONS, "_clock", clock)
    vendor = await login(client, world.a.keys["vendor"])
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 200
    # another process (another worker, the CLI) revokes it: this one is not told
    async with unit_of_work(app.state.runtime.engine) as db:
        db.add(RevokedToken(jti=jti_of(vendor), expires_at=utcnow(), revoked_at=utcnow()))
    clock.now += LIVE_FOR_S / 2
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 200  # stale
    clock.now += LIVE_FOR_S / 2 + 0.01
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 401
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 401


async def test_a_live_jti_lends_nothing_to_other_claims(api: Api) -> None:
    """A token signed with the server's key that reuses a live token's ``jti`` is checked
    in full: another role (a platform role outside the operator's organisation), another
    subject (a key that does not exist) and a NUL in the subject are each a 401, never
    the live token's verdict, and never a 500 from the audit write."""
    client, world, app = api
    vendor = await login(client, world.b.keys["vendor"])
    assert (await client.get("/v1/whoami", headers=vendor)).status_code == 200  # now cached
    live = payload_of(vendor)
    for changed in (
        {"role": "admin"},
        {"sub": str(uuid.uuid4())},
        {"sub": live["sub"][:-1] + "\x00"},
    ):
        forged = signed(app, {**live, **changed})
        response = await client.get("/v1/whoami", headers=forged)
        assert response.status_code == 401, (changed, response.text)
    assert (await client.get("/v1/whoami", headers=vendor)).json()["role"] == "vendor"
