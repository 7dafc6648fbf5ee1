"""A ``pg_dump`` of a live system holds no reference answer and no explanation in clear.

On real PostgreSQL: a bank is imported (COPY), extra items with distinctive answers and
explanations too, a session is driven to completion through the API with right answers
(so model answers equal to the references, ``<think>`` blocks quoting them, matcher notes
and the judge's replies and verdicts all exist), scored by the in-process worker with the
local judge, and the real ``pg_dump`` binary writes a plain-text dump. Then every
distinctive reference answer and every explanation is searched for in it.

Short answers are left out of the search, with the reason in ``distinctive``; the dump
must contain sealed values; and a clear answer planted in the database is found in a
second dump, so the search can fail.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterable

import pytest
from sqlalchemy import select, text

from bank.importer import import_records
from bank.models import Item
from server.database import create_engine, unit_of_work
from tests.support.api import World, running_api, seed_world
from tests.support.database import database_session, new_postgres_database
from tests.support.factories import open_record, raw_records
from tests.support.fake_llm import FakeLlm
from tests.support.services import PostgresServer
from tests.support.sessions import drive_session, judged_settings, wait_until_scored

pytestmark = pytest.mark.postgres
MIN_CHARS = 4
PLANTED = "Planted clear answer 7f3c2e"


def distinctive(item: Item) -> bool:
    """Whether a leak of ``item``'s answer could be told from the dump's clear text.

    Left out: answers under ``MIN_CHARS`` characters (multiple-choice letters such as "A"
    or "BD", short numbers), which occur all over any dump by chance; true/false answers
    ("True", "False"), one bit whose secret is which item they belong to, not the word;
    and answers contained in the item's own question or options (a fill-in variant's answer
    is the text of the right option), which are not secret: the options are shown to every
    model, only which one is right is."""
    answer = item.answer.casefold()
    if len(answer.strip()) < MIN_CHARS or item.qtype == "true_false":
        return False
    public = [item.question, *(item.options or [])]
    return not any(answer in shown.casefold() for shown in public)


def leaks(dump: str, secrets: Iterable[str]) -> list[str]:
    """The secrets found in the dump (case-insensitively: matcher notes lower-case)."""
    folded = dump.casefold()
    return sorted({s for s in secrets if s.casefold() in folded})


def pg_dump(server: PostgresServer, db_url: str) -> str:
    """The real ``pg_dump`` of the database, plain format (SQL text with COPY data)."""
    name = db_url.rsplit("/", 1)[1]
    where = ["-h", server.host, "-p", str(server.port), "-U", server.user, "-d", name]
    result = subprocess.run(
        [str(server.bindir / "pg_dump"), "--format=plain", *where],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def _extra_items(db_url: str) -> None:
    """Open items whose answers and explanations are long and unique (easy to find)."""
    records = [
        open_record(
            i,
            discipline="d0",
            subdiscipline="S0",
            answer=f"The treaty of {uuid.uuid4().hex[:10]} settled it",
            explanation=f"Explanation {uuid.uuid4().hex}: both sides signed.",
        )
        for i in range(12)
    ]
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            await import_records(db, raw_records(records), add_disciplines=True)
    finally:
        await engine.dispose()


@pytest.fixture
async def pg_world(
    postgres_server: PostgresServer, postgres_template: str
) -> tuple[PostgresServer, str, World]:
    db_url = await new_postgres_database(postgres_server, postgres_template)
    world = await seed_world(db_url, per_cell=4)
    await _extra_items(db_url)
    return postgres_server, db_url, world


async def test_a_dump_of_a_live_system_holds_no_reference_in_clear(
    pg_world: tuple[PostgresServer, str, World], llm: FakeLlm
) -> None:
    server, db_url, world = pg_world
    async with running_api(judged_settings(db_url, llm)) as (_, client):
        driven = await drive_session(
            client, db_url, world, n_items=24, correct=lambda p: p % 4 != 3, think=True
        )
        await wait_until_scored(db_url, driven.id, within_s=180)

    async with database_session(db_url) as db:
        items = list((await db.execute(select(Item))).scalars())
        counts = {
            table: (await db.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            for table in ("answers", "verdicts")
        }
    assert counts["answers"] == 24 and counts["verdicts"] >= 24, counts
    answers = {i.answer for i in items if distinctive(i)}
    explanations = {i.explanation for i in items if i.explanation}
    assert len(answers) >= 16 and len(explanations) >= 13  # the search is not vacuous

    dump = pg_dump(server, db_url)
    assert dump.count("pk1:test:") >= len(items) + counts["answers"]
    assert leaks(dump, answers) == []
    assert leaks(dump, explanations) == []

    async with database_session(db_url) as db:  # a row as it was before sealing
        await db.execute(
            text("UPDATE items SET answer = :clear WHERE id = :id"),
            {"clear": PLANTED, "id": items[0].id},
        )
    assert leaks(pg_dump(server, db_url), answers | {PLANTED}) == [PLANTED]
