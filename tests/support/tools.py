"""Command-line tools the tests run but Proctor does not depend on, each installed once in
a virtual environment of its own (their pins must not move the test environment's
packages: openapi-python-client 0.29 pins httpx < 0.29 and typer < 0.28).

``tool_bin("openapi-python-client==0.29.1", "openapi-python-client")`` gives the path of
the tool's executable, installing it under ``~/.cache/proctor-test-tools/`` on first use
(pip from the configured index; a file lock keeps parallel test workers from installing it
twice). A failed install raises with pip's output: the tests that need the tool fail, they
are never skipped.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "proctor-test-tools"
INSTALL_TIMEOUT_S = 600


def tool_bin(requirement: str, executable: str) -> Path:
    """The executable ``executable`` of ``requirement`` (an exact ``name==version`` pin),
    installed in a venv of its own if it is not there yet."""
    name = requirement.replace("==", "-")
    home = CACHE / name
    binary = home / "bin" / executable
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "installed").exists():
            _install(home, requirement)
    return binary


def _install(home: Path, requirement: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
    done = subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "-q", requirement],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {requirement} failed:\n{done.stdout}\n{done.stderr}")
    (home / "installed").write_text(requirement + "\n")
