"""The console's organisations and keys pages over HTTP against the running app: admins
create organisations, set quotas (which bind session creation), create keys (shown once)
and revoke them (the key and its console logins die); auditors read without key prefixes
or forms and are refused every POST; forms need their CSRF token; hostile names are
escaped."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from server.auth.models import ApiKey
from server.orgs.models import Organisation
from tests.support.api import World, login
from tests.support.console import console_login, csrf_token
from tests.support.database import database_session

Api = tuple[httpx.AsyncClient, World, FastAPI]
SECRET = re.compile(r'<p class="secret">([^<]+)</p>')
HOSTILE = "<script>alert(1)</script>\"'"


async def admin_token(client: httpx.AsyncClient, world: World, path: str = "/console/orgs") -> str:
    """Log ``client`` in to the console as org-a's admin; the CSRF token of ``path``."""
    client.cookies.clear()
    assert (await console_login(client, world.a.keys["admin"])).status_code == 303
    return csrf_token((await client.get(path)).text)


async def create_key(
    client: httpx.AsyncClient, org_id: uuid.UUID, role: str, token: str
) -> tuple[httpx.Response, str | None]:
    response = await client.post(
        f"/console/orgs/{org_id}/keys", data={"role": role, "csrf_token": token}
    )
    found = SECRET.search(response.text)
    return response, found.group(1) if found else None


async def key_id_of(db_url: str, key: str) -> uuid.UUID:
    async with database_session(db_url) as db:
        found = await db.scalar(select(ApiKey.id).where(ApiKey.prefix == key[:10]))
    assert found is not None
    return found


async def org_named(db_url: str, name: str) -> Organisation | None:
    async with database_session(db_url) as db:
        org: Organisation | None = await db.scalar(
            select(Organisation).where(Organisation.name == name)
        )
        return org


