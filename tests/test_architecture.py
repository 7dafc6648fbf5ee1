"""The dependency rules of pyproject.toml's ``[tool.importlinter]`` hold.

``lint-imports`` runs in CI too; this test makes the README's single test command cover
it. The rules themselves (which package may import which) are the contracts in
pyproject.toml; their names say what each one keeps.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_package_is_under_the_contracts() -> None:
    """A new top-level package is added to the contracts' root packages, or no rule sees it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    checked = set(config["tool"]["importlinter"]["root_packages"])
    assert checked == set(config["tool"]["mypy"]["packages"])
