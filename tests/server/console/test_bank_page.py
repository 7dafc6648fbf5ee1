"""The console's Bank pages over HTTP on the running app (SQLite and PostgreSQL): the
bank's composition, importing an upload all or nothing (the refusal's ``file:line: field``
lines, hostile files), the item browser's search and filters, an item's page (reference
answers for admins only), reviewing through the forms, the health page of a snapshot, who
may do what, CSRF, and hostile item text escaped."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.importer import ImportRefused
from bank.item_status import change_status
from bank.models import Item, ItemStatus
from bank.stats import bank_stats
from server.bank_items.service import import_upload
from server.database import create_engine
from server.health.service import refresh_health
from tests.support.api import World, login
from tests.support.console import console_login, csrf_token
from tests.support.database import database_session
from tests.support.factories import mc_record
from tests.support.health import HEALTH_JUDGES, originals, record_verdicts

Api = tuple[httpx.AsyncClient, World, FastAPI]
WorldDb = tuple[str, World]
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'


def jsonl(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def record(index: int, **overrides: Any) -> dict[str, Any]:
    """A valid record of the seeded bank's discipline ``d0``."""
    base = mc_record(index, discipline="d0", question=f"Upload {uuid.uuid4().hex} #{index}?")
    return {**base, **overrides}


async def count_items(db_url: str) -> int:
    async with database_session(db_url) as db:
        return int(await db.scalar(select(func.count()).select_from(Item)) or 0)


async def status_of(db_url: str, item_id: uuid.UUID) -> str:
    async with database_session(db_url) as db:
        item = await db.get(Item, item_id)
        assert item is not None
        return item.status


async def flag(db_url: str, n: int) -> list[uuid.UUID]:
    """Flag ``n`` active original multiple-choice items as the health job would."""
    async with database_session(db_url) as db:
        ids = list(
            (
                await db.execute(
                    select(Item.id)
                    .where(
                        Item.qtype == "multiple_choice",
                        Item.variant == "original",
                        Item.status == "active",
                    )
                    .order_by(Item.id)
                    .limit(n)
                )
            ).scalars()
        )
        await change_status(
            db, item_ids=ids, to=ItemStatus.FLAGGED, actor="health-job", reasons=["floor"]
        )
    return ids


async def upload(
    client: httpx.AsyncClient, name: str, data: bytes, **fields: str
) -> httpx.Response:
    page = await client.get("/console/bank/import")
    form = {"csrf_token": csrf_token(page.text), "augment": "on", **fields}
    return await client.post("/console/bank/import", data=form, files={"file": (name, data)})


async def login_as(client: httpx.AsyncClient, world: World, role: str) -> None:
    client.cookies.clear()
    assert (await console_login(client, world.a.keys[role])).status_code == 303


