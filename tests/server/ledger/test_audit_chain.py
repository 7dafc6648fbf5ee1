"""The chained audit log: rows written through the writer and the API verify, and each
kind of tampering by the database owner (triggers disabled) is detected and located.

Three writers write round-robin (ids 1, 4, 7, ... chain A; 2, 5, 8, ... chain B; 3, 6, 9,
... chain C, which signs no checkpoints). Deleting chain C wholesale goes unnoticed (the
documented limit) and frees ids between chain A's rows for insertions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text

from server.audit.chaining import audit_fields, chained_values
from server.audit.models import AuditEntry
from server.audit.writer import AuditWriter
from server.database import create_engine
from server.ledger.chain import ChainHead, Log, link
from server.ledger.checkpoints import new_checkpoint
from server.ledger.models import ChainCheckpoint
from server.ledger.signing import PublicKey, SigningKey, new_private_text, parse_private
from server.ledger.verify import AUDIT, Failure, LogReport, Reason, verify_log
from tests.support.api import login, running_api, seed_world, test_settings
from tests.support.audit import request_row
from tests.support.cli import proctor
from tests.support.database import database_session

KEY_TEXT = new_private_text()
KEY = parse_private(KEY_TEXT, source="test")
KEYS = {KEY.public.key_id: KEY.public}
ROWS_PER_CHAIN = 10
CHECKPOINT_ROWS = 4


@dataclass
class Written:
    db_url: str
    chains: dict[str, str]
    """``A``, ``B``, ``C`` to the chain names."""
    ids: dict[str, list[int]]


async def write_round_robin(db_url: str, tmp_path: Path) -> Written:
    engine = create_engine(db_url)
    writers = {
        "A": AuditWriter(
            engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=CHECKPOINT_ROWS
        ),
        "B": AuditWriter(
            engine, tmp_path / "spool", signing_key=KEY, checkpoint_rows=CHECKPOINT_ROWS
        ),
        "C": AuditWriter(engine, tmp_path / "spool", signing_key=None),
    }
    try:
        for n in range(ROWS_PER_CHAIN):
            for writer in writers.values():
                await writer.write(request_row(n))
        for writer in writers.values():
            await writer.stop()
    finally:
        await engine.dispose()
    chains = {name: writer.chain for name, writer in writers.items()}
    ids: dict[str, list[int]] = {}
    async with database_session(db_url) as db:
        for name, chain in chains.items():
            statement = (
                select(AuditEntry.id).where(AuditEntry.chain == chain).order_by(AuditEntry.id)
            )
            ids[name] = list((await db.scalars(statement)).all())
    return Written(db_url, chains, ids)


@pytest.fixture
async def written(fresh_db_url: str, tmp_path: Path) -> Written:
    return await write_round_robin(fresh_db_url, tmp_path)


async def as_owner(db_url: str, *statements: str) -> None:
    """Run ``statements`` as the database owner, with the append-only triggers off."""
    engine = create_engine(db_url)
    sqlite = db_url.startswith("sqlite")
    off = (
        [
            f"DROP TRIGGER IF EXISTS {table}_no_{event}"
            for table in ("audit_log", "chain_checkpoints")
            for event in ("update", "delete")
        ]
        if sqlite
        else [
            "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only",
            "ALTER TABLE chain_checkpoints DISABLE TRIGGER chain_checkpoints_append_only",
        ]
    )
    try:
        async with engine.begin() as connection:
            for statement in [*off, *statements]:
                await connection.execute(text(statement))
    finally:
        await engine.dispose()


async def verify(db_url: str, keys: dict[str, PublicKey] | None = None) -> LogReport:
    async with database_session(db_url) as db:
        return await verify_log(db, AUDIT, keys or KEYS)


def only_failure(report: LogReport) -> Failure:
    assert len(report.failures) == 1, report.failures
    return report.failures[0]


async def stored_row(db_url: str, row_id: int) -> AuditEntry:
    async with database_session(db_url) as db:
        row = await db.get(AuditEntry, row_id)
        assert row is not None
        db.expunge(row)
        return row


# --- what verifies -------------------------------------------------------------------


async def test_rows_of_three_writers_verify_with_their_checkpoints(written: Written) -> None:
    assert written.ids["A"] == list(range(1, 3 * ROWS_PER_CHAIN, 3))
    report = await verify(written.db_url)
    assert report.ok, report.failures
    by_chain = {chain.chain: chain for chain in report.chains}
    assert set(by_chain) == set(written.chains.values())
    a = by_chain[written.chains["A"]]
    assert (a.n_rows, a.last_row_id) == (ROWS_PER_CHAIN, written.ids["A"][-1])
    assert a.n_checkpoints == 3  # after rows 4 and 8, and at stop (row 10)
    assert by_chain[written.chains["C"]].n_checkpoints == 0


async def test_an_unknown_key_fails_every_checkpoint(written: Written) -> None:
    other = parse_private(new_private_text(), source="other").public
    report = await verify(written.db_url, {other.key_id: other})
    reasons = {failure.chain: failure.reason for failure in report.failures}
    assert reasons == {
        written.chains["A"]: Reason.BAD_SIGNATURE,
        written.chains["B"]: Reason.BAD_SIGNATURE,
    }


async def test_rows_written_through_the_api_verify(fresh_db_url: str, tmp_path: Path) -> None:
    world = await seed_world(fresh_db_url)
    settings = test_settings(
        fresh_db_url,
        audit_signing_key=KEY_TEXT,
        audit_checkpoint_rows=7,
        audit_spool_dir=tmp_path / "spool",
    )
    async with running_api(settings) as (_, client):
        headers = await login(client, world.a.keys["auditor"])
        for _ in range(30):
            assert (await client.get("/v1/whoami", headers=headers)).status_code == 200
        key = (await client.get("/v1/audit/signing-key", headers=headers)).json()
        listed = await client.get("/v1/audit/checkpoints", params={"log": "audit"}, headers=headers)
        assert listed.status_code == 200
    assert key["key_id"] == KEY.public.key_id
    assert key["public_key"] == KEY.public.raw_b64
    checkpoints = listed.json()
    assert len(checkpoints) >= 4  # 31+ rows, one every 7
    assert [c["n_rows"] for c in checkpoints][:4] == [7, 14, 21, 28]
    report = await verify(fresh_db_url)
    assert report.ok, report.failures
    async with database_session(fresh_db_url) as db:
        unchained = await db.scalar(
            select(AuditEntry.id).where(AuditEntry.chain.is_(None)).limit(1)
        )
    assert unchained is None
    assert sum(chain.n_rows for chain in report.chains) >= 31


# --- tampering, detected and located --------------------------------------------------


async def test_a_deleted_middle_row_breaks_the_next_link(written: Written) -> None:
    a = written.ids["A"]
    await as_owner(written.db_url, f"DELETE FROM audit_log WHERE id = {a[4]}")
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (
        written.chains["A"],
        a[5],
        Reason.BROKEN_LINK,
    )


async def test_an_edited_row_is_located(written: Written) -> None:
    b = written.ids["B"]
    await as_owner(written.db_url, f"UPDATE audit_log SET status = 204 WHERE id = {b[6]}")
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (
        written.chains["B"],
        b[6],
        Reason.EDITED,
    )


async def test_a_deleted_chain_without_checkpoints_goes_unnoticed(written: Written) -> None:
    """The documented limit: a chain deleted with its checkpoints (here it has none)."""
    await as_owner(written.db_url, f"DELETE FROM audit_log WHERE chain = '{written.chains['C']}'")
    assert (await verify(written.db_url)).ok


async def insert_row(db_url: str, row_id: int, chain: str | None, prev_hash: str | None) -> None:
    """Insert a well-formed row with id ``row_id`` (its hash right for ``prev_hash``)."""
    from bank.database import utcnow

    fields = audit_fields({**request_row(0), "at": utcnow().replace(microsecond=0)})
    row_hash = link(prev_hash, fields) if prev_hash is not None else None
    engine = create_engine(db_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                insert(AuditEntry),
                [
                    {
                        **fields,
                        "id": row_id,
                        "chain": chain,
                        "prev_hash": prev_hash,
                        "row_hash": row_hash,
                    }
                ],
            )
    finally:
        await engine.dispose()


@pytest.mark.parametrize("forged", [False, True], ids=["naive", "forged-link"])
async def test_an_inserted_row_is_located(written: Written, forged: bool) -> None:
    a, c = written.ids["A"], written.ids["C"]
    await as_owner(written.db_url, f"DELETE FROM audit_log WHERE chain = '{written.chains['C']}'")
    gap = c[3]  # between a[3] and a[4]
    assert a[3] < gap < a[4]
    before = await stored_row(written.db_url, a[3])
    prev = before.row_hash if forged else "0" * 64
    await insert_row(written.db_url, gap, written.chains["A"], prev)
    failure = only_failure(await verify(written.db_url))
    # a forged link passes the inserted row but breaks the one after it
    assert (failure.chain, failure.row_id, failure.reason) == (
        written.chains["A"],
        a[4] if forged else gap,
        Reason.BROKEN_LINK,
    )


async def test_an_unchained_row_inserted_among_chained_ones_is_located(written: Written) -> None:
    c = written.ids["C"]
    await as_owner(written.db_url, f"DELETE FROM audit_log WHERE chain = '{written.chains['C']}'")
    await insert_row(written.db_url, c[5], None, None)
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (None, c[5], Reason.UNCHAINED)


async def test_a_deleted_tail_row_covered_by_a_checkpoint_is_located(written: Written) -> None:
    a = written.ids["A"]
    await as_owner(written.db_url, f"DELETE FROM audit_log WHERE id = {a[-1]}")
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (
        written.chains["A"],
        a[-1],
        Reason.MISSING_AFTER_CHECKPOINT,
    )


async def test_a_rewritten_chain_disagrees_with_its_first_checkpoint(written: Written) -> None:
    """The owner edits row 2 of chain A and recomputes every hash after it: the links hold,
    but the walk reaches the first checkpoint's row (A's 4th) with another hash."""
    a, chain = written.ids["A"], written.chains["A"]
    await as_owner(written.db_url, f"UPDATE audit_log SET status = 500 WHERE id = {a[1]}")
    async with database_session(written.db_url) as db:
        rows = list(
            (
                await db.scalars(
                    select(AuditEntry).where(AuditEntry.chain == chain).order_by(AuditEntry.id)
                )
            ).all()
        )
    prev = rows[0].row_hash
    assert prev is not None
    updates = []
    for row in rows[1:]:
        row_hash = link(
            prev, audit_fields({c.name: getattr(row, c.key) for c in AuditEntry.__table__.columns})
        )
        updates.append(
            f"UPDATE audit_log SET prev_hash = '{prev}', row_hash = '{row_hash}' "
            f"WHERE id = {row.id}"
        )
        prev = row_hash
    await as_owner(written.db_url, *updates)
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (
        chain,
        a[3],
        Reason.CHECKPOINT_MISMATCH,
    )


async def test_a_forged_checkpoint_is_detected(written: Written) -> None:
    a, chain = written.ids["A"], written.chains["A"]
    forger = SigningKey(parse_private(new_private_text(), source="forger").key)
    async with database_session(written.db_url) as db:
        last = (
            await db.scalars(
                select(ChainCheckpoint)
                .where(ChainCheckpoint.chain == chain)
                .order_by(ChainCheckpoint.id.desc())
            )
        ).first()
        assert last is not None
        from server.ledger.chain import ChainHead

        values = new_checkpoint(
            key=forger,
            log=Log.AUDIT,
            head=ChainHead(chain, ROWS_PER_CHAIN, a[-1], last.head_hash),
            prev_checkpoint_hash=last.checkpoint_hash,
        )
        values["key_id"] = KEY.public.key_id  # claims the server's key
        db.add(ChainCheckpoint(**values))
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.row_id, failure.reason) == (chain, a[-1], Reason.BAD_SIGNATURE)


async def test_a_deleted_checkpoint_breaks_the_checkpoint_links(written: Written) -> None:
    chain = written.chains["B"]
    async with database_session(written.db_url) as db:
        ids = list(
            (
                await db.scalars(
                    select(ChainCheckpoint.id)
                    .where(ChainCheckpoint.chain == chain)
                    .order_by(ChainCheckpoint.id)
                )
            ).all()
        )
    await as_owner(written.db_url, f"DELETE FROM chain_checkpoints WHERE id = {ids[1]}")
    failure = only_failure(await verify(written.db_url))
    assert (failure.chain, failure.reason, failure.checkpoint_id) == (
        chain,
        Reason.CHECKPOINT_LINK,
        ids[2],
    )


# --- the command ----------------------------------------------------------------------


def cli_env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_AUDIT_SIGNING_KEY": KEY_TEXT,
        "PROCTOR_DATA_DIR": str(tmp_path / "data"),
    }


async def test_the_command_verifies_then_locates_an_edit(written: Written, tmp_path: Path) -> None:
    env = cli_env(written.db_url, tmp_path)
    clean = proctor("audit", "verify", "--log", "audit", env=env)
    assert clean.returncode == 0, clean.stderr
    assert "audit: ok: 3 chain(s), 30 row(s) verified" in clean.stdout
    a = written.ids["A"]
    await as_owner(written.db_url, f"UPDATE audit_log SET route = '/x' WHERE id = {a[2]}")
    broken = proctor("audit", "verify", "--log", "audit", "--json", env=env)
    assert broken.returncode == 1, broken.stderr
    data = json.loads(broken.stdout)
    assert data["ok"] is False
    chains = {c["chain"]: c for c in data["logs"][0]["chains"]}
    failure = chains[written.chains["A"]]["failure"]
    assert (failure["row_id"], failure["reason"]) == (a[2], "edited")
    text_out = proctor("audit", "verify", "--log", "audit", env=env)
    assert f"chain {written.chains['A']}: row {a[2]}: edited" in text_out.stdout


async def test_the_command_walks_from_a_saved_checkpoint(written: Written, tmp_path: Path) -> None:
    """An auditor's saved checkpoint: rows before it are not read again (an edit there goes
    unseen), an edit after it is found; the public key comes from a file."""
    env = cli_env(written.db_url, tmp_path)
    env["PROCTOR_AUDIT_SIGNING_KEY"] = new_private_text()  # the server's key is elsewhere
    public = tmp_path / "audit.pub"
    public.write_text(KEY.public.raw_b64)
    a, chain = written.ids["A"], written.chains["A"]
    async with database_session(written.db_url) as db:
        first = (
            await db.scalars(
                select(ChainCheckpoint)
                .where(ChainCheckpoint.chain == chain)
                .order_by(ChainCheckpoint.id)
            )
        ).first()
        assert first is not None and first.last_row_id == a[3]
        from server.ledger.schemas import CheckpointOut

        saved = tmp_path / "checkpoint.json"
        saved.write_text(CheckpointOut.model_validate(first).model_dump_json())
    await as_owner(written.db_url, f"UPDATE audit_log SET status = 201 WHERE id = {a[1]}")
    args = ("audit", "verify", "--from", str(saved), "--public-key", str(public))
    assert proctor(*args, env=env).returncode == 0
    await as_owner(written.db_url, f"UPDATE audit_log SET status = 201 WHERE id = {a[6]}")
    after = proctor(*args, env=env)
    assert after.returncode == 1
    assert f"row {a[6]}: edited" in after.stdout
    without_key = proctor("audit", "verify", "--from", str(saved), env=env)
    assert without_key.returncode == 2
    assert "not signed by a known key" in without_key.stderr
    by_id = proctor("audit", "verify", "--from", str(first.id), env=env)  # the same: bad input
    assert by_id.returncode == 2, by_id.stderr
    assert f"checkpoint {first.id} is not signed by a known key" in by_id.stderr


async def test_the_command_never_generates_a_signing_key(written: Written, tmp_path: Path) -> None:
    """On an auditor's machine (no key configured, none in the data directory) ``verify``
    trusts the ``--public-key`` files only and creates no key; with none it exits 2 saying
    to pass one."""
    env = cli_env(written.db_url, tmp_path)
    del env["PROCTOR_AUDIT_SIGNING_KEY"]
    data_dir = Path(env["PROCTOR_DATA_DIR"])
    public = tmp_path / "audit.pub"
    public.write_text(KEY.public.raw_b64)
    pinned = proctor("audit", "verify", "--log", "audit", "--public-key", str(public), env=env)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    assert not (data_dir / "audit-signing-key").exists()
    keyless = proctor("audit", "verify", "--log", "audit", env=env)
    assert keyless.returncode == 2, keyless.stdout + keyless.stderr
    assert "no trusted public key: pass --public-key" in keyless.stderr
    assert not (data_dir / "audit-signing-key").exists()


async def test_the_command_refuses_bad_input(written: Written, tmp_path: Path) -> None:
    env = cli_env(written.db_url, tmp_path)
    junk = tmp_path / "junk.json"
    junk.write_text('{"id": "\\ud800"}')
    bad_key = tmp_path / "bad.pub"
    bad_key.write_text("not a key\x00")
    for args in (
        ("--from", str(tmp_path / "missing.json")),
        ("--from", str(junk)),
        ("--from", "999999"),
        ("--public-key", str(bad_key)),
        ("--log", "everything"),
    ):
        result = proctor("audit", "verify", *args, env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_batch_with_and_without_a_reason_is_one_insert_and_old_rows_hash_as_before() -> None:
    """Every value dict of a batch has every column (one multi-row insert needs that: a
    refusal with a ``reason`` next to a plain row once failed the whole batch), while the
    hash of a row without a reason is exactly what it was before the column existed."""
    head = ChainHead("w-test", 0, None, "0" * 64)
    at = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
    plain = {"at": at, "subject": None, "org_id": None, "session_id": None, "method": "GET",
             "route": "/v1/whoami", "status": 200, "client": "127.0.0.1"}  # fmt: skip
    refused = {**plain, "status": 400, "reason": "Bad request: query parameter 'x' has a NUL"}
    values, _ = chained_values([refused, plain], head)
    assert values[0].keys() == values[1].keys() and "reason" in values[1]
    assert values[1]["reason"] is None
    before_the_column = {**plain, "repeats": 1}
    assert values[1]["row_hash"] == link(values[0]["row_hash"], before_the_column)
    assert values[0]["row_hash"] != link(head.head_hash, {**before_the_column, "status": 400})
