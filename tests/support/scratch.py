"""Where the suite's scratch files go: pytest's ``tmp_path`` directories on a RAM file
system (``/dev/shm``) when the machine has one.

Every SQLite database of the suite (``fresh_db_url``, ``db_url``, the module banks) is a
copy of the migrated template under ``tmp_path``, and SQLite syncs its write-ahead log on
every commit; on the disk, an in-process ``GET /v1/sessions/{id}`` cost 7.0-7.2 ms of CPU
and 15-17 ms, on ``/dev/shm`` 5.0-5.4 ms and 10-11 ms (two runs of 500 requests each,
alternating, on the 2-core machine while another job ran). The durability settings stay
what the product uses; only the medium under the throwaway files changes. PostgreSQL,
Redis and the other servers keep their data under the system temp directory
(``tests.support.services``).

``PYTEST_DEBUG_TEMPROOT`` (pytest's own setting of the temp root) or ``--basetemp`` given by
the user wins; ``PROCTOR_TEST_DISK_TMP=1`` keeps everything on disk. With
``tmp_path_retention_policy = "failed"`` (pyproject.toml) a passed test's directory is
removed as it ends, so the RAM it takes stays small; a failed test's stays for a look.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

TEMPROOT_ENV = "PYTEST_DEBUG_TEMPROOT"
DISK_ENV = "PROCTOR_TEST_DISK_TMP"
RAM_DIR = Path("/dev/shm")
MIN_FREE_BYTES = 4 * 1024**3
"""A RAM file system with less room than this is left alone."""


def ram_temproot() -> Path | None:
    """``/dev/shm`` if it is a writable directory with ``MIN_FREE_BYTES`` free."""
    if not (RAM_DIR.is_dir() and os.access(RAM_DIR, os.W_OK | os.X_OK)):
        return None
    return RAM_DIR if shutil.disk_usage(RAM_DIR).free >= MIN_FREE_BYTES else None


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads the temp root
def pytest_configure(config: pytest.Config) -> None:
    """Point pytest's temp root at the RAM file system, unless told otherwise. Runs in
    the controller before xdist starts its workers, which get their directories under it."""
    if config.option.basetemp or os.environ.get(TEMPROOT_ENV):
        return
    if os.environ.get(DISK_ENV, "").lower() in {"1", "true", "yes"}:
        return
    root = ram_temproot()
    if root is not None:
        os.environ[TEMPROOT_ENV] = str(root)
