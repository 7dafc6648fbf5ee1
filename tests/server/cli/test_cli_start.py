"""How ``proctor`` starts, in fresh interpreters (``python -m server``, as a user runs it):
the root imports a command's module only when the command runs or its help is shown
(``server.cli.lazy``), a help page imports no database, web or SciPy code, a help page is
shown whatever the settings, and a mistyped command still gets a suggestion.

How long a start takes is measured by tests/benchmarks/bench_cli_start.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.lazy import Lazy
from server.cli.main import COMMANDS
from tests.support.bank_keys import TEST_BANK_KEYS

PROBE = """
import json, sys
sys.argv = ["proctor", *json.loads(sys.argv[1])]
from server.cli.main import app
try:
    app(prog_name="proctor")
except SystemExit as stop:
    code = stop.code
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""
"""Runs ``proctor ARGS`` and reports on stderr every module it imported."""
HEAVY = ("sqlalchemy", "alembic", "scipy", "fastapi", "server.app", "matplotlib", "asyncpg")
"""What no help page needs."""
COMMAND_MODULES = {entry.module for entry in COMMANDS}


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, set[str]]:
    """Exit status, stdout and the modules imported by ``proctor ARGS`` in a new
    interpreter."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        env={**clean, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    head, _, modules = result.stderr.rpartition("\nMODULES ")
    assert modules, result.stderr
    return result.returncode, result.stdout + head, set(json.loads(modules))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}


def test_the_root_help_imports_no_command() -> None:
    code, out, modules = run("--help")
    assert code == 0, out
    assert "fake-llm" in out
    assert not modules & COMMAND_MODULES
    assert not heavy(modules)


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda entry: entry.name)
def test_a_help_page_imports_its_command_alone_and_no_heavy_code(entry: Lazy) -> None:
    code, out, modules = run(entry.name, "--help")
    assert code == 0, out
    assert f"Usage: proctor {entry.name}" in out
    assert modules & COMMAND_MODULES == {entry.module}
    assert not heavy(modules), sorted(heavy(modules))


def test_a_command_imports_what_it_runs(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    code, out, modules = run("db", "upgrade", env={"PROCTOR_DATABASE_URL": url})
    assert code == 0, out
    assert {"sqlalchemy", "alembic"} <= modules
    assert modules & COMMAND_MODULES == {"server.cli.db"}


def test_a_help_page_is_shown_whatever_the_settings(tmp_path: Path) -> None:
    weak = {"PROCTOR_JWT_SECRET": "change-me", "PROCTOR_DATA_DIR": str(tmp_path)}
    code, out, _ = run("db", "upgrade", "--help", env=weak)
    assert code == 0, out
    assert "Apply schema migrations" in out
    code, out, _ = run("db", "upgrade", env=weak)
    assert code == 2
    assert "PROCTOR_JWT_SECRET" in out
    code, out, _ = run("db", "upgrade", "--", "--help", env=weak)  # an argument, not help
    assert code == 2, out


def test_a_mistyped_command_gets_a_suggestion() -> None:
    code, out, modules = run("bnak", "stats")
    assert code == 2
    assert "No such command 'bnak'" in out
    assert "Did you mean 'bank'?" in out
    assert not modules & COMMAND_MODULES


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite migrates first: every model loads
def test_a_command_writing_one_packages_rows_resolves_every_table(
    fresh_db_url: str, tmp_path: Path
) -> None:
    """``judge agreement --store`` imports only the scoring models; their foreign keys name
    tables of other packages (``calibration_sets``), which the ORM must know at the first
    flush however little the command imported."""
    ratings = tmp_path / "ratings.csv"
    lines = ["answer_id,rater,score"]
    for n in range(12):
        lines += [f"a{n},human,{n % 4}", f"a{n},judge-x,{n % 4}"]
    ratings.write_text("\n".join(lines) + "\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env = {**clean, "PROCTOR_DATABASE_URL": fresh_db_url, "PROCTOR_BANK_KEYS": TEST_BANK_KEYS}
    result = subprocess.run(
        [sys.executable, "-m", "server", "judge", "agreement", str(ratings), "--store"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stored the calibration of 1 raters" in result.stderr
