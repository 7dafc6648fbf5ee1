"""Creating an embedded default's key file (``server.key_files.create_owner_only``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from server.key_files import create_owner_only, read_owner_only


def test_a_missing_key_file_is_created_owner_only_and_a_present_one_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / "some-key"
    assert create_owner_only(path, lambda: "first\n") is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_owner_only(path) == "first\n"

    def never() -> str:
        raise AssertionError("no key is made for a file that exists")

    assert create_owner_only(path, never) is False
    assert path.read_text(encoding="utf-8") == "first\n"
    assert os.listdir(path.parent) == ["some-key"], "the draft is gone"


def test_a_file_linked_in_by_another_process_first_wins(tmp_path: Path) -> None:
    path = tmp_path / "some-key"

    def other_process_first() -> str:
        path.write_text("theirs\n", encoding="utf-8")
        return "ours\n"

    assert create_owner_only(path, other_process_first) is False
    assert path.read_text(encoding="utf-8") == "theirs\n"
    assert os.listdir(tmp_path) == ["some-key"]
