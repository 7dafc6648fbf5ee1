"""``proctor admin create-org`` / ``create-key`` / ``revoke-key``: the key is printed once,
only its hash kept; a revoked key and its tokens are refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from sqlalchemy import select

from server.auth.keys import hash_api_key
from server.auth.models import ApiKey
from server.auth.revocation_cache import LIVE_FOR_S
from server.database import create_engine, unit_of_work
from tests.support.api import running_api, test_settings
from tests.support.cli import proctor_db


async def test_created_key_is_shown_once_and_stored_hashed(
    fresh_db_url: str, run_sync: Callable[..., object]
) -> None:
    await run_sync(proctor_db, fresh_db_url, "admin", "create-org", "Acme")
    result = await run_sync(
        proctor_db, fresh_db_url, "admin", "create-key", "--org", "Acme", "--role", "vendor"
    )
    key = result.stdout.strip()  # type: ignore[attr-defined]
    assert key.startswith("pk_") and len(key) >= 40
    engine = create_engine(fresh_db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = (await db.execute(select(ApiKey))).scalars().all()
    finally:
        await engine.dispose()
    assert len(rows) == 1 and rows[0].role == "vendor"
    assert rows[0].key_hash == hash_api_key(key)
    assert key not in {rows[0].key_hash, rows[0].prefix}
    async with running_api(test_settings(fresh_db_url)) as (_, client):
        token = await client.post("/v1/auth/token", json={"api_key": key})
        assert token.status_code == 200 and token.json()["token_type"] == "bearer"
        who = await client.get(
            "/v1/whoami", headers={"Authorization": f"Bearer {token.json()['access_token']}"}
        )
        assert who.json()["role"] == "vendor"


async def test_bad_role_and_unknown_org_are_refused(
    fresh_db_url: str, run_sync: Callable[..., object]
) -> None:
    await run_sync(proctor_db, fresh_db_url, "admin", "create-org", "Acme")
    bad_role = await run_sync(
        lambda: proctor_db(
            fresh_db_url, "admin", "create-key", "--org", "Acme", "--role", "root", check=False
        )
    )
    assert bad_role.returncode == 1 and "role must be one of" in bad_role.stderr  # type: ignore[attr-defined]
    no_org = await run_sync(
        lambda: proctor_db(
            fresh_db_url, "admin", "create-key", "--org", "Nope", "--role", "vendor", check=False
        )
    )
    assert no_org.returncode == 1 and "no organisation named 'Nope'" in no_org.stderr  # type: ignore[attr-defined]


async def test_a_revoked_key_and_its_tokens_are_refused(
    fresh_db_url: str, run_sync: Callable[..., object]
) -> None:
    await run_sync(proctor_db, fresh_db_url, "admin", "create-org", "Acme")
    made = await run_sync(
        proctor_db, fresh_db_url, "admin", "create-key", "--org", "Acme", "--role", "vendor"
    )
    key = made.stdout.strip()  # type: ignore[attr-defined]
    engine = create_engine(fresh_db_url)
    try:
        async with unit_of_work(engine) as db:
            key_id = (await db.execute(select(ApiKey.id))).scalar_one()
    finally:
        await engine.dispose()
    async with running_api(test_settings(fresh_db_url)) as (_, client):
        token = (await client.post("/v1/auth/token", json={"api_key": key})).json()
        headers = {"Authorization": f"Bearer {token['access_token']}"}
        assert (await client.get("/v1/whoami", headers=headers)).status_code == 200
        done = await run_sync(proctor_db, fresh_db_url, "admin", "revoke-key", str(key_id))
        assert f"revoked key {key_id}" in done.stdout  # type: ignore[attr-defined]
        # another process revoked it: this server refuses the token within the cache bound
        await asyncio.sleep(LIVE_FOR_S + 0.2)
        assert (await client.get("/v1/whoami", headers=headers)).status_code == 401
        assert (await client.post("/v1/auth/token", json={"api_key": key})).status_code == 401
    unknown = await run_sync(
        lambda: proctor_db(fresh_db_url, "admin", "revoke-key", str(uuid.uuid4()), check=False)
    )
    assert unknown.returncode == 1 and "no API key" in unknown.stderr  # type: ignore[attr-defined]
