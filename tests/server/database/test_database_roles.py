"""The server runs as a PostgreSQL role that owns nothing, so the audit log is append-only
against the server itself, not only against mistakes.

One database per module, owned by an owner role (no superuser) and migrated by the real
``proctor db upgrade`` with ``PROCTOR_MIGRATION_DATABASE_URL`` (the owner) and
``PROCTOR_DATABASE_URL`` (the runtime role). Then: the runtime role owns nothing and holds
exactly its privileges (re-granting removes drift); it can append to and read the audit log
but every way of altering, disabling, rewriting or dropping it fails with
insufficient_privilege (42501); the real app works end to end as the runtime role; the
server warns when it connects as the owner, a member of the owner or a superuser; and
``proctor serve`` migrates a new database as the owner and warns only as the owner; once
migrated, the migration step runs as the runtime role alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from server.database import grant_runtime_privileges, migrate, runtime_role_warning
from tests.support.api import (
    JWT_SECRET,
    live_server,
    login,
    open_session,
    running_api,
    seed_world,
    test_settings,
)
from tests.support.services import PostgresServer

pytestmark = pytest.mark.postgres

INSUFFICIENT_PRIVILEGE = "42501"
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
DML = {"SELECT", "INSERT", "UPDATE", "DELETE"}


@dataclass(frozen=True)
class Roles:
    """An owner, a runtime role and a member of the owner (all LOGIN, no superuser) on one
    database owned by the owner, migrated and granted by ``proctor db upgrade``."""

    server: PostgresServer
    database: str
    owner: str
    runtime: str
    member: str
    upgrade_output: str

    def url(self, role: str, database: str | None = None) -> str:
        """SQLAlchemy URL of ``role`` on the module's (or another) database."""
        return dataclasses.replace(self.server, user=role).url(database or self.database)

    def dsn(self, role: str) -> str:
        return dataclasses.replace(self.server, user=role).dsn(self.database)

    @property
    def owner_url(self) -> str:
        return self.url(self.owner)

    @property
    def runtime_url(self) -> str:
        return self.url(self.runtime)


async def as_superuser(server: PostgresServer, *statements: str) -> None:
    connection = await asyncpg.connect(server.dsn("postgres"))
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def proctor_env(**variables: str) -> dict[str, str]:
    """The environment without any ``PROCTOR_*`` variable, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(variables)
    return env


def db_upgrade(owner_url: str, runtime_url: str) -> str:
    """Run ``proctor db upgrade`` with the two URLs; its stdout."""
    result = subprocess.run(
        [sys.executable, "-m", "server", "db", "upgrade"],
        env=proctor_env(PROCTOR_MIGRATION_DATABASE_URL=owner_url, PROCTOR_DATABASE_URL=runtime_url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
async def roles(postgres_server: PostgresServer) -> AsyncIterator[Roles]:
    suffix = uuid.uuid4().hex[:8]
    owner, runtime, member = (f"proctor_{r}_{suffix}" for r in ("owner", "app", "member"))
    database = f"t_roles_{suffix}"
    await as_superuser(
        postgres_server,
        f"CREATE ROLE {owner} LOGIN NOSUPERUSER",
        f"CREATE ROLE {runtime} LOGIN NOSUPERUSER",
        f"CREATE ROLE {member} LOGIN NOSUPERUSER IN ROLE {owner}",
        f"CREATE DATABASE {database} OWNER {owner}",
    )
    partial = Roles(postgres_server, database, owner, runtime, member, "")
    output = await asyncio.to_thread(db_upgrade, partial.owner_url, partial.runtime_url)
    yield dataclasses.replace(partial, upgrade_output=output)
    await as_superuser(
        postgres_server,
        f"DROP DATABASE {database} WITH (FORCE)",
        f"DROP ROLE {member}",
        f"DROP ROLE {runtime}",
        f"DROP ROLE {owner}",
    )


async def fetch(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn)
    try:
        return list(await connection.fetch(query, *args))
    finally:
        await connection.close()


async def table_privileges(roles: Roles) -> dict[str, set[str]]:
    """The runtime role's privileges on every table of the public schema."""
    rows = await fetch(
        roles.dsn(roles.owner),
        "SELECT c.relname, p FROM pg_class c, unnest($2::text[]) AS p"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        " AND has_table_privilege($1::name, c.oid, p)",
        roles.runtime,
        list(TABLE_PRIVILEGES),
    )
    tables = await fetch(
        roles.dsn(roles.owner),
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        " AND relkind = 'r'",
    )
    granted: dict[str, set[str]] = {row["relname"]: set() for row in tables}
    for row in rows:
        granted[row["relname"]].add(row["p"])
    return granted


