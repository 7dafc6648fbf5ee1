"""``proctor db backup`` and ``proctor db restore``: sessions continue after a restore.

PostgreSQL (an owner and a runtime role, no superuser, as deploy/README.md sets them up):
sessions are opened and half answered through the real app running as the runtime role,
the real CLI backs the database up as the owner, restores it into a new empty database of
the same server, and the app, on the restored database, takes the same sessions to the end
with the same tokens and keys: every answer, from before and after the backup, stored once
and scored. The restored database gives the runtime role exactly its privileges and keeps
the audit log's triggers. A restore over sessions is refused without ``--force``; a
truncated backup fails in one line and changes nothing; a backup taken by the runtime role
alone (a scheduled backup's set-up) restores as the owner; pg_dump older than the server is
explained; the password reaches pg_dump in its environment, never on its command line.

Embedded default (SQLite in a temporary data dir, the bank key in ``<data_dir>/bank-keys``):
the same round trip, the backup taken while the app runs (and holding no key) and restored
after the database file is lost; a database in use, one holding sessions, and a damaged
backup are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import stat
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import select

from server.config import Settings
from server.database import alembic_config
from server.scoring.models import Verdict
from server.sessions.models import Answer
from tests.support.api import World, login, open_session, running_api, seed_world, test_settings
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.cli import Run, proctor
from tests.support.database import fetch_all
from tests.support.services import PostgresServer
from tests.support.sessions import (
    answer_for,
    answer_items,
    table_counts,
    wait_until,
    wait_until_scored,
)

N_ITEMS = 6
BEFORE = 3
"""Items of each session answered before the backup; the rest after the restore."""
INSUFFICIENT_PRIVILEGE = "42501"
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


def correct(position: int) -> bool:
    return position % 2 == 0


def reply(item: Any, position: int) -> str:
    return answer_for(item, correct(position))


@dataclass
class Driven:
    """Sessions half answered before the backup: their ids, each one's vendor headers (a
    token bound to the session), and the answers sent, by position."""

    world: World
    headers: dict[str, dict[str, str]]
    answers: dict[str, dict[int, str]]


async def open_and_half_answer(client: httpx.AsyncClient, db_url: str, world: World) -> Driven:
    """Two sessions of organisation A, ``BEFORE`` of their ``N_ITEMS`` answered as its
    vendor."""
    assert world.a.model_id is not None
    evaluator = await login(client, world.a.keys["evaluator"])
    driven = Driven(world, {}, {})
    for _ in range(2):
        sid = str((await open_session(client, evaluator, world.a.model_id, N_ITEMS))["id"])
        headers = await login(client, world.a.keys["vendor"], sid)
        done = await answer_items(client, db_url, sid, headers, reply, limit=BEFORE)
        driven.headers[sid] = headers
        driven.answers[sid] = {a.position: a.answer for a in done}
        await wait_until(lambda sid=sid: all_judged(db_url, sid), within_s=120, what="judged")
    return driven


async def all_judged(db_url: str, sid: str) -> bool:
    """Whether every answer so far has its verdict and no job is queued or leased: a job
    leased when the backup is taken would wait out its lease (``PROCTOR_SCORING_LEASE_S``)
    after the restore, which the test is not about."""
    counts = await table_counts(db_url, uuid.UUID(sid))
    return bool(counts["jobs"] == {"done": BEFORE} and counts["verdicts"] == BEFORE)


async def finish_and_check(client: httpx.AsyncClient, db_url: str, driven: Driven) -> None:
    """Answer what is left of every session with the same tokens, wait until it is scored,
    and check every answer, from before and after, is stored once and scored once."""
    for sid, headers in driven.headers.items():
        done = await answer_items(client, db_url, sid, headers, reply)
        assert [a.position for a in done] == list(range(BEFORE, N_ITEMS))
        driven.answers[sid].update({a.position: a.answer for a in done})
    # the keys still log in on the restored database
    await login(client, driven.world.a.keys["vendor"], next(iter(driven.headers)))
    for sid, sent in driven.answers.items():
        session_id = uuid.UUID(sid)
        await wait_until_scored(db_url, session_id, within_s=120)
        stored = await fetch_all(
            db_url,
            select(Answer.position, Answer.answer)
            .where(Answer.session_id == session_id)
            .order_by(Answer.position),
        )
        assert [(row.position, row.answer) for row in stored] == sorted(sent.items())
        scores = await fetch_all(
            db_url,
            select(Verdict.position, Verdict.score).where(Verdict.session_id == session_id),
        )
        assert sorted(row.position for row in scores) == list(range(N_ITEMS))
        assert {row.position: row.score for row in scores} == {
            p: 3 if correct(p) else 0 for p in range(N_ITEMS)
        }
        counts = await table_counts(db_url, session_id)
        assert counts["answers"] == N_ITEMS and counts["distinct_verdicts"] == N_ITEMS


def assert_one_line_error(run: Run, command: str, *fragments: str) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {command}: "), run.stderr
    assert "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --------------------------------------------------------------------------- #
# PostgreSQL
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Cluster:
    """An owner and a runtime role (LOGIN, no superuser) on the throwaway server."""

    server: PostgresServer
    owner: str
    runtime: str

    def url(self, role: str, database: str, password: str | None = None) -> str:
        server = dataclasses.replace(self.server, user=role)
        url = server.url(database)
        return url.replace(f"//{role}@", f"//{role}:{password}@") if password else url

    def dsn(self, role: str, database: str) -> str:
        return dataclasses.replace(self.server, user=role).dsn(database)

    def env(self, database: str) -> dict[str, str]:
        """Both URLs, as a production deploy step has them."""
        return {
            "PROCTOR_MIGRATION_DATABASE_URL": self.url(self.owner, database),
            "PROCTOR_DATABASE_URL": self.url(self.runtime, database),
        }

    async def create_database(self) -> str:
        """A new, empty database owned by the owner."""
        name = f"t_backup_{uuid.uuid4().hex[:12]}"
        await as_superuser(self.server, f"CREATE DATABASE {name} OWNER {self.owner}")
        return name


@dataclass(frozen=True)
class Source:
    """A database with two half-answered sessions, and its backup."""

    database: str
    driven: Driven
    backup: Path
    run: Run


async def as_superuser(server: PostgresServer, *statements: str) -> None:
    connection = await asyncpg.connect(server.dsn("postgres"))
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def fetch(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn)
    try:
        return list(await connection.fetch(query, *args))
    finally:
        await connection.close()


def cli(env: dict[str, str], *args: str) -> Run:
    return proctor(*args, env=env)


@pytest.fixture(scope="module")
async def cluster(postgres_server: PostgresServer) -> AsyncIterator[Cluster]:
    suffix = uuid.uuid4().hex[:8]
    owner, runtime = f"backup_owner_{suffix}", f"backup_app_{suffix}"
    await as_superuser(
        postgres_server,
        f"CREATE ROLE {owner} LOGIN NOSUPERUSER",
        f"CREATE ROLE {runtime} LOGIN NOSUPERUSER",
    )
    made = Cluster(postgres_server, owner, runtime)
    yield made
    databases = await fetch(
        postgres_server.dsn("postgres"),
        "SELECT datname FROM pg_database WHERE datdba = to_regrole($1)",
        owner,
    )
    await as_superuser(
        postgres_server,
        *(f"DROP DATABASE {row['datname']} WITH (FORCE)" for row in databases),
        f"DROP ROLE {runtime}",
        f"DROP ROLE {owner}",
    )


@pytest.fixture(scope="module")
async def source(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Source:
    """Migrated by ``proctor db upgrade``, seeded and driven as the runtime role, then
    backed up by ``proctor db backup``."""
    database = await cluster.create_database()
    env = cluster.env(database)
    upgraded = await asyncio.to_thread(cli, env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    runtime_url = env["PROCTOR_DATABASE_URL"]
    world = await seed_world(runtime_url, qtypes=("multiple_choice",))
    settings = test_settings(runtime_url)
    async with running_api(settings) as (_, client):
        driven = await open_and_half_answer(client, runtime_url, world)
    path = tmp_path_factory.mktemp("backup") / "proctor.dump"
    run = await asyncio.to_thread(cli, env, "db", "backup", str(path))
    assert run.returncode == 0, run.stderr
    return Source(database, driven, path, run)


async def table_privileges(cluster: Cluster, database: str) -> dict[str, set[str]]:
    rows = await fetch(
        cluster.dsn(cluster.owner, database),
        "SELECT c.relname, p FROM pg_class c, unnest($2::text[]) AS p"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        " AND has_table_privilege($1::name, c.oid, p)",
        cluster.runtime,
        list(TABLE_PRIVILEGES),
    )
    granted: dict[str, set[str]] = {}
    for row in rows:
        granted.setdefault(row["relname"], set()).add(row["p"])
    return granted


async def audit_triggers(cluster: Cluster, database: str) -> list[str]:
    rows = await fetch(
        cluster.dsn(cluster.owner, database),
        "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('audit_log')"
        " AND NOT tgisinternal ORDER BY tgname",
    )
    return [row["tgname"] for row in rows]


async def answers_in(cluster: Cluster, database: str) -> list[tuple[Any, ...]]:
    rows = await fetch(
        cluster.dsn(cluster.owner, database),
        "SELECT session_id, position, answer FROM answers ORDER BY session_id, position",
    )
    return [tuple(row) for row in rows]


async def test_backup_is_written_with_mode_0600_and_reports_size_time_and_the_keys(
    source: Source,
) -> None:
    assert stat.S_IMODE(source.backup.stat().st_mode) == 0o600
    assert source.backup.read_bytes().startswith(b"PGDMP")  # pg_dump's custom format
    assert f"written to {source.backup}: " in source.run.stdout
    assert " KiB in " in source.run.stdout and source.run.stdout.rstrip().endswith(" s")
    assert "PROCTOR_BANK_KEYS" in source.run.stderr and "separately" in source.run.stderr
    assert not [p for p in source.backup.parent.iterdir() if p.name.endswith(".tmp")]


async def test_sessions_continue_after_a_restore_into_a_new_database(
    cluster: Cluster, source: Source
) -> None:
    target = await cluster.create_database()  # empty: not even migrated
    env = cluster.env(target)
    restored = await asyncio.to_thread(cli, env, "db", "restore", str(source.backup))
    assert restored.returncode == 0, restored.stderr
    assert f"runtime role {cluster.runtime}" in restored.stdout
    assert "PROCTOR_BANK_KEYS" in restored.stderr

    # the restored objects belong to the owner; the runtime role has exactly its grants
    assert await table_privileges(cluster, target) == await table_privileges(
        cluster, source.database
    )
    assert (await table_privileges(cluster, target))["audit_log"] == {"SELECT", "INSERT"}
    owners = await fetch(
        cluster.dsn(cluster.owner, target),
        "SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class"
        " WHERE relnamespace = 'public'::regnamespace",
    )
    assert [row["owner"] for row in owners] == [cluster.owner]
    assert await answers_in(cluster, target) == await answers_in(cluster, source.database)

    runtime_url = env["PROCTOR_DATABASE_URL"]
    settings = test_settings(runtime_url)
    async with running_api(settings) as (_, client):
        await finish_and_check(client, runtime_url, source.driven)


async def test_the_restored_audit_log_stays_append_only(cluster: Cluster, source: Source) -> None:
    target = await cluster.create_database()
    restored = await asyncio.to_thread(
        cli, cluster.env(target), "db", "restore", str(source.backup)
    )
    assert restored.returncode == 0, restored.stderr
    triggers = await audit_triggers(cluster, target)
    assert triggers == await audit_triggers(cluster, source.database)
    assert "audit_log_append_only" in triggers
    assert (await fetch(cluster.dsn(cluster.owner, target), "SELECT count(*) FROM audit_log"))[0][
        0
    ] > 0
    for role in (cluster.runtime, cluster.owner):
        connection = await asyncpg.connect(cluster.dsn(role, target))
        try:
            with pytest.raises(asyncpg.PostgresError) as refused:
                await connection.execute("UPDATE audit_log SET status = 200")
        finally:
            await connection.close()
        if role == cluster.runtime:
            assert refused.value.sqlstate == INSUFFICIENT_PRIVILEGE
        else:  # the owner may UPDATE, but the restored trigger refuses it
            assert "audit_log is append-only" in str(refused.value)


async def test_a_restore_over_sessions_needs_force_and_a_damaged_backup_changes_nothing(
    cluster: Cluster, source: Source, tmp_path: Path
) -> None:
    target = await cluster.create_database()
    env = cluster.env(target)
    first = await asyncio.to_thread(cli, env, "db", "restore", str(source.backup))
    assert first.returncode == 0, first.stderr
    before = await answers_in(cluster, target)
    assert len(before) == 2 * BEFORE

    again = await asyncio.to_thread(cli, env, "db", "restore", str(source.backup))
    assert_one_line_error(again, "proctor db restore", "holds 2 session(s)", "--force")

    truncated = tmp_path / "truncated.dump"
    data = source.backup.read_bytes()
    truncated.write_bytes(data[: len(data) * 2 // 3])
    damaged = await asyncio.to_thread(cli, env, "db", "restore", "--force", str(truncated))
    assert_one_line_error(damaged, "proctor db restore", "pg_restore failed")
    assert await answers_in(cluster, target) == before
    assert await audit_triggers(cluster, target) == await audit_triggers(cluster, source.database)

    runtime_only = {"PROCTOR_DATABASE_URL": env["PROCTOR_DATABASE_URL"]}
    as_runtime = await asyncio.to_thread(
        cli, runtime_only, "db", "restore", "--force", str(source.backup)
    )
    assert_one_line_error(
        as_runtime, "proctor db restore", "PROCTOR_MIGRATION_DATABASE_URL", "not changed"
    )
    assert await answers_in(cluster, target) == before

    not_a_backup = tmp_path / "notes.txt"
    not_a_backup.write_text("hello\n")
    refused = await asyncio.to_thread(cli, env, "db", "restore", "--force", str(not_a_backup))
    assert_one_line_error(refused, "proctor db restore", "pg_restore failed")

    forced = await asyncio.to_thread(cli, env, "db", "restore", "--force", str(source.backup))
    assert forced.returncode == 0, forced.stderr
    assert "replacing 2 session(s)" in forced.stdout
    assert await answers_in(cluster, target) == before


async def test_a_backup_by_the_runtime_role_alone_restores_as_the_owner(
    cluster: Cluster, source: Source, tmp_path: Path
) -> None:
    """A scheduled backup holds only the runtime role's password (docs/operations.md)."""
    path = tmp_path / "by-runtime.dump"
    runtime_only = {"PROCTOR_DATABASE_URL": cluster.url(cluster.runtime, source.database)}
    run = await asyncio.to_thread(cli, runtime_only, "db", "backup", str(path))
    assert run.returncode == 0, run.stderr
    assert f"backup of postgresql+asyncpg://{cluster.runtime}@" in run.stdout
    target = await cluster.create_database()
    restored = await asyncio.to_thread(cli, cluster.env(target), "db", "restore", str(path))
    assert restored.returncode == 0, restored.stderr
    assert await answers_in(cluster, target) == await answers_in(cluster, source.database)
    assert await table_privileges(cluster, target) == await table_privileges(
        cluster, source.database
    )
    assert await audit_triggers(cluster, target) == await audit_triggers(cluster, source.database)


