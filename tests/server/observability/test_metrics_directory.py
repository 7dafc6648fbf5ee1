"""``proctor serve`` and ``PROMETHEUS_MULTIPROC_DIR``: an operator's directory (a volume
that may outlive the container) is emptied of the last run's files before workers start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.cli.serve import metrics_directory
from server.observability.metrics import MULTIPROC_ENV


@pytest.mark.parametrize("workers", [1, 4])
def test_an_operators_directory_loses_the_last_runs_files_and_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    stale = tmp_path / "counter_4242.db"  # a dead process's counters of the last run
    stale.write_bytes(b"\0" * 16)
    keep = tmp_path / "README"
    keep.write_text("not ours")
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    with metrics_directory(workers):
        assert not stale.exists()
        assert os.environ[MULTIPROC_ENV] == str(tmp_path)
    assert tmp_path.is_dir() and keep.exists()


def test_several_workers_without_a_directory_get_a_fresh_one_removed_at_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with metrics_directory(2):
        made = Path(os.environ[MULTIPROC_ENV])
        assert made.is_dir() and not any(made.iterdir())
    assert not made.exists() and MULTIPROC_ENV not in os.environ
