"""Reading a secret key file that only its owner may access (the bank's keys, the audit
signing key)."""

from __future__ import annotations

import stat
from pathlib import Path


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