def fake_pg_dump(directory: Path, version: str) -> Path:
    """A ``pg_dump`` reporting ``version`` that records its arguments and PGPASSWORD."""
    directory.mkdir()
    script = directory / "pg_dump"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "pg_dump (PostgreSQL) {version}"; exit 0; fi\n'
        f'printf "%s\\n" "$@" > "{directory}/argv"\n'
        f'printf "%s" "$PGPASSWORD" > "{directory}/password"\n'
    )
    script.chmod(0o755)
    return directory


async def test_pg_dump_older_than_the_server_is_explained(
    cluster: Cluster, source: Source, tmp_path: Path
) -> None:
    bindir = fake_pg_dump(tmp_path / "bin", "9.6.24")
    output = tmp_path / "old.dump"
    run = await asyncio.to_thread(
        cli, cluster.env(source.database), "db", "backup", "--pg-bindir", str(bindir), str(output)
    )
    server = (await fetch(cluster.server.dsn("postgres"), "SHOW server_version_num"))[0][0]
    major = int(server) // 10_000
    assert_one_line_error(
        run,
        "proctor db backup",
        f"is PostgreSQL 9 but the server is PostgreSQL {major}",
        f"postgresql-client-{major}",
    )
    assert not output.exists() and not (bindir / "argv").exists()


