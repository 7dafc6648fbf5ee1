"""The audit log: one row per request whatever its outcome, rows of rolled-back requests
kept, no secrets or answers in it, and no way to change it (API or SQL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from server.audit.models import AuditEntry
from server.database import create_engine
from tests.support.api import World, login, open_session
from tests.support.audit import audit_rows, last_audit_id

Api = tuple[httpx.AsyncClient, World, FastAPI]
WorldDb = tuple[str, World]
ANSWER_TEXT = "zebra-quokka-7781-distinctive-answer"
DUPLICATE_TEXT = "narwhal-axolotl-9912-second-answer"
MALFORMED_TEXT = "ocelot-tapir-4417-malformed-answer"


def columns(row: AuditEntry) -> Iterator[tuple[str, str]]:
    for column in AuditEntry.__table__.columns:
        yield column.name, str(getattr(row, column.key))


@dataclass
class Expected:
    """What one request's audit row must say."""

    what: str
    status: int
    method: str
    route: str
    subject: str | None
    org_id: uuid.UUID | None
    session_id: str | None


def bearer(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def subject_of(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await client.get("/v1/whoami", headers=headers)
    assert response.status_code == 200
    return str(response.json()["subject"])


async def test_every_request_is_audited_once_with_its_outcome(api: Api, world_db: WorldDb) -> None:
    client, world, app = api
    db_url, _ = world_db
    assert world.a.model_id is not None and world.b.model_id is not None
    vendor = await login(client, world.a.keys["vendor"])
    evaluator = await login(client, world.a.keys["evaluator"])
    b_eval = await login(client, world.b.keys["evaluator"])
    vendor_sub = await subject_of(client, vendor)
    eval_sub = await subject_of(client, evaluator)
    sid = str((await open_session(client, evaluator, world.a.model_id, n_items=1))["id"])
    b_sid = str((await open_session(client, b_eval, world.b.model_id, n_items=1))["id"])
    a_org = world.a.id
    tokens = [bearer(h) for h in (vendor, evaluator, b_eval)]

    base = await last_audit_id(db_url)
    expected: list[Expected] = []

    async def call(
        exp: Expected, method: str, url: str, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        response = await client.request(method, url, headers=headers or {}, **kw)
        assert response.status_code == exp.status, (exp.what, response.text)
        expected.append(exp)
        return response

    def exp(
        what: str, status: int, method: str, route: str, who: str | None, sess: str | None
    ) -> Expected:
        subject = {"vendor": vendor_sub, "evaluator": eval_sub, None: None}[who]
        return Expected(what, status, method, route, subject, a_org if who else None, sess)

    S = "/v1/sessions/{session_id}"
    await call(exp("200", 200, "GET", "/v1/whoami", "vendor", None), "GET", "/v1/whoami", vendor)
    item = (
        await call(
            exp("200 next", 200, "GET", S + "/next", "evaluator", sid),
            "GET",
            f"/v1/sessions/{sid}/next",
            evaluator,
        )
    ).json()
    answer = {"position": item["position"], "item_id": item["item_id"], "answer": ANSWER_TEXT}
    await call(
        exp("201", 201, "POST", S + "/answers", "evaluator", sid),
        "POST",
        f"/v1/sessions/{sid}/answers",
        evaluator,
        json=answer,
    )
    await call(
        exp("409 duplicate", 409, "POST", S + "/answers", "evaluator", sid),
        "POST",
        f"/v1/sessions/{sid}/answers",
        evaluator,
        json={**answer, "answer": DUPLICATE_TEXT},
    )
    await call(
        exp("204", 204, "GET", S + "/next", "evaluator", sid),
        "GET",
        f"/v1/sessions/{sid}/next",
        evaluator,
    )
    await call(exp("401 no token", 401, "GET", S, None, sid), "GET", f"/v1/sessions/{sid}")
    await call(
        exp("401 garbage", 401, "GET", "/v1/whoami", None, None),
        "GET",
        "/v1/whoami",
        {"Authorization": "Bearer not.a.token"},
    )
    await call(
        exp("403 role", 403, "POST", "/v1/admin/sessions/{session_id}/abort", "vendor", sid),
        "POST",
        f"/v1/admin/sessions/{sid}/abort",
        vendor,
    )
    await call(
        exp("404 route", 404, "GET", "<unmatched>", None, None),
        "GET",
        "/v1/no-such-route",
        vendor,
    )
    await call(
        exp("404 other org", 404, "GET", S, "vendor", b_sid), "GET", f"/v1/sessions/{b_sid}", vendor
    )
    await call(
        exp("422 body", 422, "POST", S + "/answers", "evaluator", sid),
        "POST",
        f"/v1/sessions/{sid}/answers",
        evaluator,
        json={"position": "x", "item_id": item["item_id"], "answer": MALFORMED_TEXT},
    )
    await call(
        exp("422 model", 422, "POST", "/v1/models", "vendor", None),
        "POST",
        "/v1/models",
        vendor,
        json={"name": "", "api_snapshot": "v1"},
    )
    issued = await call(
        exp("200 token", 200, "POST", "/v1/auth/token", None, None),
        "POST",
        "/v1/auth/token",
        json={"api_key": world.a.keys["auditor"]},
    )
    tokens.append(issued.json()["access_token"])
    await call(
        exp("401 bad key", 401, "POST", "/v1/auth/token", None, None),
        "POST",
        "/v1/auth/token",
        json={"api_key": world.a.keys["auditor"] + "x"},
    )
    await call(
        exp("200 query", 200, "GET", "/v1/whoami", "vendor", None),
        "GET",
        f"/v1/whoami?token={bearer(vendor)}&answer={ANSWER_TEXT}",
        vendor,
    )

    # refused by the guard before routing: the route the request was for is recorded
    # (the subject is not: the guard refuses before any token is read)
    await call(
        exp("400 NUL in the query", 400, "GET", "/v1/sessions", None, None),
        "GET",
        "/v1/sessions?limit=%00",
        vendor,
    )
    await call(
        exp("413 body", 413, "POST", S + "/answers", None, None),
        "POST",
        f"/v1/sessions/{sid}/answers",
        evaluator,
        content=b"x" * (app.state.runtime.settings.max_body_bytes + 1),
    )
    await call(
        exp("422 hostile JSON", 422, "POST", "/v1/models", None, None),
        "POST",
        "/v1/models",
        {**vendor, "content-type": "application/json"},
        content=b'{"name": "a\\u0000b", "api_snapshot": "v1"}',
    )

    rows = await audit_rows(db_url, after=base)
    assert len(rows) == len(expected) == 18
    for row, want in zip(rows, expected, strict=True):
        got = (row.status, row.method, row.route, row.subject, row.org_id, row.session_id)
        session = uuid.UUID(want.session_id) if want.session_id else None
        assert got == (want.status, want.method, want.route, want.subject, want.org_id, session), (
            want.what
        )
        assert row.client == "127.0.0.1", want.what
        assert row.at is not None

    # why the guard refused, in its own words (which never echo the request's values);
    # requests the application answered carry no reason
    reasons = {row.status: row.reason for row in rows if row.reason is not None}
    assert [row.reason is not None for row in rows] == [False] * 15 + [True] * 3
    assert reasons[400].startswith("Bad request: ")
    assert reasons[413].startswith("Content too large: ")
    assert reasons[422].startswith("Invalid input: ") and "NUL" in reasons[422]

    # (b) the 409 and the 422 rolled their transaction back, and their rows are there
    assert [r.status for r in rows if r.status in (409, 422)] == [409, 422, 422, 422]

    # (c) nothing secret or submitted is in any column of any audit row
    secrets = {f"token {i}": t for i, t in enumerate(tokens)}
    secrets |= {f"token signature {i}": t.rsplit(".", 1)[-1] for i, t in enumerate(tokens)}
    for org in (world.a, world.b):
        secrets |= {f"{org.name} {role} key": key for role, key in org.keys.items()}
    secrets |= {"answer": ANSWER_TEXT, "duplicate": DUPLICATE_TEXT, "malformed": MALFORMED_TEXT}
    found = [
        (row.id, name, secret_name)
        for row in await audit_rows(db_url)
        for name, value in columns(row)
        for secret_name, secret in secrets.items()
        if secret in value
    ]
    assert found == []


def test_the_audit_routes_only_read(api_app_routes: set[tuple[str, str]]) -> None:
    """The log, its signed checkpoints, the signing key, the session records: all GET."""
    audit = {(m, p) for (m, p) in api_app_routes if "audit" in p}
    assert {("GET", "/v1/admin/audit"), ("GET", "/v1/audit/checkpoints")} <= audit
    assert {method for method, _ in audit} == {"GET"}


@pytest.fixture
def api_app_routes() -> set[tuple[str, str]]:
    from server.app import create_app
    from tests.support.api import test_settings
    from tests.system.test_route_matrix import app_routes

    return app_routes(create_app(test_settings("sqlite+aiosqlite:///unused.db")))


async def test_audit_rows_cannot_be_changed(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    admin = await login(client, world.a.keys["admin"])
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        response = await client.request(method, "/v1/admin/audit", headers=admin)
        assert response.status_code == 405, (method, response.text)
    before = [tuple(columns(r)) for r in await audit_rows(db_url)]
    assert len(before) >= 5

    engine = create_engine(db_url)
    try:
        for statement in (
            "UPDATE audit_log SET status = 200, subject = NULL",
            "UPDATE audit_log SET route = '/forged' WHERE id = (SELECT MAX(id) FROM audit_log)",
            "DELETE FROM audit_log",
            "DELETE FROM audit_log WHERE id = (SELECT MIN(id) FROM audit_log)",
        ):
            with pytest.raises(DBAPIError, match="append-only"):
                async with engine.begin() as connection:
                    await connection.execute(text(statement))
    finally:
        await engine.dispose()
    after = [tuple(columns(r)) for r in await audit_rows(db_url)]
    assert after[: len(before)] == before


async def test_audit_log_cannot_be_emptied_in_bulk(world_db: WorldDb, backend: str) -> None:
    """``TRUNCATE`` on PostgreSQL, an unqualified ``DELETE`` (SQLite's truncate) on SQLite."""
    db_url, _ = world_db
    now = "now()" if backend == "postgres" else "CURRENT_TIMESTAMP"
    empty_it = "TRUNCATE audit_log" if backend == "postgres" else "DELETE FROM audit_log"
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            await connection.execute(
                text(
                    "INSERT INTO audit_log (at, method, route, status) "
                    f"VALUES ({now}, 'GET', '/probe', 200)"
                )
            )
            await connection.commit()
            transaction = await connection.begin()
            try:
                with pytest.raises(DBAPIError, match="append-only"):
                    await connection.execute(text(empty_it))
            finally:
                await transaction.rollback()  # never actually lose the rows
    finally:
        await engine.dispose()


async def test_audit_read_is_for_auditors(api: Api) -> None:
    client, world, _ = api
    assert world.a.model_id is not None
    auditor = await login(client, world.a.keys["auditor"])
    vendor = await login(client, world.a.keys["vendor"])
    sid = str((await open_session(client, vendor, world.a.model_id))["id"])
    await client.get(f"/v1/sessions/{sid}", headers=vendor)

    response = await client.get("/v1/admin/audit", headers=auditor)
    assert response.status_code == 200
    rows = response.json()
    assert rows and [r["id"] for r in rows] == sorted((r["id"] for r in rows), reverse=True)
    assert {
        "id",
        "at",
        "subject",
        "org_id",
        "session_id",
        "method",
        "route",
        "status",
        "client",
        "repeats",
    } == set(rows[0])
    scoped = await client.get("/v1/admin/audit", params={"session_id": sid}, headers=auditor)
    assert scoped.status_code == 200
    assert {(r["route"], r["status"]) for r in scoped.json()} == {
        ("/v1/sessions/{session_id}", 200)
    }
    assert {r["session_id"] for r in scoped.json()} == {sid}

    refused = await client.get("/v1/admin/audit", headers=vendor)
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"


async def test_a_client_that_hangs_up_mid_body_is_audited_as_closed_not_as_a_500(
    api: Api, world_db: WorldDb
) -> None:
    """The client sends part of a body and leaves: nothing is answered, and the audit row
    says 499 (client closed the request) for the route it was for, not 500."""
    _, _, app = api
    db_url, _ = world_db
    base = await last_audit_id(db_url)
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"api_key": "pk_', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/auth/token",
        "raw_path": b"/v1/auth/token",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"proctor.test"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("proctor.test", 80),
        "state": {},
    }
    await app(scope, receive, send)
    assert sent == []
    (row,) = await audit_rows(db_url, after=base)
    assert (row.status, row.method, row.route) == (499, "POST", "/v1/auth/token")
    assert row.reason == "client closed the request"
