"""``proctor bank disciplines`` and the discipline options of ``proctor bank import``, as a
user runs them (a real subprocess) against SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bank.models import Item, SampleItem
from server.database import create_engine, unit_of_work
from server.sessions.models import EvalSession
from tests.support.api import evaluator_session, running_api, seed_world, test_settings
from tests.support.cli import proctor_db
from tests.support.factories import open_record, write_jsonl


def disciplines(url: str) -> dict[str, dict[str, Any]]:
    rows = json.loads(proctor_db(url, "bank", "disciplines", "--json").stdout)
    return {row["key"]: row for row in rows}


async def _session_disciplines(url: str, session_id: str) -> Counter[str]:
    engine = create_engine(url)
    try:
        async with unit_of_work(engine) as db:
            record = await db.get(EvalSession, uuid.UUID(session_id))
            assert record is not None
            rows = await db.execute(
                select(Item.discipline)
                .join(SampleItem, SampleItem.item_id == Item.id)
                .where(SampleItem.sample_id == record.sample_id)
            )
            return Counter(rows.scalars())
    finally:
        await engine.dispose()


async def test_set_changes_the_quota_split_of_a_new_fixed_session(
    fresh_db_url: str, run_sync: Any
) -> None:
    world = await seed_world(fresh_db_url, per_cell=6, disciplines=3)
    listed = await run_sync(disciplines, fresh_db_url)
    assert {k for k, row in listed.items() if row["evaluated"] and row["items"]} == {
        "d0",
        "d1",
        "d2",
    }
    async with running_api(test_settings(fresh_db_url)) as (_, client):
        _, before = await evaluator_session(client, world.a, n_items=12)
        assert await _session_disciplines(fresh_db_url, before) == {"d0": 4, "d1": 4, "d2": 4}
        await run_sync(proctor_db, fresh_db_url, "bank", "disciplines", "--set", "D0, d2")
        headers, after = await evaluator_session(client, world.b, n_items=12)
        assert await _session_disciplines(fresh_db_url, after) == {"d0": 6, "d2": 6}
        # evaluated disciplines without items: the refusal says so (not "all items seen")
        await run_sync(proctor_db, fresh_db_url, "bank", "disciplines", "--set", "military")
        assert world.b.model_id is not None
        refused = await client.post(
            "/v1/sessions", headers=headers, json={"model_id": str(world.b.model_id), "n_items": 4}
        )
        assert refused.status_code == 409, refused.text
        assert "no evaluated discipline of the bank has items" in refused.json()["detail"]
        await run_sync(proctor_db, fresh_db_url, "bank", "disciplines", "--set", "D0, d2")
    listed = await run_sync(disciplines, fresh_db_url)
    assert {k for k, row in listed.items() if row["evaluated"]} == {"d0", "d2"}
    refused = await run_sync(
        lambda: proctor_db(
            fresh_db_url, "bank", "disciplines", "--set", "d0,astrology", check=False
        )
    )
    assert refused.returncode == 1 and "unknown discipline 'astrology'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert {
        k for k, row in (await run_sync(disciplines, fresh_db_url)).items() if row["evaluated"]
    } == {"d0", "d2"}


async def test_import_refuses_maps_or_adds_an_unknown_discipline(
    fresh_db_url: str, tmp_path: Path, run_sync: Any
) -> None:
    bank = write_jsonl(
        tmp_path / "bank.jsonl", [open_record(0), open_record(1, discipline="Astrology")]
    )
    refused = await run_sync(
        lambda: proctor_db(fresh_db_url, "bank", "import", str(bank), check=False)
    )
    assert refused.returncode == 1
    assert f"{bank}:2: discipline: unknown discipline 'Astrology' (known: " in refused.stderr
    assert "nothing was imported" in refused.stderr
    assert sum(r["items"] for r in (await run_sync(disciplines, fresh_db_url)).values()) == 0

    bad_map = tmp_path / "map.csv"
    bad_map.write_text("source,discipline\nAstrology\n", encoding="utf-8")
    broken = await run_sync(
        lambda: proctor_db(
            fresh_db_url, "bank", "import", str(bank), "--discipline-map", str(bad_map), check=False
        )
    )
    assert broken.returncode == 1
    assert f"{bad_map}:2: row: expected 2 columns, got 1" in broken.stderr
    assert "Traceback" not in broken.stderr

    good_map = tmp_path / "good.csv"
    good_map.write_text("source,discipline\nastrology,Sciences\n", encoding="utf-8")
    await run_sync(
        proctor_db, fresh_db_url, "bank", "import", str(bank), "--discipline-map", str(good_map)
    )
    listed = await run_sync(disciplines, fresh_db_url)
    assert (listed["history"]["items"], listed["science"]["items"]) == (1, 1)

    other = write_jsonl(tmp_path / "other.jsonl", [open_record(5, discipline="Astro Logy")])
    await run_sync(proctor_db, fresh_db_url, "bank", "import", str(other), "--add-disciplines")
    added = (await run_sync(disciplines, fresh_db_url))["astro-logy"]
    assert added == {
        "key": "astro-logy",
        "display_name": "Astro Logy",
        "evaluated": True,
        "items": 1,
    }