async def test_the_password_goes_to_pg_dump_in_its_environment_only(
    cluster: Cluster, source: Source, tmp_path: Path
) -> None:
    bindir = fake_pg_dump(tmp_path / "bin", "99.0")
    password = "s3cret-Pw-" + uuid.uuid4().hex[:8]
    env = {
        # trust authentication: the server ignores the password; pg_dump must get it
        "PROCTOR_MIGRATION_DATABASE_URL": cluster.url(cluster.owner, source.database, password),
        "PROCTOR_DATABASE_URL": cluster.url(cluster.runtime, source.database),
    }
    run = await asyncio.to_thread(
        cli, env, "db", "backup", "--pg-bindir", str(bindir), str(tmp_path / "b.dump")
    )
    assert run.returncode == 0, run.stderr
    argv = (bindir / "argv").read_text()
    assert password not in argv and password not in run.stdout + run.stderr
    assert (bindir / "password").read_text() == password
    assert "--format=custom" in argv.splitlines()
    assert f"--username={cluster.owner}" in argv.splitlines()
    assert f"--dbname={source.database}" in argv.splitlines()


# --------------------------------------------------------------------------- #
# Embedded default (SQLite)
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class DataDir:
    path: Path

    @property
    def database(self) -> Path:
        return self.path / "proctor.db"

    @property
    def url(self) -> str:
        return f"sqlite+aiosqlite:///{self.database}"

    @property
    def env(self) -> dict[str, str]:
        return {"PROCTOR_DATA_DIR": str(self.path), "PROCTOR_BANK_KEYS": ""}

    @property
    def settings(self) -> Settings:
        """The app on the data dir, its bank key read from ``<data_dir>/bank-keys``."""
        return test_settings(self.url, data_dir=self.path, bank_keys=None)


