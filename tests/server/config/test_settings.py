"""``Settings`` refuses a weak JWT secret wherever settings are read: the server, and every
``proctor`` command (one ``error:`` line naming the variable, exit status 2, no
traceback)."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.config import InvalidSettings, Settings, get_settings
from tests.support.api import JWT_SECRET
from tests.support.cli import proctor as run_proctor

WEAK_SECRETS = [
    pytest.param("change-me", "well-known default", id="placeholder-change-me"),
    pytest.param("Secret", "well-known default", id="placeholder-secret"),
    pytest.param("s3cr3t-but-short-9Xq", "at least 32 bytes", id="short"),
    pytest.param("z" * 48, "too few distinct characters", id="one-character-repeated"),
    pytest.param("abab" * 12, "too few distinct characters", id="two-characters-repeated"),
    pytest.param("", "at least 32 bytes", id="empty"),
]


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.mark.parametrize(("secret", "why"), WEAK_SECRETS)
def test_a_weak_secret_is_refused_naming_the_setting(secret: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        settings(jwt_secret=secret)
    message = str(refused.value)
    assert "PROCTOR_JWT_SECRET" in message and why in message
    if len(secret) > 3:
        assert secret not in message  # a refused secret is not echoed into logs


@pytest.mark.parametrize(("secret", "why"), WEAK_SECRETS)
def test_get_settings_gives_one_line_per_problem(
    secret: str, why: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("PROCTOR_JWT_SECRET", secret)
    get_settings.cache_clear()
    try:
        with pytest.raises(InvalidSettings) as refused:
            get_settings()
    finally:
        get_settings.cache_clear()
    (line,) = refused.value.lines
    assert line.startswith("PROCTOR_JWT_SECRET") and why in line


@pytest.mark.parametrize(
    "secret",
    [JWT_SECRET, secrets.token_urlsafe(48), "Ab3$x7Qp2Lm9Zr4Tn8VbKc5Wd1Hf6Gj0"],
    ids=["the-suite's", "random", "mixed-classes"],  # the same ids in every xdist worker
)
def test_strong_secrets_and_no_secret_are_accepted(secret: str) -> None:
    assert settings(jwt_secret=secret).jwt_secret is not None
    assert settings(jwt_secret=None).jwt_secret is None  # the embedded default generates one


def test_other_invalid_settings_name_their_variable() -> None:
    with pytest.raises(ValidationError) as refused:
        settings(token_ttl_s=1)
    assert InvalidSettings.of(refused.value).lines[0].startswith("PROCTOR_TOKEN_TTL_S: ")


def proctor(*args: str, secret: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PROCTOR_JWT_SECRET": secret, "PROCTOR_DATA_DIR": str(home / "data")}
    return run_proctor(*args, env=env, cwd=home, timeout=120)


@pytest.mark.parametrize(
    "command",
    [("db", "upgrade"), ("admin", "create-org", "acme"), ("leaderboard",)],
    ids=lambda c: " ".join(c),
)
def test_proctor_commands_refuse_a_weak_secret_without_a_traceback(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    result = proctor(*command, secret="change-me", home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "error: PROCTOR_JWT_SECRET is a well-known default" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "data" / "proctor.db").exists()  # refused before doing anything


def test_a_proctor_command_runs_with_a_strong_secret(tmp_path: Path) -> None:
    result = proctor("db", "upgrade", secret=JWT_SECRET, home=tmp_path)
    assert result.returncode == 0, result.stderr
