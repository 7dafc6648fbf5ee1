"""Console logins and the console's defences, over HTTP against the running app: cookie
flags, vendors refused, logout, revoked keys and idle logins ending, CSRF and cross-site
forms refused, security headers, throttled bad logins, auditing, and who may open what."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update

from bank.models import Item
from server.auth.console_logins import (
    LoginLimits,
    delete_ended_logins,
    open_login,
    resolve_login,
)
from server.auth.models import ApiKey, ConsoleLogin
from server.auth.permissions import Principal, Role
from server.console.app import MENU
from server.console.dependencies import COOKIE
from tests.support.api import World, evaluator_session, login, running_api, test_settings
from tests.support.audit import audit_rows, last_audit_id
from tests.support.console import LOGIN_FIELD, console_login, csrf_token
from tests.support.database import database_session
from tests.support.review import reviewer_key
from tests.support.services import RedisServer

Api = tuple[httpx.AsyncClient, World, FastAPI]


def settings_for(
    db_url: str, backend: str, request: pytest.FixtureRequest, **overrides: Any
) -> Any:
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    return test_settings(db_url, redis_url, **overrides)


def cookie_header(response: httpx.Response, name: str) -> str:
    """The ``Set-Cookie`` header of cookie ``name``."""
    found = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    assert len(found) == 1, response.headers.get_list("set-cookie")
    return found[0]


async def test_login_sets_a_strict_http_only_cookie_and_lands_on_a_page(api: Api) -> None:
    client, world, _ = api
    response = await console_login(client, world.a.keys["admin"])
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
    flags = [part.strip().lower() for part in cookie_header(response, COOKIE).split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/console" in flags
    assert "secure" not in flags  # plain HTTP here; over HTTPS it is (next test)
    page = await client.get("/console")
    assert page.status_code == 200 and "Overview" in page.text


async def test_the_cookie_is_secure_over_https_or_when_configured(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    async with running_api(settings_for(db_url, backend, request)) as (app, _):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="https://proctor.test") as tls:
            response = await console_login(tls, world.a.keys["evaluator"])
            assert "secure" in cookie_header(response, COOKIE).lower()
    # behind a TLS-terminating proxy the app sees http; the setting marks the cookies anyway
    settings = settings_for(db_url, backend, request, console_secure_cookie=True)
    async with running_api(settings) as (_, client):
        form = await client.get("/console/login")
        assert "secure" in cookie_header(form, "proctor_console_login").lower()


async def test_vendors_and_bad_keys_cannot_log_in(api: Api) -> None:
    client, world, _ = api
    vendor = await console_login(client, world.a.keys["vendor"])
    assert vendor.status_code == 403 and "vendor" in vendor.text
    assert not [h for h in vendor.headers.get_list("set-cookie") if h.startswith(f"{COOKIE}=")]
    bad = await console_login(client, "pk_" + "x" * 40)
    assert bad.status_code == 401 and "text/html" in bad.headers["content-type"]
    assert (await client.get("/console")).status_code == 303  # still not logged in


async def test_a_login_form_without_its_token_is_refused(api: Api) -> None:
    client, world, _ = api
    response = await client.post("/console/login", data={"api_key": world.a.keys["admin"]})
    assert response.status_code == 403
    assert (await client.get("/console")).headers["location"] == "/console/login"


async def test_a_login_from_another_origin_or_none_is_refused(api: Api) -> None:
    """Login CSRF: a page elsewhere that planted the pre-login cookie and knows its token
    must still not log the victim in under the attacker's key; the browser's ``Origin``
    names the other site (or, stripped, nothing), and both are refused."""
    client, world, _ = api
    for origin in ("https://attacker.example", "null", None):
        form = await client.get("/console/login")
        token = LOGIN_FIELD.search(form.text)
        assert token
        headers = {} if origin is None else {"origin": origin}
        data = {"api_key": world.a.keys["admin"], "login_token": token.group(1)}
        refused = await client.post("/console/login", data=data, headers=headers)
        assert refused.status_code == 403, (origin, refused.text)
        assert COOKIE not in refused.cookies
        assert (await client.get("/console")).headers["location"] == "/console/login"
    assert (await console_login(client, world.a.keys["admin"])).status_code == 303


async def test_logout_needs_the_csrf_token_and_ends_the_login(api: Api) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["admin"])
    page = await client.get("/console")
    secret = client.cookies.get(COOKIE)
    assert secret
    assert (await client.post("/console/logout", data={})).status_code == 403
    assert (await client.get("/console")).status_code == 200  # refused logout changed nothing
    done = await client.post("/console/logout", data={"csrf_token": csrf_token(page.text)})
    assert done.status_code == 303 and done.headers["location"] == "/console/login"
    client.cookies.set(COOKIE, secret, path="/console")  # a kept copy of the cookie is dead
    again = await client.get("/console")
    assert again.status_code == 303 and again.headers["location"] == "/console/login"


async def test_forged_and_cross_site_forms_are_refused(api: Api) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["admin"])
    token = csrf_token((await client.get("/console")).text)
    forged = await client.post("/console/logout", data={"csrf_token": token[:-2] + "xx"})
    assert forged.status_code == 403
    cross = await client.post(
        "/console/logout", data={"csrf_token": token}, headers={"origin": "https://evil.example"}
    )
    assert cross.status_code == 403 and "cross-site" in cross.text
    same = await client.post(
        "/console/logout", data={"csrf_token": token}, headers={"origin": "http://proctor.test"}
    )
    assert same.status_code == 303


async def test_revoking_the_key_ends_its_console_logins(api: Api) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["auditor"])
    assert (await client.get("/console")).status_code == 200
    auditor = client.cookies.get(COOKIE)
    admin = await login(client, world.a.keys["admin"])
    who = await client.get("/v1/whoami", headers=await login(client, world.a.keys["auditor"]))
    key_id = who.json()["subject"]
    revoked = await client.post("/v1/admin/tokens/revoke", json={"key_id": key_id}, headers=admin)
    assert revoked.status_code == 200
    client.cookies.set(COOKIE, auditor or "", path="/console")
    response = await client.get("/console")
    assert response.status_code == 303 and response.headers["location"] == "/console/login"


async def test_an_idle_login_expires(api: Api, world_db: tuple[str, World]) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await console_login(client, world.a.keys["evaluator"])
    assert (await client.get("/console")).status_code == 200
    long_ago = datetime.now(UTC) - timedelta(hours=1)  # the default idle limit is 30 min
    async with database_session(db_url) as db:
        await db.execute(update(ConsoleLogin).values(last_seen_at=long_ago))
    response = await client.get("/console")
    assert response.status_code == 303 and response.headers["location"] == "/console/login"
    limits = LoginLimits(idle=timedelta(minutes=30), max_age=timedelta(hours=12))
    async with database_session(db_url) as db:  # what the server's sweeper does
        assert await delete_ended_logins(db, now=datetime.now(UTC), limits=limits) == 1
        assert await db.scalar(select(func.count()).select_from(ConsoleLogin)) == 0


async def test_an_old_login_expires_however_busy(api: Api, world_db: tuple[str, World]) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await console_login(client, world.a.keys["evaluator"])
    async with database_session(db_url) as db:
        await db.execute(
            update(ConsoleLogin).values(created_at=datetime.now(UTC) - timedelta(days=1))
        )
    assert (await client.get("/console")).status_code == 303


async def test_console_pages_send_the_security_headers(api: Api) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["admin"])
    for path in ("/console", "/console/login", "/console/no-such-page"):
        response = await client.get(path)
        csp = response.headers["content-security-policy"]
        assert "unsafe-inline" not in csp and "script-src 'self'" in csp, path
        assert "frame-ancestors 'none'" in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["cache-control"] == "no-store", path
    missing = await client.get("/console/no-such-page")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    script = await client.get("/console/static/console.js")
    assert script.status_code == 200 and "EventSource" in script.text
    assert "no-store" not in script.headers["cache-control"]
    assert (await client.get("/console/static/..%2Fapp.py")).status_code == 404
    api_response = await client.get("/v1/whoami")  # the API keeps its own headers
    assert "content-security-policy" not in api_response.headers


async def test_refused_console_logins_are_throttled_per_address(
    world_db: tuple[str, World], backend: str, request: pytest.FixtureRequest
) -> None:
    db_url, world = world_db
    settings = settings_for(db_url, backend, request, auth_failures_per_minute=5)
    async with running_api(settings, address="192.0.2.77") as (_, client):
        statuses = [(await console_login(client, f"pk_wrong{i}")).status_code for i in range(7)]
        assert statuses[:5] == [401] * 5 and statuses[5:] == [429, 429], statuses
        # past the limit even a good key is refused from that address
        assert (await console_login(client, world.a.keys["admin"])).status_code == 429


async def test_console_requests_are_audited_with_their_user(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    before = await last_audit_id(db_url)
    await console_login(client, world.a.keys["admin"])
    await client.get("/console")
    async with database_session(db_url) as db:
        admin_key = await db.scalar(
            select(ApiKey.id).where(ApiKey.org_id == world.a.id, ApiKey.role == "admin")
        )
    for _ in range(100):
        rows = [r for r in await audit_rows(db_url, before) if r.route == "/console"]
        if rows:
            break
        await client.get("/console/static/console.css")  # lets the writer flush
    assert rows, "the console page was not audited"
    assert rows[0].subject == str(admin_key) and rows[0].org_id == world.a.id
    assert rows[0].status == 200 and rows[0].method == "GET"


def _principal(role: Role) -> Principal:
    return Principal("k", uuid.uuid4(), role, "j", datetime.now(UTC))


@pytest.mark.parametrize("role", [Role.ADMIN, Role.AUDITOR, Role.EVALUATOR, Role.REVIEWER])
async def test_each_role_opens_exactly_its_pages(
    api: Api, world_db: tuple[str, World], role: Role
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    key = await reviewer_key(db_url, world.a.id) if role is Role.REVIEWER else world.a.keys[role]
    assert (await console_login(client, key)).status_code == 303
    principal = _principal(role)
    for entry in MENU:
        response = await client.get(entry.path)
        expected = 200 if principal.can(entry.permission) else 403
        assert response.status_code == expected, (role, entry.path, response.text[-400:])


async def test_anonymous_requests_go_to_the_login_page_or_are_refused(api: Api) -> None:
    client, _, app = api
    for entry in MENU:
        response = await client.get(entry.path)
        assert response.status_code == 303 and response.headers["location"] == "/console/login"
    for path in console_posts(app):
        response = await client.post(path, data={"csrf_token": "x"})
        assert response.status_code == 401, path


def console_posts(app: FastAPI, ids: dict[str, str] | None = None) -> list[str]:
    """Every state-changing console route, path parameters filled from ``ids`` (by name)
    or with made-up values."""
    ids = ids or {}
    paths = []
    for route in app.routes:
        path = getattr(route, "path", "")
        if not path.startswith("/console") or "POST" not in getattr(route, "methods", ()):
            continue
        if path in ("/console/login", "/console/logout"):
            continue
        for name in getattr(route, "param_convertors", {}):
            made_up = str(uuid.uuid4()) if "id" in name else "1"
            path = path.replace("{" + name + "}", ids.get(name, made_up))
        paths.append(path)
    return paths


async def test_every_console_post_needs_csrf_and_refuses_auditors(api: Api) -> None:
    client, world, app = api
    posts = console_posts(app)
    await console_login(client, world.a.keys["auditor"])
    token = csrf_token((await client.get("/console")).text)
    for path in posts:
        response = await client.post(path, data={"csrf_token": token})
        assert response.status_code == 403, (path, response.status_code)
    client.cookies.clear()
    await console_login(client, world.a.keys["admin"])
    for path in posts:
        for data in ({}, {"csrf_token": "forged"}):
            response = await client.post(path, data=data)
            assert response.status_code == 403, (path, data, response.status_code)


async def test_a_streams_check_does_not_keep_the_login_alive(
    api: Api, world_db: tuple[str, World]
) -> None:
    db_url, world = world_db
    limits = LoginLimits(idle=timedelta(minutes=30), max_age=timedelta(hours=12))
    then = datetime.now(UTC) - timedelta(minutes=10)
    async with database_session(db_url) as db:
        secret = await open_login(db, api_key=world.a.keys["admin"], now=then)
    now = datetime.now(UTC)
    async with database_session(db_url) as db:
        await resolve_login(db, secret=secret, now=now, limits=limits, touch=False)
        seen = await db.scalar(select(ConsoleLogin.last_seen_at))
        assert seen is not None and abs((seen - then).total_seconds()) < 1
        await resolve_login(db, secret=secret, now=now, limits=limits)
        seen = await db.scalar(select(ConsoleLogin.last_seen_at))
        assert seen is not None and abs((seen - now).total_seconds()) < 1


HOSTILE_FIELDS = (
    b"name=%00&model=%ED%A0%80&role=%FF%FE&score=%F0%9F%92%A9x&note=%3Cscript%3E"
    b"&max_concurrent_sessions=1e309&max_sessions_per_period=-1&action=%00&reason=%00"
    b"&question=" + b"x" * 200_000
)
HOSTILE_QUERIES = ("?q=%ED%A0%80", "?state=%FF", "?page=99999999999999999999", "?after=-1")


async def test_hostile_forms_and_queries_never_break_a_page(
    api: Api, world_db: tuple[str, World]
) -> None:
    """Every console POST with hostile field values (NUL, a lone surrogate's bytes, invalid
    UTF-8, absurd numbers, a long field) and every page with hostile query strings answers
    with a page, never a 500."""
    client, world, app = api
    db_url, _ = world_db
    _, session_id = await evaluator_session(client, world.b, n_items=2)
    async with database_session(db_url) as db:
        item_id = await db.scalar(select(Item.id).limit(1))
        key_id = await db.scalar(select(ApiKey.id).where(ApiKey.org_id == world.b.id))
    ids = {
        "org_id": str(world.b.id),
        "session_id": session_id,
        "item_id": str(item_id),
        "key_id": str(key_id),
    }
    await console_login(client, world.a.keys["admin"])
    token = csrf_token((await client.get("/console")).text)
    body = b"csrf_token=" + token.encode() + b"&" + HOSTILE_FIELDS
    form = {"content-type": "application/x-www-form-urlencoded"}
    for path in console_posts(app, ids):
        response = await client.post(path, content=body, headers=form)
        assert response.status_code < 500, (path, response.status_code, response.text[-300:])
    for entry in MENU:
        for query in HOSTILE_QUERIES:
            response = await client.get(entry.path + query)
            assert response.status_code < 500, (entry.path, query, response.text[-300:])
    assert (await client.get("/console")).status_code == 200  # still logged in, still working