@pytest.fixture
async def data_dir(tmp_path: Path) -> DataDir:
    """An embedded default's data dir, migrated by ``proctor db upgrade``, with a bank."""
    made = DataDir(tmp_path / "data")
    upgraded = await asyncio.to_thread(cli, made.env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    key_file = made.path / "bank-keys"
    key_file.write_text(TEST_BANK_KEYS + "\n")  # the key this process seals the bank with
    key_file.chmod(0o600)
    return made


async def sqlite_answers(data_dir: DataDir) -> list[tuple[Any, ...]]:
    rows = await fetch_all(
        data_dir.url,
        select(Answer.session_id, Answer.position, Answer.answer).order_by(
            Answer.session_id, Answer.position
        ),
    )
    return [tuple(row) for row in rows]


async def test_sqlite_sessions_continue_after_the_database_is_lost_and_restored(
    data_dir: DataDir, tmp_path: Path
) -> None:
    world = await seed_world(data_dir.url, qtypes=("multiple_choice",))
    path = tmp_path / "backups" / "proctor.db"
    path.parent.mkdir()
    async with running_api(data_dir.settings) as (_, client):
        driven = await open_and_half_answer(client, data_dir.url, world)
        # online: the server is running while the backup is taken
        backed_up = await asyncio.to_thread(cli, data_dir.env, "db", "backup", str(path))
        assert backed_up.returncode == 0, backed_up.stderr
        # and a restore while it runs is refused
        busy = await asyncio.to_thread(cli, data_dir.env, "db", "restore", "--force", str(path))
        assert_one_line_error(busy, "proctor db restore", "in use", "stop proctor serve")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "written to" in backed_up.stdout and "bank-keys" in backed_up.stderr
    backup = path.read_bytes()
    assert TEST_BANK_KEYS.split(":")[1].encode() not in backup
    assert b"pk1:" in backup  # reference answers and answers, sealed
    before = await sqlite_answers(data_dir)

    for lost in data_dir.path.glob("proctor.db*"):
        lost.unlink()
    restored = await asyncio.to_thread(cli, data_dir.env, "db", "restore", str(path))
    assert restored.returncode == 0, restored.stderr
    assert f"into {data_dir.database}" in restored.stdout
    assert "warning" not in restored.stderr  # the schema is this version's head
    assert await sqlite_answers(data_dir) == before and len(before) == 2 * BEFORE

    async with running_api(data_dir.settings) as (_, client):
        await finish_and_check(client, data_dir.url, driven)


async def test_sqlite_restore_refuses_sessions_without_force_and_damaged_backups(
    data_dir: DataDir, tmp_path: Path
) -> None:
    world = await seed_world(data_dir.url, qtypes=("multiple_choice",))
    async with running_api(data_dir.settings) as (_, client):
        await open_and_half_answer(client, data_dir.url, world)
    path = tmp_path / "proctor-backup.db"
    backed_up = await asyncio.to_thread(cli, data_dir.env, "db", "backup", str(path))
    assert backed_up.returncode == 0, backed_up.stderr
    before = await sqlite_answers(data_dir)

    refused = await asyncio.to_thread(cli, data_dir.env, "db", "restore", str(path))
    assert_one_line_error(refused, "proctor db restore", "holds 2 session(s)", "--force")

    truncated = tmp_path / "truncated.db"
    data = path.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    damaged = await asyncio.to_thread(cli, data_dir.env, "db", "restore", "--force", str(truncated))
    assert_one_line_error(damaged, "proctor db restore", "not a usable Proctor backup")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    rejected = await asyncio.to_thread(cli, data_dir.env, "db", "restore", "--force", str(garbage))
    assert_one_line_error(rejected, "proctor db restore", "not a usable Proctor backup")
    assert await sqlite_answers(data_dir) == before

    forced = await asyncio.to_thread(cli, data_dir.env, "db", "restore", "--force", str(path))
    assert forced.returncode == 0, forced.stderr
    assert "replacing 2 session(s)" in forced.stdout
    assert await sqlite_answers(data_dir) == before


async def test_backup_errors_are_one_line(data_dir: DataDir, tmp_path: Path) -> None:
    missing_dir = await asyncio.to_thread(
        cli, data_dir.env, "db", "backup", str(tmp_path / "no" / "such" / "b.db")
    )
    assert_one_line_error(missing_dir, "proctor db backup", "does not exist")
    into_dir = await asyncio.to_thread(cli, data_dir.env, "db", "backup", str(tmp_path))
    assert_one_line_error(into_dir, "proctor db backup", "is a directory")
    no_file = await asyncio.to_thread(
        cli, data_dir.env, "db", "restore", str(tmp_path / "absent.db")
    )
    assert_one_line_error(no_file, "proctor db restore", "no backup file")
    nothing = await asyncio.to_thread(
        cli, {"PROCTOR_DATA_DIR": str(tmp_path / "empty")}, "db", "backup", str(tmp_path / "x.db")
    )
    assert_one_line_error(nothing, "proctor db backup", "nothing to back up")


@pytest.mark.parametrize(
    ("revision", "advice"),
    [("previous", "run proctor db upgrade"), ("0000deadbeef", "unknown to this version")],
)
async def test_a_restored_schema_other_than_head_says_what_to_do(
    data_dir: DataDir, tmp_path: Path, revision: str, advice: str
) -> None:
    path = tmp_path / "b.db"
    backed_up = await asyncio.to_thread(cli, data_dir.env, "db", "backup", str(path))
    assert backed_up.returncode == 0, backed_up.stderr
    script = ScriptDirectory.from_config(alembic_config(""))
    if revision == "previous":
        head = script.get_revision(script.get_current_head() or "head")
        assert head is not None
        down = head.down_revision
        assert isinstance(down, str)
        revision = down
    with contextlib.closing(sqlite3.connect(path)) as backup:
        backup.execute("UPDATE alembic_version SET version_num = ?", (revision,))
        backup.commit()
    elsewhere = DataDir(tmp_path / "elsewhere")
    restored = await asyncio.to_thread(cli, elsewhere.env, "db", "restore", str(path))
    assert restored.returncode == 0, restored.stderr
    assert f"schema revision {revision}" in restored.stdout
    assert "warning: the backup's schema" in restored.stderr and advice in restored.stderr
