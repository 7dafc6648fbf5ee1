"""One discipline taxonomy in the bank, on SQLite and PostgreSQL: canonical keys on import,
unknown disciplines refused or added, the evaluated set and the sessions' quota split."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bundled_datasets import sample_path
from bank.disciplines import (
    UnknownDisciplines,
    list_disciplines,
    sampled_disciplines,
    set_evaluated,
)
from bank.formats import read_records
from bank.formats.discipline_maps import load_discipline_map
from bank.importer import ImportRefused, import_records
from bank.models import Discipline, Item, Stratum
from bank.sampling.service import draw_sample
from bank.taxonomy import DEFAULT_TAXONOMY
from tests.support.factories import make_org, mc_record, open_record, raw_records, write_jsonl


async def _items(session: AsyncSession) -> int:
    return int((await session.execute(select(func.count()).select_from(Item))).scalar_one())


async def test_a_fresh_bank_holds_the_default_taxonomy(db_session: AsyncSession) -> None:
    rows = await list_disciplines(db_session)
    assert {(r.key, r.display_name, r.evaluated) for r in rows} == {
        (d.key, d.display_name, d.evaluated) for d in DEFAULT_TAXONOMY
    }
    assert all(r.items == 0 for r in rows)


async def test_any_spelling_of_a_discipline_is_stored_as_its_key(db_session: AsyncSession) -> None:
    spellings = ["Law", " LAW ", "law", "法学", "history", "HISTORY", "Hist."]
    records = [open_record(i, discipline=name) for i, name in enumerate(spellings)]
    await import_records(db_session, raw_records(records))
    stored = Counter((await db_session.execute(select(Item.discipline))).scalars())
    assert stored == {"law": 4, "history": 3}
    strata = set((await db_session.execute(select(Stratum.discipline))).scalars())
    assert strata == {"law", "history"}


async def test_an_unknown_discipline_refuses_the_import_naming_file_and_line(
    db_session: AsyncSession,
) -> None:
    records = [open_record(0), open_record(1, discipline="Astrology"), mc_record(2)]
    with pytest.raises(ImportRefused) as refused:
        await import_records(db_session, raw_records(records, path="bank.jsonl"))
    (error,) = refused.value.errors
    assert str(error).startswith(
        "bank.jsonl:2: discipline: unknown discipline 'Astrology' (known: agronomy, arts, "
    )
    assert await _items(db_session) == 0
    assert "astrology" not in {r.key for r in await list_disciplines(db_session)}


async def test_add_disciplines_adds_the_unknown_one_evaluated(db_session: AsyncSession) -> None:
    records = [open_record(0, discipline="Astro Logy"), open_record(1, discipline="astro_logy")]
    report = await import_records(db_session, raw_records(records), add_disciplines=True)
    assert report.disciplines_added == ["astro-logy"]
    added = await db_session.get(Discipline, "astro-logy")
    assert added is not None and added.display_name == "Astro Logy" and added.evaluated
    assert set((await db_session.execute(select(Item.discipline))).scalars()) == {"astro-logy"}


async def test_an_operator_map_files_a_category_under_a_discipline(
    db_session: AsyncSession, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "bank.jsonl", [open_record(0, discipline="Astrology")])
    mapping = tmp_path / "map.csv"
    mapping.write_text("source,discipline\nASTROLOGY,Sciences\n", encoding="utf-8")
    records = read_records(path, None, load_discipline_map(mapping))
    await import_records(db_session, records)
    item = (await db_session.execute(select(Item))).scalar_one()
    assert (item.discipline, item.subdiscipline) == ("science", "Astrology / Modern")


async def test_set_evaluated_accepts_any_spelling_and_refuses_unknown_names(
    db_session: AsyncSession,
) -> None:
    chosen = await set_evaluated(db_session, ["LAW", "Military Science", "history"])
    assert chosen == ["history", "law", "military"]
    evaluated = {r.key for r in await list_disciplines(db_session) if r.evaluated}
    assert evaluated == set(chosen)
    with pytest.raises(UnknownDisciplines, match="unknown discipline 'astrology'"):
        await set_evaluated(db_session, ["law", "astrology"])
    with pytest.raises(UnknownDisciplines, match="no discipline given"):
        await set_evaluated(db_session, [" "])
    assert {r.key for r in await list_disciplines(db_session) if r.evaluated} == evaluated


async def test_sessions_split_their_quota_evenly_over_the_evaluated_disciplines(
    db_session: AsyncSession,
) -> None:
    names = ["Law", "History", "Medicine", "Philosophy"]
    records = [
        open_record(100 * d + i, discipline=n) for d, n in enumerate(names) for i in range(30)
    ]
    await import_records(db_session, raw_records(records), augment=False)
    org = await make_org(db_session)
    # philosophy is not evaluated by default; military is, but has no items
    assert await sampled_disciplines(db_session) == ["history", "law", "medicine"]
    drawn = await draw_sample(db_session, org_id=org.id, n=30, seed="ab")
    assert Counter(i.discipline for i in drawn.items) == {"history": 10, "law": 10, "medicine": 10}
    assert drawn.shortfall == {"unplaced": 0}
    await set_evaluated(db_session, ["law", "philosophy"])
    drawn = await draw_sample(db_session, org_id=org.id, n=30, seed="ab")
    assert Counter(i.discipline for i in drawn.items) == {"law": 15, "philosophy": 15}


async def test_both_bundled_data_sets_give_each_discipline_once(db_session: AsyncSession) -> None:
    records = [r for name in ("mmlu_pro", "gaokao_bench") for r in read_records(sample_path(name))]
    await import_records(db_session, records, augment=False)
    rows = {r.key: r for r in await list_disciplines(db_session) if r.items}
    assert set(rows) == {
        "economics",
        "education",
        "engineering",
        "history",
        "law",
        "literature",
        "management",
        "medicine",
        "philosophy",
        "science",
    }
    stored = set((await db_session.execute(select(Item.discipline))).scalars())
    assert stored == set(rows)
    assert len({r.display_name.casefold() for r in rows.values()}) == len(rows)
