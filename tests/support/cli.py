"""The ``proctor`` command as a user runs it: ``python -m server`` in a subprocess.

The child gets this process's environment without its ``PROCTOR_*`` variables (so a
developer's settings never leak into a test), plus the variables a test passes,
``COLUMNS=200`` (so Rich does not wrap the tables the tests read) and, unless the test
gives it, ``PROCTOR_BANK_KEYS`` of the test-suite (``tests.support.bank_keys``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.support.bank_keys import TEST_BANK_KEYS

Run = subprocess.CompletedProcess[str]

TIMEOUT_S = 600.0


def proctor(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = TIMEOUT_S,
) -> Run:
    """Run ``proctor ARGS`` (in ``cwd``) with ``env`` added to the cleaned environment; never
    raises on a non-zero exit (the test reads ``returncode``, ``stdout`` and ``stderr``)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    full.update(env or {}, COLUMNS="200")
    full.setdefault("PROCTOR_BANK_KEYS", TEST_BANK_KEYS)  # "" in env: none (the data dir's)
    return subprocess.run(
        [sys.executable, "-m", "server", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def proctor_env(env: Mapping[str, str], *args: str) -> Run:
    """``proctor(*args, env=env)`` with the environment first, for ``run_sync(proctor_env,
    env, ...)``."""
    return proctor(*args, env=env)


def proctor_db(url: str, *args: str, check: bool = True) -> Run:
    """Run ``proctor ARGS`` on the database ``url`` (``PROCTOR_DATABASE_URL``); with
    ``check``, a non-zero exit fails the test with the command's stderr."""
    result = proctor(*args, env={"PROCTOR_DATABASE_URL": url})
    if check and result.returncode != 0:
        raise AssertionError(f"proctor {' '.join(args)} failed:\n{result.stderr}")
    return result
