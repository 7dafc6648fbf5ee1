"""Where the bank's keys come from (``server.bank_keys``), the commands that rotate them
(``proctor bank rotate-key``, ``new-key``), and a session on the embedded default with the
key it generates."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Text, select, type_coerce

from bank import sealing
from bank.models import Item
from bank.sealing import BankKeyError, parse_keyring
from server.app import create_app
from server.bank_keys import KEY_FILE, install_for_command, load_keyring
from server.config import Settings
from server.database import upgrade
from server.ledger.signing import KEY_FILE as SIGNING_KEY_FILE
from server.ledger.signing import SigningKeyError, load_signing_key, new_private_text
from tests.support.api import running_api, seed_world, test_settings
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.cli import proctor
from tests.support.database import database_session, fetch_all
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import drive_session, judged_settings, wait_until_scored

RAW_ANSWER = type_coerce(Item.answer, Text())


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def _entry(key_id: str) -> str:
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


def test_the_embedded_default_generates_a_private_key_file_once(tmp_path: Path) -> None:
    settings = _settings(data_dir=tmp_path / "data")
    first = load_keyring(settings)
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    content = path.read_text()
    second = load_keyring(settings)
    assert path.read_text() == content  # reused, not regenerated
    assert second.open(first.seal("Paris", column="items.answer"), column="items.answer") == (
        "Paris"
    )
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no draft left behind


def test_a_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# keys\n{_entry('k1')}\n")
    path.chmod(0o640)
    settings = _settings(bank_key_file=path, data_dir=tmp_path)
    with pytest.raises(BankKeyError, match=r"PROCTOR_BANK_KEY_FILE .*mode 0640.*chmod 600"):
        load_keyring(settings)
    path.chmod(0o600)
    assert load_keyring(settings).active_id == "k1"
    with pytest.raises(BankKeyError, match="no such file"):
        load_keyring(_settings(bank_key_file=tmp_path / "missing", data_dir=tmp_path))


def test_the_audit_signing_key_file_is_checked_alike(tmp_path: Path) -> None:
    """The audit signing key file is refused on the same terms (one shared check); with
    ``generate=False`` nothing configured and no generated file means no key, and no file
    is created."""
    path = tmp_path / "signing"
    path.write_text(new_private_text() + "\n")
    path.chmod(0o604)
    settings = _settings(audit_signing_key_file=path, data_dir=tmp_path / "data")
    with pytest.raises(SigningKeyError, match=r"signing: group or others .*mode 0604.*chmod 600"):
        load_signing_key(settings)
    path.chmod(0o600)
    assert load_signing_key(settings, generate=False) is not None
    empty = _settings(data_dir=tmp_path / "data")
    assert load_signing_key(empty, generate=False) is None
    assert not (tmp_path / "data").exists()
    generated = load_signing_key(empty)
    assert (tmp_path / "data" / SIGNING_KEY_FILE).exists()
    again = load_signing_key(empty, generate=False)
    assert again is not None and again.public.key_id == generated.public.key_id


def test_the_file_comes_before_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(_entry("fromfile") + "\n")
    path.chmod(0o600)
    both = _settings(bank_key_file=path, bank_keys=TEST_BANK_KEYS, data_dir=tmp_path)
    assert load_keyring(both).active_id == "fromfile"
    env_only = _settings(bank_keys=f"{TEST_BANK_KEYS},{_entry('k2')}", data_dir=tmp_path)
    assert load_keyring(env_only).key_ids == ("test", "k2")
    assert not (tmp_path / KEY_FILE).exists()  # nothing generated when keys are given


def test_a_command_generates_the_embedded_key_only_when_it_needs_it(tmp_path: Path) -> None:
    before = sealing.current()
    install_for_command(_settings(data_dir=tmp_path))  # inside a program with a keyring
    assert sealing.current() is before
    with sealing.using(None):  # a command's own process
        install_for_command(_settings(data_dir=tmp_path))
        assert not (tmp_path / KEY_FILE).exists()
        assert sealing.current().active_id == "local"
        assert (tmp_path / KEY_FILE).exists()
    assert sealing.current() is before


def test_postgres_without_keys_refuses() -> None:
    settings = _settings(database_url="postgresql+asyncpg://x/y", bank_keys="  ")
    with pytest.raises(BankKeyError, match="no bank key: set PROCTOR_BANK_KEY_FILE or"):
        load_keyring(settings)


async def test_the_api_on_postgres_without_keys_refuses_to_start() -> None:
    settings = test_settings("postgresql+asyncpg://x/y", bank_keys=None)
    app = create_app(settings)
    before = sealing.current()
    with pytest.raises(BankKeyError, match="no bank key"):
        async with app.router.lifespan_context(app):
            pytest.fail("the app started without bank keys on PostgreSQL")
    assert sealing.current() is before


def test_a_malformed_setting_stops_every_command(tmp_path: Path) -> None:
    bad = f"{TEST_BANK_KEYS},k2:c2hvcnQ="
    result = proctor(
        "bank", "stats", env={"PROCTOR_BANK_KEYS": bad, "PROCTOR_DATA_DIR": str(tmp_path)}
    )
    assert result.returncode == 2
    assert "error: PROCTOR_BANK_KEYS: entry 2: key 'k2' is 5 bytes, expected 32" in result.stderr
    assert "c2hvcnQ" not in result.stderr + result.stdout


def test_postgres_commands_without_keys_refuse(tmp_path: Path) -> None:
    env = {"PROCTOR_DATABASE_URL": "postgresql+asyncpg://nobody@127.0.0.1:1/none"}
    result = proctor("bank", "stats", env={**env, "PROCTOR_BANK_KEYS": ""})
    assert result.returncode == 1
    assert "error: no bank key: set PROCTOR_BANK_KEY_FILE or PROCTOR_BANK_KEYS" in result.stderr
    assert proctor("bank", "new-key", env={**env, "PROCTOR_BANK_KEYS": ""}).returncode == 0


def test_new_key_prints_a_fresh_entry() -> None:
    first, second = (proctor("bank", "new-key", "--id", "k7") for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0
    assert first.stdout != second.stdout
    assert parse_keyring(first.stdout.strip(), source="x", lines=False).active_id == "k7"
    bad = proctor("bank", "new-key", "--id", "not valid")
    assert bad.returncode == 2 and "does not match" in bad.stderr


async def test_rotate_key_moves_the_bank_to_a_new_key(fresh_db_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "bank-keys"
    keys.write_text(TEST_BANK_KEYS + "\n")
    keys.chmod(0o600)
    env = {
        "PROCTOR_DATABASE_URL": fresh_db_url,
        "PROCTOR_BANK_KEY_FILE": str(keys),
        "PROCTOR_DATA_DIR": str(tmp_path / "data"),
    }
    imported = proctor("bank", "import", "--sample", "mmlu_pro", env=env)
    assert imported.returncode == 0, imported.stderr
    check = proctor("bank", "rotate-key", "--check", "--json", env=env)
    assert check.returncode == 0, check.stderr
    before = json.loads(check.stdout)
    n_items = before["columns"]["items.answer"]["test"]
    assert before["active_key"] == "test" and before["not_under_active_key"] == 0 and n_items

    new = proctor("bank", "new-key", "--id", "k2").stdout.strip()
    keys.write_text(f"# old\n{TEST_BANK_KEYS}\n{new}  # active\n")
    rotated = proctor("bank", "rotate-key", "--batch", "500", env=env)
    assert rotated.returncode == 0, rotated.stderr
    assert f"items.answer: {n_items} rows re-sealed" in rotated.stdout
    assert "every sealed value is under key k2" in rotated.stdout
    again = proctor("bank", "rotate-key", env=env)
    assert "0 rows re-sealed" in again.stdout  # idempotent

    raw = [row[0] for row in await fetch_all(fresh_db_url, select(RAW_ANSWER))]
    assert len(raw) == n_items and all(v.startswith("pk1:k2:") for v in raw)
    keys.write_text(new + "\n")  # the old key removed
    after = json.loads(proctor("bank", "rotate-key", "--check", "--json", env=env).stdout)
    assert after["columns"]["items.answer"] == {"k2": n_items}
    with sealing.using(parse_keyring(new, source="k2", lines=False)):
        async with database_session(fresh_db_url) as db:
            answers = list((await db.execute(select(Item.answer))).scalars())
    assert len(answers) == n_items and not any(a.startswith("pk1:") for a in answers)
    assert "J" in answers or "A" in answers  # MMLU-Pro letters, opened


async def test_a_session_on_the_embedded_default_with_its_generated_key(
    tmp_path: Path, llm: FakeLlm
) -> None:
    data = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{data / 'proctor.db'}"
    settings = judged_settings(url, llm, bank_keys=None, data_dir=data)
    before = sealing.current()
    upgrade(url)
    async with running_api(settings) as (_, client):
        assert (data / KEY_FILE).exists()
        assert stat.S_IMODE((data / KEY_FILE).stat().st_mode) == 0o600
        world = await seed_world(url, per_cell=3)  # sealed under the generated key
        driven = await drive_session(client, url, world, n_items=8)
        await wait_until_scored(url, driven.id, within_s=120)
    assert sealing.current() is before  # the runtime put the suite's keyring back
    generated = load_keyring(settings)
    assert generated.active_id == "local"
    raw = [row[0] for row in await fetch_all(url, select(RAW_ANSWER))]
    assert raw and all(v.startswith("pk1:local:") for v in raw)