def second_client(app: FastAPI) -> httpx.AsyncClient:
    """Another browser (its own cookies) on the same app."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50001))
    return httpx.AsyncClient(transport=transport, base_url="http://proctor.test")


async def test_admin_creates_an_org_whose_quota_binds_its_sessions(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    token = await admin_token(client, world)
    created = await client.post("/console/orgs", data={"name": "org-c", "csrf_token": token})
    assert created.status_code == 303, created.text
    org = await org_named(db_url, "org-c")
    assert org is not None and not org.is_operator
    assert created.headers["location"] == f"/console/orgs/{org.id}?notice=org-created"
    page = await client.get(created.headers["location"])
    assert page.status_code == 200 and "Organisation created." in page.text
    listing = await client.get("/console/orgs")
    assert "org-c" in listing.text and f'href="/console/orgs/{org.id}"' in listing.text

    saved = await client.post(
        f"/console/orgs/{org.id}/quotas",
        data={"max_concurrent_sessions": "1", "max_sessions_per_period": "", "csrf_token": token},
    )
    assert saved.status_code == 303
    page = await client.get(saved.headers["location"])
    assert "Quotas saved" in page.text and "own quota" in page.text
    assert "server default" in page.text  # the blank per-period quota
    after = await org_named(db_url, "org-c")
    assert after is not None
    assert (after.max_concurrent_sessions, after.max_sessions_per_period) == (1, None)

    _, key = await create_key(client, org.id, "evaluator", token)
    assert key is not None
    evaluator = await login(client, key)
    model = await client.post(
        "/v1/models", json={"name": "model-c", "api_snapshot": "v1"}, headers=evaluator
    )
    assert model.status_code == 201, model.text
    body = {"model_id": model.json()["id"]}
    first = await client.post("/v1/sessions", json=body, headers=evaluator)
    assert first.status_code == 201, first.text
    second = await client.post("/v1/sessions", json=body, headers=evaluator)
    assert second.status_code == 409 and "quota" in second.text  # the page's quota, not 50


async def test_quota_values_out_of_range_are_shown_back_and_change_nothing(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    token = await admin_token(client, world)
    for value in ("abc", "0", "-3", "99999999999"):
        refused = await client.post(
            f"/console/orgs/{world.b.id}/quotas",
            data={"max_concurrent_sessions": value, "csrf_token": token},
        )
        assert refused.status_code == 422, (value, refused.text[-300:])
        assert 'class="notice bad"' in refused.text and "between 1 and" in refused.text
    org = await org_named(db_url, "org-b")
    assert org is not None and org.max_concurrent_sessions is None


async def test_a_new_key_is_shown_once_works_and_dies_when_revoked(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, app = api
    db_url, _ = world_db
    token = await admin_token(client, world, f"/console/orgs/{world.b.id}")
    response, key = await create_key(client, world.b.id, "evaluator", token)
    assert response.status_code == 200 and key is not None and key.startswith("pk_")
    assert response.headers["cache-control"] == "no-store"
    assert "only time" in response.text and response.text.count(key) == 1
    assert (await client.post("/v1/auth/token", json={"api_key": key})).status_code == 200

    page = await client.get(f"/console/orgs/{world.b.id}")
    assert key not in page.text and key[:10] in page.text  # the prefix only, from now on
    assert not SECRET.search(page.text)

    async with second_client(app) as browser:  # someone logged in to the console with it
        assert (await console_login(browser, key)).status_code == 303
        assert (await browser.get("/console")).status_code == 200
        key_id = await key_id_of(db_url, key)
        assert f"/keys/{key_id}/revoke" in page.text and "data-confirm" in page.text
        revoked = await client.post(
            f"/console/orgs/{world.b.id}/keys/{key_id}/revoke", data={"csrf_token": token}
        )
        assert revoked.status_code == 303
        assert revoked.headers["location"].endswith("?notice=key-revoked")
        dead = await browser.get("/console")
        assert dead.status_code == 303 and dead.headers["location"] == "/console/login"
    refused = await client.post("/v1/auth/token", json={"api_key": key})
    assert refused.status_code == 401
    page = await client.get(f"/console/orgs/{world.b.id}")
    assert "revoked" in page.text and f"/keys/{key_id}/revoke" not in page.text
    other = await client.post(  # a key of another organisation is not revoked through this one
        f"/console/orgs/{world.b.id}/keys/{await key_id_of(db_url, world.a.keys['vendor'])}/revoke",
        data={"csrf_token": token},
    )
    assert other.status_code == 404
    assert (
        await client.post("/v1/auth/token", json={"api_key": world.a.keys["vendor"]})
    ).is_success


async def test_platform_roles_are_refused_outside_the_operator_org(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    token = await admin_token(client, world, f"/console/orgs/{world.b.id}")
    page = await client.get(f"/console/orgs/{world.b.id}")
    assert '<option value="evaluator">' in page.text and '<option value="admin">' not in page.text
    operator = await client.get(f"/console/orgs/{world.a.id}")
    assert '<option value="admin">' in operator.text
    async with database_session(db_url) as db:
        before = len(list(await db.scalars(select(ApiKey.id))))
    for role in ("admin", "auditor", "nobody"):
        response, key = await create_key(client, world.b.id, role, token)
        assert response.status_code == 422 and key is None, role
        assert 'class="notice bad"' in response.text
    assert "platform role" in response.text or "role must be one of" in response.text
    async with database_session(db_url) as db:
        assert len(list(await db.scalars(select(ApiKey.id)))) == before
    missing = await client.post(
        f"/console/orgs/{uuid.uuid4()}/keys", data={"role": "vendor", "csrf_token": token}
    )
    assert missing.status_code == 404


async def test_auditors_see_orgs_and_keys_without_prefixes_or_controls(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    async with database_session(db_url) as db:
        prefixes = list(await db.scalars(select(ApiKey.prefix).where(ApiKey.org_id == world.a.id)))
    admin_page = await client.get(f"/console/orgs/{world.a.id}")  # not logged in yet
    assert admin_page.status_code == 303
    await admin_token(client, world)
    admin_page = await client.get(f"/console/orgs/{world.a.id}")
    assert all(prefix in admin_page.text for prefix in prefixes)

    client.cookies.clear()
    await console_login(client, world.a.keys["auditor"])
    listing = await client.get("/console/orgs")
    assert listing.status_code == 200
    assert "org-a" in listing.text and "org-b" in listing.text and "operator" in listing.text
    assert 'action="/console/orgs"' not in listing.text
    page = await client.get(f"/console/orgs/{world.a.id}")
    assert page.status_code == 200 and "auditor" in page.text
    main = page.text.split("<main>", 1)[1]  # the header names the auditor's own key
    assert not any(prefix in main for prefix in prefixes) and "pk_" not in main
    for control in ("/revoke", "/quotas", "/keys", 'name="role"', "<form"):
        assert control not in main, control

    token = csrf_token(page.text)
    key_id = await key_id_of(db_url, world.a.keys["vendor"])
    for path, data in (
        ("/console/orgs", {"name": "org-x"}),
        (f"/console/orgs/{world.b.id}/quotas", {"max_concurrent_sessions": "1"}),
        (f"/console/orgs/{world.a.id}/keys", {"role": "admin"}),
        (f"/console/orgs/{world.a.id}/keys/{key_id}/revoke", {}),
    ):
        response = await client.post(path, data={**data, "csrf_token": token})
        assert response.status_code == 403, path
    assert await org_named(db_url, "org-x") is None
    assert (
        await client.post("/v1/auth/token", json={"api_key": world.a.keys["vendor"]})
    ).is_success
    org_b = await org_named(db_url, "org-b")
    assert org_b is not None and org_b.max_concurrent_sessions is None


@pytest.mark.parametrize("data", [{}, {"csrf_token": "forged"}])
async def test_forms_without_their_csrf_token_are_refused(
    api: Api, world_db: tuple[str, World], data: dict[str, str]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await admin_token(client, world)
    key_id = await key_id_of(db_url, world.b.keys["vendor"])
    for path, fields in (
        ("/console/orgs", {"name": "org-x"}),
        (f"/console/orgs/{world.b.id}/quotas", {"max_concurrent_sessions": "1"}),
        (f"/console/orgs/{world.b.id}/keys", {"role": "vendor"}),
        (f"/console/orgs/{world.b.id}/keys/{key_id}/revoke", {}),
    ):
        response = await client.post(path, data={**fields, **data})
        assert response.status_code == 403, path
        assert SECRET.search(response.text) is None
    assert await org_named(db_url, "org-x") is None
    assert (
        await client.post("/v1/auth/token", json={"api_key": world.b.keys["vendor"]})
    ).is_success


async def test_org_names_are_checked_and_hostile_ones_escaped(api: Api) -> None:
    client, world, _ = api
    token = await admin_token(client, world)
    created = await client.post("/console/orgs", data={"name": HOSTILE, "csrf_token": token})
    assert created.status_code == 303
    for path in ("/console/orgs", created.headers["location"]):
        page = await client.get(path)
        assert page.status_code == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "<script>alert" not in page.text
    taken = await client.post("/console/orgs", data={"name": HOSTILE, "csrf_token": token})
    assert taken.status_code == 409 and "already exists" in taken.text
    assert "<script>alert" not in taken.text
    for name in ("", "   ", "x" * 201, "nul\x00byte", "line\nbreak"):
        refused = await client.post("/console/orgs", data={"name": name, "csrf_token": token})
        assert refused.status_code == 422, (name, refused.text[-300:])
        assert 'class="notice bad"' in refused.text
    assert (await client.get(f"/console/orgs/{uuid.uuid4()}")).status_code == 404
