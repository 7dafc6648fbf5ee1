"""Which key signs the audit checkpoints, and the warning a server on PostgreSQL gives when
it would sign with a key of its own making (replicas on other hosts would each make one)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from server.api.runtime import build_runtime
from server.ledger.signing import KEY_FILE, new_private_text, parse_private, shared_key_warning
from tests.support.api import test_settings

POSTGRES_URL = "postgresql+asyncpg://proctor_app@127.0.0.1:1/proctor"


def test_a_generated_key_on_postgresql_is_warned_about(tmp_path: Path) -> None:
    settings = test_settings(POSTGRES_URL, data_dir=tmp_path)
    warning = shared_key_warning(settings)
    assert warning is not None
    assert str(tmp_path / KEY_FILE) in warning and "PROCTOR_AUDIT_SIGNING_KEY" in warning


@pytest.mark.parametrize("setting", ["audit_signing_key", "audit_signing_key_file"])
def test_a_configured_key_is_not_warned_about(tmp_path: Path, setting: str) -> None:
    value = new_private_text() if setting == "audit_signing_key" else str(tmp_path / "k")
    settings = test_settings(POSTGRES_URL, data_dir=tmp_path, **{setting: value})
    assert shared_key_warning(settings) is None


def test_the_embedded_database_is_not_warned_about(tmp_path: Path) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/proctor.db", data_dir=tmp_path)
    assert shared_key_warning(settings) is None


def test_the_server_logs_the_warning_and_signs_with_the_generated_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = test_settings(POSTGRES_URL, data_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="server.api.runtime"):
        runtime = build_runtime(settings)  # creates the engine, connects to nothing
    assert any("give them all one key" in record.getMessage() for record in caplog.records)
    generated = parse_private((tmp_path / KEY_FILE).read_text(), source="test")
    assert runtime.audit.signing_key is not None
    assert runtime.audit.signing_key.public.key_id == generated.public.key_id