async def test_db_upgrade_migrates_as_the_owner_and_the_runtime_role_owns_nothing(
    roles: Roles,
) -> None:
    owners = await fetch(
        roles.dsn(roles.owner),
        "SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace",
    )
    assert [row["owner"] for row in owners] == [roles.owner]
    owned_by_runtime = await fetch(
        roles.dsn(roles.owner),
        "SELECT relname FROM pg_class WHERE relowner = to_regrole($1)"
        " UNION ALL SELECT proname FROM pg_proc WHERE proowner = to_regrole($1)"
        " UNION ALL SELECT nspname FROM pg_namespace WHERE nspowner = to_regrole($1)",
        roles.runtime,
    )
    assert owned_by_runtime == []
    assert f"runtime role {roles.runtime}" in roles.upgrade_output


async def test_the_runtime_role_holds_exactly_its_privileges_and_regranting_removes_drift(
    roles: Roles,
) -> None:
    expected = await table_privileges(roles)
    for append_only in ("audit_log", "chain_checkpoints", "result_ledger"):
        assert expected.pop(append_only) == {"SELECT", "INSERT"}, append_only
    assert expected.pop("alembic_version") == {"SELECT"}
    assert len(expected) > 10 and all(granted == DML for granted in expected.values())
    sequences = await fetch(
        roles.dsn(roles.owner),
        "SELECT relname, has_sequence_privilege($1::name, oid, 'USAGE') AS usage,"
        " has_sequence_privilege($1::name, oid, 'UPDATE') AS setval"
        " FROM pg_class WHERE relkind = 'S'",
        roles.runtime,
    )
    assert "audit_log_id_seq" in {row["relname"] for row in sequences}
    assert all(row["usage"] and not row["setval"] for row in sequences)

    # drift: someone grants the runtime role more; the startup check sees it, a re-grant
    # (every upgrade) takes it back, and granting twice changes nothing
    await fetch(
        roles.dsn(roles.owner),
        f"GRANT UPDATE, TRUNCATE, TRIGGER ON audit_log, answers TO {roles.runtime}",
    )
    warning = await asyncio.to_thread(runtime_role_warning, roles.runtime_url)
    assert warning is not None and "TRIGGER, TRUNCATE, UPDATE on audit_log" in warning
    before = await table_privileges(roles)
    for _ in range(2):
        granted = await asyncio.to_thread(
            grant_runtime_privileges, roles.owner_url, roles.runtime_url
        )
        assert granted == roles.runtime
    after = await table_privileges(roles)
    assert before["audit_log"] == {"SELECT", "INSERT", "UPDATE", "TRUNCATE", "TRIGGER"}
    assert after["audit_log"] == {"SELECT", "INSERT"} and after["answers"] == DML
    assert await asyncio.to_thread(runtime_role_warning, roles.runtime_url) is None
    # the owner itself as the runtime role: nothing to grant
    assert grant_runtime_privileges(roles.owner_url, roles.owner_url) is None


async def test_a_current_schema_needs_no_owner_to_start(roles: Roles) -> None:
    """Production: replicas get the runtime URL only, and their migration step (the one
    ``proctor serve`` runs) has nothing to do and nothing to grant."""
    assert await asyncio.to_thread(migrate, roles.runtime_url, roles.runtime_url) is None


async def test_the_runtime_role_can_append_to_and_read_the_audit_log(roles: Roles) -> None:
    connection = await asyncpg.connect(roles.dsn(roles.runtime))
    try:
        row_id = await connection.fetchval(
            "INSERT INTO audit_log (at, method, route, status)"
            " VALUES (now(), 'GET', '/roles-test', 200) RETURNING id"
        )
        route = await connection.fetchval("SELECT route FROM audit_log WHERE id = $1", row_id)
    finally:
        await connection.close()
    assert route == "/roles-test"


TAMPERING = [  # each succeeds as the owner (TRUNCATE audit_log: refused by its trigger)
    "ALTER TABLE audit_log DISABLE TRIGGER ALL",
    "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only",
    "ALTER TABLE audit_log ADD COLUMN note text",
    "ALTER TABLE audit_log RENAME TO audit_log_old",
    "UPDATE audit_log SET status = 200",
    "DELETE FROM audit_log",
    "TRUNCATE audit_log",
    "LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE",
    "DROP TRIGGER audit_log_append_only ON audit_log",
    "DROP TRIGGER audit_log_no_truncate ON audit_log",
    "DROP TABLE audit_log",
    "CREATE TRIGGER sneak BEFORE INSERT ON audit_log"
    " FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()",
    "CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger"
    " LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    "DROP FUNCTION audit_log_append_only() CASCADE",
    "SELECT setval('audit_log_id_seq', 1)",
    "UPDATE alembic_version SET version_num = version_num",
    "ALTER TABLE answers ADD COLUMN note text",
    "TRUNCATE answers CASCADE",
    "DROP TABLE answers CASCADE",
    "CREATE TABLE runtime_owned (x int)",
    "SET ROLE {owner}",
]


