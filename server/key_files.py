"""Secret key files that only their owner may access: creating the embedded default's
(the JWT secret, the bank's keys, the audit signing key) and reading a configured one."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

OWNER_ONLY = 0o600
"""The mode of a created key file: read and write by its owner, nothing for anyone else."""


class KeyFileError(RuntimeError):
    """The key file is missing, unreadable, or group or others may access it; the message
    names the file (as the caller called it) and says what to fix."""


def read_owner_only(path: Path, *, where: str | None = None) -> str:
    """The text of the key file ``path``; ``KeyFileError`` if it is missing, unreadable or
    not UTF-8, or if its mode lets group or others read, write or run it. ``where`` names
    the file in messages (default: the path)."""
    name = str(path) if where is None else where
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(
                f"{name}: group or others may access it (mode {stat.S_IMODE(mode):04o}); "
                f"make it readable by its owner only: chmod 600 {path}"
            )
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyFileError(f"{name}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise KeyFileError(f"{name}: cannot be read ({type(error).__name__})") from None


def create_owner_only(path: Path, content: Callable[[], str]) -> bool:
    """Create the key file ``path`` holding ``content()`` with mode 0600 unless it exists
    (its directory too); True when this call created it, False when it was there.

    ``content`` is called only when the file is missing (it makes the fresh key). The text
    is written whole under a private name in the same directory, then linked into place: a
    process starting at the same time sees no file or a complete one, and the first link
    wins (the other process's draft is dropped and its call returns False).
    """
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, OWNER_ONLY)
    os.fchmod(fd, OWNER_ONLY)  # a draft left by a crash keeps its mode otherwise
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(content())
        os.link(draft, path)
    except FileExistsError:
        return False
    finally:
        draft.unlink(missing_ok=True)
    return True
