"""The operator's guide and deploy/README.md: every relative link resolves, and the
guide covers what an operator must find there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.tools import DEPLOY, REPO

GUIDE = REPO / "docs" / "operations.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", [GUIDE, DEPLOY / "README.md"], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    targets = [t for t in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert missing == []


def test_guide_has_every_section() -> None:
    headings = re.findall(r"^## (.+)$", GUIDE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert set(headings) >= {
        "Sizing",
        "Configuration",
        "Monitoring",
        "Backup and restore",
        "Key rotation",
        "Upgrades with migrations",
    }
