"""Session bundles end to end (SQLite and PostgreSQL): a session driven and scored through
the real API, exported through the API and the CLI, checked offline; tampering caught by
line; sealed reference answers never exported; the seed opened only once scored."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from bank.models import Item
from server.bundles import format as fmt
from server.bundles.check import check_bundle_bytes
from server.bundles.service import session_bundle
from server.database import create_engine, read_only_snapshot
from server.ledger.signing import PublicKey, new_private_text, parse_private
from server.sessions.models import Answer
from tests.support.api import World, login, open_session, running_api, test_settings
from tests.support.cli import proctor
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import (
    answer_for,
    answer_items,
    drive_session,
    judged_settings,
    wait_until_scored,
)

SIGNING_KEY = new_private_text()
OTHER_KEY = new_private_text()
PUBLIC = parse_private(SIGNING_KEY, source="test").public


def public(text: str) -> PublicKey:
    return parse_private(text, source="test").public


async def fetch_bundle(client: httpx.AsyncClient, world: World, sid: uuid.UUID) -> bytes:
    headers = await login(client, world.a.keys["auditor"])
    got = await client.get(f"/v1/audit/sessions/{sid}/bundle", headers=headers)
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("application/x-ndjson")
    assert f'filename="session-{sid}.jsonl"' in got.headers["content-disposition"]
    return got.content


def lines_of(bundle: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in bundle.splitlines()]


@pytest.fixture
async def scored_bundle(
    world_db: tuple[str, World], llm: FakeLlm
) -> tuple[str, World, uuid.UUID, bytes, bytes]:
    """A session driven (every answer wrong: none repeats a reference answer) and scored
    through the API, its bundle read through the API, and the bundle of a second session
    still open (two answers of four)."""
    db_url, world = world_db
    settings = judged_settings(db_url, llm, audit_signing_key=SIGNING_KEY)
    async with running_api(settings) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=8, correct=lambda p: False)
        await wait_until_scored(db_url, driven.id, within_s=60)
        bundle = await fetch_bundle(client, world, driven.id)
        assert world.a.model_id is not None
        evaluator = await login(client, world.a.keys["evaluator"])
        opened = await open_session(client, evaluator, world.a.model_id, n_items=4)
        open_id = uuid.UUID(opened["id"])
        vendor = await login(client, world.a.keys["vendor"], open_id)
        await answer_items(
            client, db_url, open_id, vendor, lambda item, _: answer_for(item, False), limit=2
        )
        open_bundle = await fetch_bundle(client, world, open_id)
    return db_url, world, driven.id, bundle, open_bundle


async def test_a_scored_session_exports_a_bundle_that_checks(
    scored_bundle: tuple[str, World, uuid.UUID, bytes, bytes],
) -> None:
    _, _, sid, bundle, _ = scored_bundle
    result = check_bundle_bytes(bundle, public_key=PUBLIC)
    assert [str(p) for p in result.problems] == []
    assert result.ok and result.origin_checked and result.signature_valid
    assert result.session_id == str(sid) and result.state == "scored"
    assert result.counts == {"header": 1, "item": 8, "answer": 8, "verdict": 8, "commitment": 1}
    rows = lines_of(bundle)
    assert rows[0]["type"] == "header" and rows[-1]["type"] == "signature"
    verdicts = [r for r in rows if r["type"] == "verdict"]
    assert {v["score"] for v in verdicts} == {0}
    assert all("detail" not in v and "judge_reply" not in v for v in verdicts)
    opening = next(r for r in rows if r["type"] == "commitment")
    assert opening["revealed"] is True and isinstance(opening["seed"], str)
    assert result.commitment_revealed and result.commitment_valid is True
    # without a trusted key: intact, but the origin is not vouched for, so no verdict
    unpinned = check_bundle_bytes(bundle)
    assert unpinned.intact and not unpinned.origin_checked and not unpinned.ok


async def test_no_reference_answer_or_explanation_is_exported(
    scored_bundle: tuple[str, World, uuid.UUID, bytes, bytes],
) -> None:
    db_url, _, _, bundle, _ = scored_bundle
    rows = lines_of(bundle)
    ids = {uuid.UUID(str(r["item_id"])) for r in rows if r["type"] == "item"}
    text = json.dumps(rows, ensure_ascii=False)
    async with database_session(db_url) as db:
        items = list((await db.execute(select(Item).where(Item.id.in_(ids)))).scalars())
    assert len(items) == 8
    checked = 0
    for item in items:
        shown = item.question + " ".join(item.options or [])
        for sealed in (item.answer, item.explanation):
            if sealed and len(sealed) >= 6 and sealed not in shown:
                assert sealed not in text, f"sealed text of item {item.id} exported"
                checked += 1
    assert checked >= 4  # the bank's short answers and explanations were looked for


async def test_the_seed_is_opened_only_once_scored(
    scored_bundle: tuple[str, World, uuid.UUID, bytes, bytes],
) -> None:
    _, _, _, _, open_bundle = scored_bundle
    result = check_bundle_bytes(open_bundle, public_key=PUBLIC)
    assert result.ok, [str(p) for p in result.problems]
    assert result.state == "active" and not result.commitment_revealed
    assert result.counts["item"] == 2 and result.counts["answer"] == 2
    commitment = next(r for r in lines_of(open_bundle) if r["type"] == "commitment")
    assert commitment["revealed"] is False and isinstance(commitment["commitment"], str)
    assert not {"seed", "salt", "source", "item_ids"} & commitment.keys()
    assert b'"seed"' not in open_bundle


def resigned(bundle: bytes, private_text: str) -> bytes:
    """``bundle``'s lines re-chained and signed with another key, named in the header: an
    intact bundle that anyone holding a key of their own can make."""
    key = parse_private(private_text, source="test")
    rows = [json.loads(line) for line in bundle.splitlines()[:-1]]
    rows[0].update(key_id=key.public.key_id, public_key=key.public.raw_b64)
    out, prev, digest = [], None, hashlib.sha256()
    for row in rows:
        data = fmt.line({**row, "prev": prev})
        digest.update(data)
        prev = hashlib.sha256(data).hexdigest()
        out.append(data)
    sha = digest.hexdigest()
    signature = key.sign(fmt.signed_payload(sha))
    fields = {"type": "signature", "prev": prev, "sha256": sha, "signature": signature}
    out.append(fmt.line({**fields, "key_id": key.public.key_id}))
    return b"".join(out)


def tamper_cases(bundle: bytes) -> dict[str, tuple[bytes, int, str]]:
    """Altered bundles, the line the check must name and what it must say there."""
    lines = bundle.splitlines(keepends=True)
    n = len(lines)
    at = next(i for i, line in enumerate(lines) if b'"type":"verdict"' in line)
    edited = lines[at].replace(b'"score":0', b'"score":3')
    assert edited != lines[at]
    other = parse_private(OTHER_KEY, source="test")
    signature = json.loads(lines[-1])
    forged = dict(signature, signature=other.sign(b"x" * 10), key_id=other.public.key_id)
    forged_line = json.dumps(forged, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    return {  # line numbers are 1-based: lines[at] is line at + 1
        "score edited": (
            b"".join([*lines[:at], edited, *lines[at + 1 :]]),
            at + 2,
            f"prev: is not the hash of line {at + 1}",
        ),
        "line deleted": (
            b"".join([*lines[:at], *lines[at + 1 :]]),
            at + 1,
            f"prev: is not the hash of line {at}",
        ),
        "lines swapped": (
            b"".join([lines[0], lines[2], lines[1], *lines[3:]]),
            2,
            "prev: is not the hash of line 1",
        ),
        "line appended": (bundle + lines[at], n + 1, "comes after the signature"),
        "signature swapped": (b"".join([*lines[:-1], forged_line]), n, "signature: not a valid"),
    }


async def test_tampering_is_caught_and_named(
    scored_bundle: tuple[str, World, uuid.UUID, bytes, bytes],
) -> None:
    _, _, _, bundle, _ = scored_bundle
    for name, (altered, line, says) in tamper_cases(bundle).items():
        result = check_bundle_bytes(altered, public_key=PUBLIC)
        found = [str(p) for p in result.problems]
        assert not result.ok, name
        assert f"line {line}: {says}" in "\n".join(found), (name, found)
    # the bundle is intact, but signed by a key the auditor does not trust
    result = check_bundle_bytes(bundle, public_key=public(OTHER_KEY))
    assert not result.ok and not result.origin_checked
    assert any("not a valid signature" in str(p) for p in result.problems)


async def test_the_cli_exports_and_checks_bundles(
    scored_bundle: tuple[str, World, uuid.UUID, bytes, bytes], tmp_path: Path
) -> None:
    db_url, _, sid, api_bundle, _ = scored_bundle
    env = {"PROCTOR_DATABASE_URL": db_url, "PROCTOR_AUDIT_SIGNING_KEY": SIGNING_KEY}
    exported = tmp_path / "session.jsonl"
    run = proctor("audit", "export", str(sid), "-o", str(exported), env=env)
    assert run.returncode == 0, run.stderr
    key_file = tmp_path / "audit.pub"
    run = proctor("audit", "public-key", "-o", str(key_file), env=env)
    assert run.returncode == 0, run.stderr
    assert key_file.read_text().strip() == PUBLIC.raw_b64 and PUBLIC.key_id in run.stderr
    api_file = tmp_path / "api.jsonl"
    api_file.write_bytes(api_bundle)
    for path in (exported, api_file):
        run = proctor("audit", "check", str(path), "--public-key", str(key_file))
        assert run.returncode == 0, run.stdout + run.stderr
        assert "verified: signed by the trusted key" in run.stdout

    # the two exports differ only in their export time (so their hashes and signature)
    def content(bundle: bytes) -> list[dict[str, object]]:
        kept = [r for r in lines_of(bundle) if r["type"] not in {"header", "signature"}]
        return [{k: v for k, v in r.items() if k != "prev"} for r in kept]

    assert content(exported.read_bytes()) == content(api_bundle)
    run = proctor("audit", "check", str(exported))  # no trusted key: origin unchecked
    assert run.returncode == 1 and "NOT VERIFIED" in run.stdout, run.stdout + run.stderr
    assert "origin not checked: pass --public-key" in run.stderr
    run = proctor("audit", "check", str(exported), "--integrity-only")
    assert run.returncode == 0 and "integrity only" in run.stdout and "NOT" in run.stdout
    run = proctor("audit", "check", str(exported), "--json")
    assert run.returncode == 1 and json.loads(run.stdout)["ok"] is False
    # a forger re-signs an edited record with a key of their own, named in its header
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(resigned(tamper_cases(api_bundle)["score edited"][0], OTHER_KEY))
    run = proctor("audit", "check", str(forged))
    assert run.returncode == 1 and "origin not checked" in run.stderr, run.stdout
    run = proctor("audit", "check", str(forged), "--public-key", str(key_file))
    assert run.returncode == 1 and "FAILED" in run.stdout
    assert "is not the trusted key" in run.stdout
    run = proctor("audit", "check", str(exported), "--json", "--public-key", str(key_file))
    assert run.returncode == 0 and json.loads(run.stdout)["origin_checked"] is True
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(tamper_cases(api_bundle)["score edited"][0])
    run = proctor("audit", "check", str(tampered), "--public-key", str(key_file))
    assert run.returncode == 1 and "FAILED" in run.stdout
    assert "sha256: does not match" in run.stdout and "prev: is not the hash" in run.stdout
    run = proctor("audit", "check", str(tmp_path / "missing.jsonl"))
    assert run.returncode == 2 and "cannot be read" in run.stderr
    garbage_key = tmp_path / "garbage.pub"
    garbage_key.write_text("not a key")
    run = proctor("audit", "check", str(exported), "--public-key", str(garbage_key))
    assert run.returncode == 2 and "not a public key" in run.stderr


async def test_only_auditors_and_admins_read_bundles(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    assert world.a.model_id is not None
    settings = test_settings(db_url, audit_signing_key=SIGNING_KEY)
    async with running_api(settings) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        sid = (await open_session(client, evaluator, world.a.model_id, n_items=2))["id"]
        url = f"/v1/audit/sessions/{sid}/bundle"
        statuses = (("vendor", 403), ("evaluator", 403), ("auditor", 200), ("admin", 200))
        for role, status in statuses:
            got = await client.get(url, headers=await login(client, world.a.keys[role]))
            assert got.status_code == status, (role, got.text)
        assert (await client.get(url)).status_code == 401
        org_b = await login(client, world.b.keys["vendor"])
        assert (await client.get(url, headers=org_b)).status_code == 403
        missing = f"/v1/audit/sessions/{uuid.uuid4()}/bundle"
        got = await client.get(missing, headers=await login(client, world.a.keys["auditor"]))
        assert got.status_code == 404
        assert got.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_writers_go_on_while_a_bundle_is_read_on_sqlite(
    world_db: tuple[str, World],
) -> None:
    """The bundle is read in a ``read_only_snapshot``, as the route reads it: on SQLite
    that takes no write lock, so an answer submitted through the API while a bundle is
    half read is stored at once (it used to wait for the whole download), and the bundle
    still shows the one snapshot it started from."""
    db_url, world = world_db
    assert world.a.model_id is not None
    key = parse_private(SIGNING_KEY, source="test")
    engine = create_engine(db_url)
    async with running_api(test_settings(db_url, audit_signing_key=SIGNING_KEY)) as (_, client):
        evaluator = await login(client, world.a.keys["evaluator"])
        sid = uuid.UUID((await open_session(client, evaluator, world.a.model_id, n_items=4))["id"])
        vendor = await login(client, world.a.keys["vendor"], sid)

        def wrong(item: Item, _: int) -> str:
            return answer_for(item, False)

        await answer_items(client, db_url, sid, vendor, wrong, limit=1)
        try:
            async with read_only_snapshot(engine) as db:
                lines = session_bundle(db, sid, key=key, now=datetime.now(UTC))
                read = [await anext(lines), await anext(lines)]  # the header and an item
                answered = answer_items(client, db_url, sid, vendor, wrong, limit=1)
                await asyncio.wait_for(answered, timeout=10)  # a write, committed meanwhile
                read += [line async for line in lines]
        finally:
            await engine.dispose()
    result = check_bundle_bytes(b"".join(read), public_key=PUBLIC)
    assert result.ok, [str(p) for p in result.problems]
    assert result.counts["answer"] == 1  # the snapshot the read started from
    async with database_session(db_url) as db:
        stored = await db.execute(select(Answer.position).where(Answer.session_id == sid))
        assert sorted(stored.scalars()) == [0, 1]