@pytest.mark.parametrize("statement", TAMPERING)
async def test_the_runtime_role_cannot_alter_disable_rewrite_or_drop(
    roles: Roles, statement: str
) -> None:
    connection = await asyncpg.connect(roles.dsn(roles.runtime))
    try:
        with pytest.raises(asyncpg.PostgresError) as refused:
            async with connection.transaction():
                await connection.execute(statement.format(owner=roles.owner))
    finally:
        await connection.close()
    error = refused.value
    assert error.sqlstate == INSUFFICIENT_PRIVILEGE, (error.sqlstate, str(error))


async def test_the_app_works_end_to_end_as_the_runtime_role(roles: Roles) -> None:
    world = await seed_world(roles.runtime_url)  # the bank import (COPY) included
    assert world.a.model_id is not None
    async with running_api(test_settings(roles.runtime_url)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        session = await open_session(client, evaluator, world.a.model_id, n_items=1)
        sid = session["id"]
        item = await client.get(f"/v1/sessions/{sid}/next", headers=evaluator)
        assert item.status_code == 200, item.text
        body = {"position": 0, "item_id": item.json()["item_id"], "answer": "A"}
        answered = await client.post(f"/v1/sessions/{sid}/answers", json=body, headers=evaluator)
        assert answered.status_code == 201, answered.text
        scoring = await judged(client, evaluator, sid)  # the in-process worker's writes
        assert scoring["judged"] == 1 and scoring["waiting"] == 0
        admin = await login(client, world.a.keys["admin"])
        audit = await client.get("/v1/admin/audit", headers=admin)
        assert audit.status_code == 200, audit.text
    logged = {(row["method"], row["route"], row["status"]) for row in audit.json()}
    assert {
        ("POST", "/v1/auth/token", 200),
        ("POST", "/v1/sessions", 201),
        ("GET", "/v1/sessions/{session_id}/next", 200),
        ("POST", "/v1/sessions/{session_id}/answers", 201),
    } <= logged


async def judged(client: httpx.AsyncClient, headers: dict[str, str], sid: str) -> Any:
    """The session's scoring once its one answer is judged and its job done (10 s at most;
    the counts are read by separate statements, so a verdict can show before its job's
    state)."""
    deadline = time.monotonic() + 10
    while True:
        response = await client.get(f"/v1/sessions/{sid}/scoring", headers=headers)
        assert response.status_code == 200, response.text
        now = response.json()
        if (now["judged"] and not now["waiting"]) or time.monotonic() > deadline:
            return now
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ("runtime", None),
        ("owner", "which owns audit_log"),
        ("member", "which is a member of 'proctor_owner_"),
        ("postgres", "as superuser 'postgres'"),
    ],
)
async def test_the_server_warns_at_startup_unless_it_runs_as_the_runtime_role(
    roles: Roles, caplog: pytest.LogCaptureFixture, who: str, expected: str | None
) -> None:
    role = {"runtime": roles.runtime, "owner": roles.owner, "member": roles.member}.get(who, who)
    with caplog.at_level(logging.WARNING, logger="server.database"):
        async with running_api(test_settings(roles.url(role))):
            pass
    warnings = [r.getMessage() for r in caplog.records if r.name == "server.database"]
    if expected is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and expected in warnings[0], warnings
        assert "PROCTOR_MIGRATION_DATABASE_URL" in warnings[0]


async def test_serve_migrates_a_new_database_as_the_owner_and_warns_only_as_the_owner(
    roles: Roles, tmp_path: Path
) -> None:
    database = f"t_serve_{uuid.uuid4().hex[:8]}"
    await as_superuser(roles.server, f"CREATE DATABASE {database} OWNER {roles.owner}")
    owner_url, runtime_url = roles.url(roles.owner, database), roles.url(roles.runtime, database)
    common = {"PROCTOR_JWT_SECRET": JWT_SECRET}
    try:
        two_roles = {
            "PROCTOR_MIGRATION_DATABASE_URL": owner_url,
            "PROCTOR_DATABASE_URL": runtime_url,
        }
        as_runtime = await asyncio.to_thread(serve_log, two_roles | common, tmp_path / "app")
        assert "connects to PostgreSQL" not in as_runtime, as_runtime
        as_owner = await asyncio.to_thread(
            serve_log, {"PROCTOR_DATABASE_URL": owner_url} | common, tmp_path / "owner"
        )
        assert f"WARNING: the server connects to PostgreSQL as '{roles.owner}'" in as_owner
        owner = await fetch(
            dataclasses.replace(roles.server, user=roles.owner).dsn(database),
            "SELECT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relname = 'audit_log'",
        )
        assert [row["owner"] for row in owner] == [roles.owner]
    finally:
        await as_superuser(roles.server, f"DROP DATABASE {database} WITH (FORCE)")


def serve_log(env: dict[str, str], workdir: Path) -> str:
    """Start ``proctor serve`` with ``env``, check that it answers, stop it; its output."""
    workdir.mkdir()
    with live_server(env, workdir) as server:
        response = httpx.post(server.url + "/v1/auth/token", json={"api_key": "pk_" + "x" * 40})
        assert response.status_code == 401, response.text  # a refusal, audited as the role
    return (workdir / "serve.log").read_text()
