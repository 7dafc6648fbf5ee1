"""The console's audit log page and CSV export over HTTP against the running app: console
requests are audited with the console user's subject, filters (route, status, subject,
organisation, time) and keyset pages, values that are not understood (422, never 500), the
CSV export (filters, cap, formula guard, attachment), and who may read it."""

from __future__ import annotations

import asyncio
import csv
import html
import io
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from server.audit.models import AuditEntry
from server.auth.models import ApiKey
from server.console.pages import audit as audit_page
from tests.support.api import World, login
from tests.support.audit import audit_rows, last_audit_id
from tests.support.console import console_login
from tests.support.database import database_session

Api = tuple[httpx.AsyncClient, World, FastAPI]
ROW = re.compile(r"<tr>\s*<td class=\"num\">(\d+)</td>(.*?)</tr>", re.DOTALL)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.DOTALL)
TAG = re.compile(r"<[^>]+>")


def table(page: str) -> list[list[str]]:
    """The audit table's rows as cell texts: id, at, subject, organisation, session,
    method, route, status, client, requests."""
    rows = []
    for found in ROW.finditer(page):
        cells = [html.unescape(TAG.sub("", c)).strip() for c in CELL.findall(found.group(2))]
        rows.append([found.group(1), *cells])
    return rows


async def wait_for_rows(
    db_url: str, after: int, matches: Callable[[AuditEntry], bool], n: int = 1
) -> list[AuditEntry]:
    """Audit rows above ``after`` that ``matches``, once there are ``n`` of them (the audit
    writer commits them on its own connection)."""
    for _ in range(200):
        rows = [r for r in await audit_rows(db_url, after) if matches(r)]
        if len(rows) >= n:
            return rows
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {n} audit rows appeared")


async def key_id(db_url: str, org_id: uuid.UUID, role: str) -> str:
    async with database_session(db_url) as db:
        found = await db.scalar(
            select(ApiKey.id).where(ApiKey.org_id == org_id, ApiKey.role == role)
        )
    return str(found)


