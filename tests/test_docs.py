"""The documentation: generated pages are current, and no text cites our private files.

docs/configuration.md, docs/cli.md and docs/openapi.json are rendered from the code by
scripts/gen_config_docs.py, scripts/gen_cli_docs.py and scripts/gen_openapi.py; a page that
differs from a fresh rendering is stale. Every setting has a description, every problem type
a row in docs/api.md, and no secret reaches a page.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import gen_config_docs
from server.config import JudgeEndpoint, Settings
from server.errors import ProctorError

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("generator", ["gen_config_docs", "gen_cli_docs", "gen_openapi"])
def test_generated_page_is_current(generator: str) -> None:
    module = importlib.import_module(f"scripts.{generator}")
    page: Path = module.PAGE
    assert page.read_text(encoding="utf-8") == module.render(), (
        f"{page.relative_to(REPO)} is stale: run python scripts/{generator}.py"
    )


def test_every_setting_is_described() -> None:
    for model in (Settings, JudgeEndpoint):
        undocumented = [name for name, field in model.model_fields.items() if not field.description]
        assert undocumented == [], f"{model.__name__}: fields without a docstring"


def test_every_error_type_is_documented() -> None:
    """Each problem type the server can answer with has a row in docs/api.md."""
    api_page = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    pending = [ProctorError]
    while pending:
        error = pending.pop()
        pending.extend(error.__subclasses__())
        slug = error.title.lower().replace(" ", "-")
        assert f"| {error.status} | `{slug}` | {error.title} |" in api_page, error.__name__


def test_configuration_page_never_shows_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "a-secret-that-must-not-appear-in-any-page-0123456789"
    monkeypatch.setenv("PROCTOR_JWT_SECRET", secret)
    assert secret not in gen_config_docs.render()


# --- references to private files -----------------------------------------------------------

PRIVATE_REFERENCE = re.compile(
    r"papers/\d"  # our copies of the papers ("papers/004 eq. 2"): cite title and authors
    r"|\.\./shared"  # the workspace beside the repository
    r"|shared/(?:papers|data)"  # the same, spelt from the root
    r"|\bDESIGN(?:\.md)?\b"  # the design notes, which live in that workspace
    r"|\b[Ii]ssues? #?\d+"  # our tracker's issue numbers
)
"""A citation or a pointer that only makes sense inside our workspace."""

DATA_LOCATOR = Path("tests/support/paths.py")
"""The one module that says where the real data sets are, so it names that directory."""
EXEMPT = {DATA_LOCATOR, Path(__file__).resolve().relative_to(REPO)}
"""The data locator, and this module, whose patterns name what they look for."""

TEXT_SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".yml", ".yaml", ".mako", ".sh"}
SKIPPED_DIRS = {".git", ".venv", "build", "dist", "node_modules"}


def _text_files() -> Iterator[Path]:
    for path in sorted(REPO.rglob("*")):
        relative = path.relative_to(REPO)
        if any(
            part in SKIPPED_DIRS or part.endswith((".egg-info", "_cache"))
            for part in relative.parts
        ):
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or relative == Path(".ci/run")):
            yield relative


def test_no_reference_to_private_files_or_issue_numbers() -> None:
    """Comments, docstrings, help texts and docs cite papers by title and authors (e.g.
    "LLMEval-Fair (Zhang et al.), eq. 2"), never by our file of the paper, never by an
    issue number, and never point into the workspace beside the repository (``../shared``,
    its papers, data and design notes): a reader of the repository has none of them.

    Code that reads the real data sets gets their directory from
    ``tests.support.paths.SHARED_DATA`` (``$PROCTOR_SHARED_DATA`` or a default location)
    and names files relative to it, so the literal directory appears in one module only,
    :data:`DATA_LOCATOR`, which is exempt: there it is the location, not a citation.
    """
    offenders = [
        f"{relative}:{number}: {line.strip()}"
        for relative in _text_files()
        if relative not in EXEMPT
        for number, line in enumerate(
            (REPO / relative).read_text(encoding="utf-8", errors="replace").splitlines(), 1
        )
        if PRIVATE_REFERENCE.search(line)
    ]
    assert offenders == [], f"{len(offenders)} references:\n" + "\n".join(offenders)
