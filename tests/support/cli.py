"""The ``proctor`` command as a user runs it: a process of its own per command.

The child gets this process's environment without its ``PROCTOR_*`` variables (so a
developer's settings never leak into a test), plus the variables a test passes,
``COLUMNS=200`` (so Rich does not wrap the tables the tests read) and, unless the test
gives it, ``PROCTOR_BANK_KEYS`` of the test-suite (``tests.support.bank_keys``).

The process is forked from one that has imported Proctor already
(``tests.support.preloaded``), which spares each command the interpreter's start-up and
imports; ``PROCTOR_TEST_FRESH_PROCESSES=1`` starts ``python -m server`` instead, a fresh
interpreter per command, as do the tests of start-up itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.support import preloaded
from tests.support.bank_keys import TEST_BANK_KEYS

FRESH_PROCESSES_ENV = "PROCTOR_TEST_FRESH_PROCESSES"

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
    base = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    base["COLUMNS"] = "200"
    full = {**base, **(env or {}), "COLUMNS": "200"}
    full.setdefault("PROCTOR_BANK_KEYS", TEST_BANK_KEYS)  # "" in env: none (the data dir's)
    if os.environ.get(FRESH_PROCESSES_ENV) != "1":
        return preloaded.zygote(base).run(args, env=full, cwd=cwd, timeout=timeout)
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


def proctor_db(
    url: str, *args: str, check: bool = True, env: Mapping[str, str] | None = None
) -> Run:
    """Run ``proctor ARGS`` on the database ``url`` (``PROCTOR_DATABASE_URL``) with
    ``env`` besides; with ``check``, a non-zero exit fails the test with the command's
    stderr."""
    result = proctor(*args, env={"PROCTOR_DATABASE_URL": url, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"proctor {' '.join(args)} failed:\n{result.stderr}")
    return result