async def test_console_requests_appear_with_the_console_users_subject(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    before = await last_audit_id(db_url)
    await console_login(client, world.a.keys["admin"])
    assert (await client.get("/console/orgs")).status_code == 200
    admin = await key_id(db_url, world.a.id, "admin")
    await wait_for_rows(db_url, before, lambda r: r.route == "/console/orgs")
    page = await client.get(
        "/console/audit", params={"subject": admin, "route": "/console/orgs", "exact": "1"}
    )
    assert page.status_code == 200
    rows = table(page.text)
    assert rows and all(r[2] == admin and r[6] == "/console/orgs" for r in rows), rows
    assert any(r[5] == "GET" and r[7] == "200" and r[3] == "org-a" for r in rows)
    other = await client.get("/console/audit", params={"subject": str(uuid.uuid4())})
    assert table(other.text) == [] and "No request matches." in other.text


async def test_filters_by_route_status_organisation_and_time(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    before = await last_audit_id(db_url)
    await console_login(client, world.a.keys["admin"])
    assert (await client.get(f"/console/orgs/{uuid.uuid4()}")).status_code == 404
    assert (await client.get(f"/console/orgs/{world.b.id}")).status_code == 200
    await wait_for_rows(db_url, before, lambda r: r.route == "/console/orgs/{org_id}", n=2)

    def statuses(page: httpx.Response) -> list[str]:
        assert page.status_code == 200, page.text[-300:]
        return [r[7] for r in table(page.text)]

    route = {"route": "/console/orgs/{org_id}", "exact": "1"}
    assert statuses(await client.get("/console/audit", params={**route, "status": "4xx"})) == [
        "404"
    ]
    assert statuses(await client.get("/console/audit", params={**route, "status": "404"})) == [
        "404"
    ]
    assert statuses(await client.get("/console/audit", params={**route, "status": "2XX"})) == [
        "200"
    ]
    assert statuses(await client.get("/console/audit", params=route)) == ["200", "404"]
    # a substring: "/orgs/{" is in the template; "_" is literal, not a wildcard
    assert len(statuses(await client.get("/console/audit", params={"route": "/orgs/{org_"}))) == 2
    assert statuses(await client.get("/console/audit", params={"route": "/orgs/_org"})) == []
    exact = await client.get("/console/audit", params={"route": "/console/orgs", "exact": "1"})
    assert statuses(exact) == []  # the whole template only: not /console/orgs/{org_id}
    mine = await client.get("/console/audit", params={**route, "org": str(world.a.id)})
    assert len(statuses(mine)) == 2
    theirs = await client.get("/console/audit", params={**route, "org": str(world.b.id)})
    assert statuses(theirs) == []  # the organisation of the caller, not of the page
    today = datetime.now(UTC).date()
    window = {"from": today.isoformat(), "to": today.isoformat()}
    assert len(statuses(await client.get("/console/audit", params={**route, **window}))) == 2
    future = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert statuses(await client.get("/console/audit", params={**route, "from": future})) == []
    assert len(statuses(await client.get("/console/audit", params={**route, "to": future}))) == 2


async def test_pages_go_back_by_row_id_keeping_the_filters(
    api: Api, world_db: tuple[str, World], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    monkeypatch.setattr(audit_page, "PER_PAGE", 5)
    before = await last_audit_id(db_url)
    await console_login(client, world.a.keys["auditor"])
    for _ in range(12):
        assert (await client.get("/console/orgs")).status_code == 200
    await wait_for_rows(db_url, before, lambda r: r.route == "/console/orgs", n=12)
    url = "/console/audit?route=%2Fconsole%2Forgs&exact=1"
    seen: list[int] = []
    pages = 0
    while url:
        page = await client.get(url)
        rows = table(page.text)
        assert rows and all(r[6] == "/console/orgs" for r in rows)
        seen.extend(int(r[0]) for r in rows)
        older = re.search(r'<a href="([^"]+)" rel="next">Older', page.text)
        url = "/console/audit" + html.unescape(older.group(1)) if older else ""
        if older:
            assert "route=%2Fconsole%2Forgs" in older.group(1) and "exact=1" in older.group(1)
        pages += 1
        if pages > 1:
            assert "← Newest</a>" in page.text
    assert pages == 3 and len(seen) == 12
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == 12  # newest first


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("org", "not-a-uuid"),
        ("session", "1234"),
        ("status", "abc"),
        ("status", "600"),
        ("status", "4x"),
        ("from", "2025-13-45"),
        ("to", "yesterday"),
        ("route", "tab\there"),
        ("subject", "\x1b[2J"),
        ("before", "-1"),
        ("before", "9" * 30),
    ],
)
async def test_values_not_understood_give_the_page_with_the_reason(
    api: Api, name: str, value: str
) -> None:
    client, world, _ = api
    await console_login(client, world.a.keys["auditor"])
    page = await client.get("/console/audit", params={name: value})
    assert page.status_code == 422, page.text[-300:]
    assert "text/html" in page.headers["content-type"]
    assert 'class="notice bad"' in page.text and 'name="route"' in page.text  # the form stays
    export = await client.get("/console/audit.csv", params={name: value})
    assert export.status_code == 422 and "text/html" in export.headers["content-type"]


async def test_csv_export_follows_the_filters_and_guards_against_formulas(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, app = api
    db_url, _ = world_db
    before = await last_audit_id(db_url)
    hostile = httpx.ASGITransport(app=app, client=("=HYPERLINK(1)", 50000))
    async with httpx.AsyncClient(transport=hostile, base_url="http://proctor.test") as other:
        assert (await other.get("/console/static/console.css")).status_code == 200
    await console_login(client, world.a.keys["admin"])
    assert (await client.get(f"/console/orgs/{uuid.uuid4()}")).status_code == 404
    await wait_for_rows(db_url, before, lambda r: r.status == 404)
    await wait_for_rows(db_url, before, lambda r: r.client == "=HYPERLINK(1)")

    page = await client.get("/console/audit", params={"status": "404"})
    assert 'href="/console/audit.csv?status=404"' in page.text and "100,000 rows" in page.text
    export = await client.get("/console/audit.csv", params={"status": "404"})
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    assert export.headers["content-disposition"].startswith("attachment; filename=")
    assert export.headers["x-rows-capped"] == "false"
    records = list(csv.DictReader(io.StringIO(export.text)))
    assert records and all(r["status"] == "404" for r in records)
    assert any(r["route"] == "/console/orgs/{org_id}" for r in records)
    assert list(records[0]) == [
        "id", "at", "subject", "org_id", "session_id", "method", "route", "status", "client",
        "repeats", "reason",
    ]  # fmt: skip
    ids = [int(r["id"]) for r in records]
    assert ids == sorted(ids, reverse=True)

    static = await client.get("/console/audit.csv", params={"route": "/console/static/"})
    clients = {r["client"] for r in csv.DictReader(io.StringIO(static.text))}
    assert "'=HYPERLINK(1)" in clients and "=HYPERLINK(1)" not in clients


async def test_csv_export_is_capped_and_says_so(
    api: Api, world_db: tuple[str, World], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    monkeypatch.setattr(audit_page, "CSV_MAX_ROWS", 3)
    before = await last_audit_id(db_url)
    await console_login(client, world.a.keys["auditor"])
    for _ in range(4):
        await client.get("/console/orgs")
    await wait_for_rows(db_url, before, lambda r: r.route == "/console/orgs", n=4)
    capped = await client.get("/console/audit.csv", params={"route": "/console/orgs"})
    assert capped.headers["x-rows-capped"] == "true"
    assert len(list(csv.DictReader(io.StringIO(capped.text)))) == 3
    exact = await client.get(
        "/console/audit.csv", params={"route": "/console/orgs", "exact": "1", "status": "5xx"}
    )
    assert exact.headers["x-rows-capped"] == "false" and exact.text.count("\n") == 1


async def test_only_admins_and_auditors_read_the_log(api: Api) -> None:
    client, world, _ = api
    for role, expected in (("admin", 200), ("auditor", 200), ("evaluator", 403)):
        client.cookies.clear()
        await console_login(client, world.a.keys[role])
        assert (await client.get("/console/audit")).status_code == expected, role
        assert (await client.get("/console/audit.csv")).status_code == expected, role


async def test_the_json_endpoint_reads_through_the_same_service(
    api: Api, world_db: tuple[str, World]
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    headers = await login(client, world.a.keys["auditor"])
    for _ in range(3):
        await client.get("/v1/whoami", headers=headers)
    await wait_for_rows(db_url, 0, lambda r: r.route == "/v1/whoami", n=3)
    first = await client.get("/v1/admin/audit", params={"limit": 2}, headers=headers)
    assert first.status_code == 200 and len(first.json()) == 2
    ids = [r["id"] for r in first.json()]
    older = await client.get(
        "/v1/admin/audit",
        params={"limit": 2, "before_id": ids[-1], "org_id": str(world.a.id)},
        headers=headers,
    )
    assert older.status_code == 200
    assert all(r["id"] < ids[-1] and r["org_id"] == str(world.a.id) for r in older.json())