async def test_the_bank_page_shows_the_composition(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    async with database_session(db_url) as db:
        stats = await bank_stats(db)
    for role in ("admin", "auditor"):
        await login_as(client, world, role)
        response = await client.get("/console/bank")
        assert response.status_code == 200, response.text
        assert f"{stats['items']:,}" in response.text
        for discipline, n in stats["by_discipline"].items():
            assert f"/console/bank/items?discipline={discipline}" in response.text
            assert f"{n:,}" in response.text
        for qtype in stats["by_qtype"]:
            assert f"/console/bank/items?qtype={qtype}" in response.text
        assert "/console/bank/items?status=active" in response.text
        assert "/console/bank/health" in response.text
    await login_as(client, world, "evaluator")  # no bank pages for the organisations' roles
    for path in ("/console/bank", "/console/bank/items", "/console/bank/health"):
        assert (await client.get(path)).status_code == 403


async def test_a_file_with_a_bad_line_imports_nothing(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await login_as(client, world, "admin")
    before = await count_items(db_url)
    data = jsonl(record(1), record(2, answer="Z"), record(3), record(4, qtype="riddle"))
    response = await upload(client, "../../tmp/dir\\batch.jsonl", data)
    assert response.status_code == 422, response.text
    assert "batch.jsonl:2: answer: " in response.text
    assert "batch.jsonl:4: qtype: " in response.text
    assert "tmp/" not in response.text and "proctor-upload" not in response.text
    assert "nothing was imported" in response.text
    assert await count_items(db_url) == before


async def test_a_good_file_imports_and_reimporting_changes_nothing(
    api: Api, world_db: WorldDb
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await login_as(client, world, "admin")
    before = await count_items(db_url)
    data = jsonl(record(1), record(2), record(3))
    response = await upload(client, "good.jsonl", data)
    assert response.status_code == 200, response.text
    assert "good.jsonl imported" in response.text
    grown = await count_items(db_url)
    assert grown > before + 3  # three originals and their derived variants
    figures = dict(
        re.findall(r'class="label">([^<]+)</span><span class="value">([^<]+)<', response.text)
    )
    assert figures["Originals added"] == "3"
    assert int(figures["Items added"]) == grown - before
    again = await upload(client, "good.jsonl", data)
    assert again.status_code == 200
    figures = dict(
        re.findall(r'class="label">([^<]+)</span><span class="value">([^<]+)<', again.text)
    )
    assert figures["Unchanged"] == "3" and figures["Items added"] == "0"
    assert await count_items(db_url) == grown
    plain = await upload(client, "plain.jsonl", jsonl(record(9)), augment="")
    assert plain.status_code == 200
    assert await count_items(db_url) == grown + 1  # no variants without augment


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("latin1.jsonl", b'{"question": "caf\xe9"}\n', "latin1.jsonl:1: json: not valid UTF-8"),
        ("binary.jsonl", bytes(range(256)) * 4, "binary.jsonl:1: json: contains a NUL"),
        (
            "nul.jsonl",
            jsonl(record(1)) + b'{"question": "a\x00b"}\n',
            "nul.jsonl:2: json: contains a NUL",
        ),
        ("control.jsonl", bytes(range(1, 128)), "control.jsonl:1: json: "),
        (
            "nul-escape.jsonl",
            jsonl(record(1, question="a\u0000b")),
            "nul-escape.jsonl:1: question: ",
        ),
        (
            "surrogate.jsonl",
            b'{"discipline": "d0", "subdiscipline": "s", "qtype": "short_answer", '
            b'"question": "x\\ud800y", "answer": "a"}\n',
            "surrogate.jsonl:1: question: is not valid Unicode",
        ),
        ("notes.txt", b"hello\n", "notes.txt: cannot tell the format"),
        ("empty.jsonl", b"\n\n", "empty.jsonl: file: empty"),
        ("bad\x1bname\x7f.jsonl", b"[1]\n", "badname.jsonl:1: json: expected a JSON object"),
    ],
)
async def test_hostile_uploads_are_refused_cleanly(
    api: Api, world_db: WorldDb, name: str, data: bytes, expected: str
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await login_as(client, world, "admin")
    before = await count_items(db_url)
    response = await upload(client, name, data)
    assert response.status_code == 422, response.text
    assert expected in response.text
    assert await count_items(db_url) == before


async def test_past_the_guard_bytes_that_are_not_utf8_name_their_line(
    db_session: AsyncSession,
) -> None:
    """The request guard refuses a body with bytes that are not UTF-8 before the page; the
    import path itself names the file and line of such bytes, as the command does."""
    data = jsonl(record(1, discipline="science")) + b'{"question": "caf\xe9"}\n'
    with pytest.raises(ImportRefused) as refused:
        await import_upload(
            db_session,
            client_name="C:\\data\\latin1.jsonl",
            data=data,
            fmt=None,
            augment=True,
            add_disciplines=False,
        )
    assert [str(e) for e in refused.value.errors] == [
        "latin1.jsonl:2: json: not valid UTF-8 (column 18)"
    ]


async def test_the_upload_limit_is_stated_and_enforced(api: Api, world_db: WorldDb) -> None:
    client, world, app = api
    db_url, _ = world_db
    await login_as(client, world, "admin")
    limit = app.state.runtime.settings.max_body_bytes
    page = await client.get("/console/bank/import")
    assert f"{limit:,} bytes" in page.text and 'data-busy="Importing…"' in page.text
    before = await count_items(db_url)
    big = jsonl(record(1)) + b" " * limit
    response = await upload(client, "big.jsonl", big)
    assert response.status_code == 413
    assert await count_items(db_url) == before


async def test_auditors_read_but_neither_import_nor_review_nor_see_answers(
    api: Api, world_db: WorldDb
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [flagged] = await flag(db_url, 1)
    async with database_session(db_url) as db:
        item = await db.get(Item, flagged)
        assert item is not None
        answer, explanation = item.answer, item.explanation
    await login_as(client, world, "admin")
    admin_page = await client.get(f"/console/bank/items/{flagged}")
    assert admin_page.status_code == 200
    assert "Reference answer" in admin_page.text and f">{answer}</pre>" in admin_page.text
    assert f"/console/bank/items/{flagged}/review" in admin_page.text
    assert 'action="/console/bank/import"' in (await client.get("/console/bank/import")).text

    await login_as(client, world, "auditor")
    page = await client.get(f"/console/bank/items/{flagged}")
    assert page.status_code == 200
    assert item.question in page.text
    assert "Reference answer" not in page.text and f">{answer}</pre>" not in page.text
    assert explanation is None or explanation not in page.text
    assert "/review" not in page.text and 'name="action"' not in page.text
    import_page = await client.get("/console/bank/import")
    assert import_page.status_code == 200
    assert 'action="/console/bank/import"' not in import_page.text
    assert 'type="file"' not in import_page.text
    token = csrf_token(page.text)  # the logout form's: a valid token of this login
    before = await count_items(db_url)
    refused = await client.post(
        "/console/bank/import",
        data={"csrf_token": token},
        files={"file": ("a.jsonl", jsonl(record(1)))},
    )
    assert refused.status_code == 403
    assert await count_items(db_url) == before
    review = await client.post(
        f"/console/bank/items/{flagged}/review",
        data={"csrf_token": token, "action": "keep", "note": "fine"},
    )
    assert review.status_code == 403
    assert await status_of(db_url, flagged) == "flagged"


async def test_search_and_filters(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [flagged] = await flag(db_url, 1)
    await login_as(client, world, "auditor")
    async with database_session(db_url) as db:
        target = await db.get(Item, flagged)
        assert target is not None
        others = list((await db.execute(select(Item).where(Item.id != flagged).limit(3))).scalars())
    fragment = target.question.split()[-1][:12].upper()  # case-insensitive substring
    found = await client.get("/console/bank/items", params={"q": fragment})
    assert found.status_code == 200
    assert f"/console/bank/items/{flagged}" in found.text
    assert all(f'/console/bank/items/{o.id}"' not in found.text for o in others)

    by_status = await client.get("/console/bank/items", params={"status": "flagged"})
    links = set(re.findall(r'href="/console/bank/items/([0-9a-f-]{36})"', by_status.text))
    assert links == {str(flagged)}

    qtype = await client.get(
        "/console/bank/items", params={"qtype": "short_answer", "discipline": "d1"}
    )
    rows = re.findall(r"<tr>\s*<td class=\"text\">.*?</tr>", qtype.text, re.S)
    assert len(rows) == 12  # 2 sub-disciplines x 6 items
    assert all("short_answer" in r and "d1 / " in r for r in rows)

    first = await client.get("/console/bank/items", params={"discipline": "d1"})
    rows = re.findall(r"<tr>\s*<td class=\"text\">.*?</tr>", first.text, re.S)
    assert len(rows) == 50 and all("d1 / " in r for r in rows)  # a full page, and more
    assert 'rel="next"' in first.text
    second = await client.get("/console/bank/items", params={"discipline": "d1", "page": "2"})
    first_ids = set(re.findall(r'items/([0-9a-f-]{36})"', first.text))
    second_ids = set(re.findall(r'items/([0-9a-f-]{36})"', second.text))
    assert second_ids and not first_ids & second_ids
    assert 'rel="prev"' in second.text

    none = await client.get("/console/bank/items", params={"q": "%_no such text_%"})
    assert "No item matches." in none.text
    weird = await client.get(
        "/console/bank/items", params={"status": "bogus", "qtype": "<x>", "page": "-3"}
    )
    assert weird.status_code == 200 and "&lt;x&gt;" not in weird.text


async def test_keep_retire_and_edit_through_the_forms(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    kept, retired, edited = await flag(db_url, 3)
    await login_as(client, world, "admin")
    page = await client.get(f"/console/bank/items/{kept}")
    token = csrf_token(page.text)
    url = "/console/bank/items/{}/review"

    response = await client.post(
        url.format(kept), data={"csrf_token": token, "action": "keep", "note": "looks fine"}
    )
    assert response.status_code == 303
    assert response.headers["location"] == f"/console/bank/items/{kept}?notice=kept"
    assert await status_of(db_url, kept) == "active"
    shown = await client.get(response.headers["location"])
    assert "Item kept" in shown.text and "looks fine" in shown.text

    again = await client.post(
        url.format(kept), data={"csrf_token": token, "action": "keep", "note": "again"}
    )
    assert again.status_code == 409 and "already active" in again.text

    response = await client.post(
        url.format(retired),
        data={"csrf_token": token, "action": "retire", "note": "ambiguous", "back": "health"},
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/console/bank/health?notice=retired"
    assert await status_of(db_url, retired) == "retired"

    no_note = await client.post(url.format(edited), data={"csrf_token": token, "action": "keep"})
    assert no_note.status_code == 422 and await status_of(db_url, edited) == "flagged"
    nothing = await client.post(
        url.format(edited), data={"csrf_token": token, "action": "edit", "note": "x"}
    )
    assert nothing.status_code == 422 and "change the question" in nothing.text
    bogus = await client.post(
        url.format(edited), data={"csrf_token": token, "action": "<b>", "note": "x"}
    )
    assert bogus.status_code == 422 and "choose keep, retire or edit" in bogus.text
    assert "<b>" not in bogus.text
    nul = await client.post(
        url.format(edited), data={"csrf_token": token, "action": "keep", "note": "a\x00b"}
    )
    assert nul.status_code == 422 and await status_of(db_url, edited) == "flagged"

    async with database_session(db_url) as db:
        item = await db.get(Item, edited)
        assert item is not None and item.options is not None
    response = await client.post(
        url.format(edited),
        data={
            "csrf_token": token,
            "action": "edit",
            "note": "the key was wrong",
            "question": item.question,
            "options": "\n".join(item.options),
            "answer": "B",
            "explanation": item.explanation or "",
        },
    )
    assert response.status_code == 303, response.text
    new_id = uuid.UUID(response.headers["location"].split("/")[-1].split("?")[0])
    assert await status_of(db_url, edited) == "retired"
    assert await status_of(db_url, new_id) == "active"
    async with database_session(db_url) as db:
        revision = await db.get(Item, new_id)
        assert revision is not None
        assert (revision.answer, revision.replaces_id, revision.question) == (
            "B",
            edited,
            item.question,
        )


async def test_forms_without_the_csrf_token_are_refused(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    [flagged] = await flag(db_url, 1)
    await login_as(client, world, "admin")
    before = await count_items(db_url)
    for token in (None, "wrong"):
        data = {"action": "retire", "note": "x"} | ({"csrf_token": token} if token else {})
        response = await client.post(f"/console/bank/items/{flagged}/review", data=data)
        assert response.status_code == 403
        files = {"file": ("a.jsonl", jsonl(record(1)))}
        response = await client.post(
            "/console/bank/import", data={"csrf_token": token} if token else {}, files=files
        )
        assert response.status_code == 403
    assert await status_of(db_url, flagged) == "flagged"
    assert await count_items(db_url) == before


async def test_hostile_item_text_is_escaped(api: Api, world_db: WorldDb) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await login_as(client, world, "admin")
    hostile = record(
        1,
        question=f"Which? {HOSTILE}",
        options=[HOSTILE, "<b>bold</b>", "'quoted'", "plain"],
        explanation=HOSTILE,
    )
    response = await upload(client, f"{HOSTILE}.jsonl", jsonl(hostile))
    assert response.status_code == 200, response.text
    async with database_session(db_url) as db:
        item_id = await db.scalar(select(Item.id).where(Item.question == f"Which? {HOSTILE}"))
    assert item_id is not None
    pages = [
        response,
        await client.get("/console/bank/items", params={"q": "Which?"}),
        await client.get(f"/console/bank/items/{item_id}"),
    ]
    await flag_item(db_url, item_id)
    pages.append(await client.get(f"/console/bank/items/{item_id}"))  # with the edit form
    bad = await upload(client, "x.jsonl", jsonl(record(2, answer=HOSTILE)))
    assert bad.status_code == 422
    pages.append(bad)
    for page in pages:
        assert page.status_code in (200, 422)
        assert "<script>alert(1)</script>" not in page.text
        assert "<img src=x" not in page.text and "<b>bold" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[2].text
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[2].text


async def flag_item(db_url: str, item_id: uuid.UUID) -> None:
    async with database_session(db_url) as db:
        await change_status(
            db, item_ids=[item_id], to=ItemStatus.FLAGGED, actor="health-job", reasons=["floor"]
        )


async def test_the_health_page_shows_the_snapshot_and_reviews_from_it(
    api: Api, world_db: WorldDb
) -> None:
    client, world, _ = api
    db_url, _ = world_db
    await login_as(client, world, "auditor")
    empty = await client.get("/console/bank/health")
    assert empty.status_code == 200 and "No health snapshot yet" in empty.text

    items = (await originals(db_url))[:20]
    await record_verdicts(db_url, world, items, disputed=items[5])
    engine = create_engine(db_url)
    try:
        outcome = await refresh_health(
            engine,
            judges=HEALTH_JUDGES,
            population="all",
            min_new_verdicts=1,
            flag=True,
            max_flag_share=1.0,
        )
    finally:
        await engine.dispose()
    assert outcome.snapshot_id is not None and outcome.flagged >= 3
    saturated, floor = items[0], items[1]

    page = await client.get("/console/bank/health")
    assert page.status_code == 200, page.text
    text = page.text
    report = (
        await client.get(
            "/v1/admin/bank/health", headers=await login(client, world.a.keys["auditor"])
        )
    ).json()
    with_cas = [i for i in report["items"].values() if i["cas"] is not None]
    flagged = {k: i["flags"] for k, i in report["items"].items() if i["flags"]}
    assert f"{len(with_cas)} items with a CAS" in text
    assert f"{len(flagged)} flagged items" in text
    for rule in {r for rules in flagged.values() for r in rules}:
        n = sum(rule in rules for rules in flagged.values())
        assert f"{rule}: {n}" in text
    assert "Bank health index (BHI)" in text and "n = 10" in text
    assert text.count('<svg class="chart"') == 3
    assert "DS by difficulty" in text and "Items by CAS" in text
    assert f"/console/bank/items/{saturated.id}" in text and "saturated" in text
    assert f"/console/bank/items/{floor.id}" in text and "judge_disagreement" in text
    assert "/review" not in text  # auditors: no controls

    await login_as(client, world, "admin")
    page = await client.get("/console/bank/health")
    assert f"/console/bank/items/{saturated.id}/review" in page.text
    response = await client.post(
        f"/console/bank/items/{saturated.id}/review",
        data={
            "csrf_token": csrf_token(page.text),
            "action": "keep",
            "note": "easy on purpose",
            "back": "health",
        },
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/console/bank/health?notice=kept"
    assert await status_of(db_url, saturated.id) == "active"
    after = await client.get(response.headers["location"])
    assert "Item kept" in after.text
    assert f"/console/bank/items/{saturated.id}/review" not in after.text  # no longer flagged
