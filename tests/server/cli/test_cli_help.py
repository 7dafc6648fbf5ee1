"""``proctor --help`` and every ``proctor GROUP --help``, in-process (Typer's runner) at
80 columns: every group is listed, each command's summary fits on its one line of the
command list, each page ends with an example, and no page cites a file."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from server.cli.main import app

GROUPS = (
    "db",
    "admin",
    "bank",
    "judge",
    "leaderboard",
    "audit",
    "review",
    "analyze",
    "simulate",
    "run",
    "endpoints",
    "runs",
    "run-worker",
    "fake-llm",
    "demo",
    "serve",
)
COMMANDS_OF_GROUP = {
    "db": {"upgrade"},
    "admin": {"create-org", "create-key", "set-anchor"},
    "bank": {"import", "stats", "anchor-set", "sample"},
    "judge": {"run", "worker", "agreement"},
    "fake-llm": {"serve"},
    "review": {"list", "show", "score", "skip", "agreement"},
    "audit": {"verify"},
    "endpoints": {"set", "show", "delete", "check"},
    "runs": {"start", "show", "list", "pause", "resume", "cancel"},
}
"""The sub-commands each group has at least."""
ROOT_SUMMARY = "Proctor: a live, dynamic evaluation server for LLMs."


def help_page(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def ends_with_an_example(page: str, command: str) -> bool:
    """Whether ``Example: proctor COMMAND ...`` follows the last panel (the epilog)."""
    example = page.rfind(f"Example: proctor {command}")
    return example > page.rfind("╰")


def command_list(page: str) -> dict[str, str]:
    """Command name -> its summary, from the Commands panel; fails on a summary that
    wraps onto a second line (a row whose name column is empty)."""
    lines = page.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
    bottom = next(i for i in range(top + 1, len(lines)) if lines[i].startswith("╰"))
    rows = {}
    for line in lines[top + 1 : bottom]:
        inner = line.strip("│").strip("\n")
        assert inner[:2] != "  ", f"a summary wraps onto a second line: {line!r}"
        name, _, summary = inner.strip().partition(" ")
        rows[name] = summary.strip()
    return rows


def test_the_root_lists_every_group_with_a_one_line_summary_and_an_example() -> None:
    page = help_page()
    listed = command_list(page)
    assert set(listed) == set(GROUPS)
    assert all(listed.values()), listed
    assert page.split("Usage: proctor", 1)[1].splitlines()[2].strip() == ROOT_SUMMARY
    assert ends_with_an_example(page, "")


@pytest.mark.parametrize("group", GROUPS)
def test_a_group_page_opens_with_the_summary_the_root_lists(group: str) -> None:
    summary = command_list(help_page())[group]
    assert summary in help_page(group).split("╭", 1)[0]


@pytest.mark.parametrize("group", sorted(COMMANDS_OF_GROUP))
def test_a_group_lists_its_commands_one_line_each_and_ends_with_an_example(group: str) -> None:
    page = help_page(group)
    listed = command_list(page)
    assert COMMANDS_OF_GROUP[group] <= set(listed)
    assert all(listed.values()), listed
    assert ends_with_an_example(page, f"{group} ")


@pytest.mark.parametrize("command", sorted(set(GROUPS) - set(COMMANDS_OF_GROUP)))
def test_a_single_command_ends_with_an_example(command: str) -> None:
    page = help_page(command)
    assert ends_with_an_example(page, command)


@pytest.mark.parametrize(
    "args",
    [
        (),
        *((g,) for g in GROUPS),
        *((g, c) for g, cs in COMMANDS_OF_GROUP.items() for c in sorted(cs)),
    ],
    ids=lambda args: " ".join(args) or "proctor",
)
def test_no_help_page_cites_a_file_of_papers(args: tuple[str, ...]) -> None:
    assert "papers/" not in help_page(*args)
