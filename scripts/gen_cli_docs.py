"""Render docs/cli.md from the ``proctor`` Typer app (:data:`server.cli.main.app`).

Run ``python scripts/gen_cli_docs.py`` after changing a command, an option or its help;
tests/test_docs.py fails while the committed page differs from what this renders. The
Markdown comes from Typer's own renderer (the one behind ``typer <module> utils docs``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
import typer.cli

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.cli.main import app  # noqa: E402

PAGE = REPO / "docs" / "cli.md"

INTRO = """\
Every command and option of `proctor`, as `proctor COMMAND --help` prints them. Settings
that are not options come from `PROCTOR_*` variables ([configuration.md](configuration.md)).

<!-- Generated from server/cli/ by scripts/gen_cli_docs.py: edit the commands' help there,
then run `python scripts/gen_cli_docs.py`. -->

"""


def render() -> str:
    """The whole of docs/cli.md."""
    command = typer.main.get_command(app)
    context = typer.Context(command, info_name="proctor")
    body = typer.cli.get_docs_for_click(
        obj=command, ctx=context, name="proctor", title="Command-line reference"
    )
    title, _, rest = body.partition("\n\n")
    return f"{title}\n\n{INTRO}{rest.strip()}\n"


def main() -> None:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
