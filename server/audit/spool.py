"""Spool files: audit rows kept on local disk while the database is unavailable.

JSON lines under the spool directory, one file per process and database
(``audit-<database tag>-<pid>-<random>.jsonl``), datetimes and UUIDs kept exactly (tagged
values), every append fsynced. The writing process holds an exclusive ``flock`` on its
current file; a replayer takes a file's lock without waiting (``Spool.claim``), so a file
being written or replayed by someone else is skipped. Blocking file I/O: the writer
(``server.audit.writer``) calls it from worker threads.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
MAX_SPOOL_FILE_ROWS = 5000
"""A spool file is closed (and becomes replayable) after this many rows."""

Row = dict[str, Any]


class Spool:
    """This process's spool file of one database, and the closed ones in the directory.

    Blocking (file I/O and fsync): call from a worker thread. Thread-safe.
    """

    def __init__(self, directory: Path, tag: str, *, max_rows: int = MAX_SPOOL_FILE_ROWS) -> None:
        self.directory = directory
        self.max_rows = max_rows
        self._pattern = f"audit-{tag}-*.jsonl"
        self._prefix = f"audit-{tag}-{os.getpid()}-"
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._path: Path | None = None
        self._rows = 0

    def __str__(self) -> str:
        return str(self.directory)

    def append(self, rows: list[Row]) -> None:
        """Append ``rows`` to this process's file and fsync it (the file is created, and
        locked, on the first row; closed after ``max_rows`` rows)."""
        data = b"".join(encode_row(row) for row in rows)
        with self._lock:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            try:
                _write_all(self._fd, data)
                os.fsync(self._fd)
            except OSError:
                self._close()  # the file may end in a torn line: go on in a new one
                raise
            self._rows += len(rows)
            if self._rows >= self.max_rows:
                self._close()

    def rotate(self) -> None:
        """Close this process's current file (releasing its lock): it can be replayed."""
        with self._lock:
            self._close()

    def closed_files(self) -> list[Path]:
        """Spool files of this database other than this process's current one, by name."""
        with self._lock:
            current = self._path
        return sorted(p for p in self.directory.glob(self._pattern) if p != current)

    def claim(self, path: Path) -> Claim | None:
        """``path`` locked for replay with its rows, or None if someone else holds it or
        it is gone (replayed and deleted by another writer meanwhile)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _same_file(fd, path):
                os.close(fd)
                return None
            with os.fdopen(os.dup(fd), "rb") as stream:
                rows = list(decode_rows(stream, path))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return Claim(path, fd, rows)

    def _open(self) -> None:
        """A new file, locked before its name can match another writer's glob."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"{self._prefix}{secrets.token_hex(6)}"
        hidden = self.directory / f".{name}.tmp"
        fd = os.open(
            hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = self.directory / f"{name}.jsonl"
            os.rename(hidden, path)
            _fsync_directory(self.directory)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                hidden.unlink()
            raise
        self._fd, self._path, self._rows = fd, path, 0

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._path, self._rows = None, None, 0


@dataclass
class Claim:
    """A spool file locked by this writer (the lock goes with ``close``)."""

    path: Path
    fd: int
    rows: list[Row]

    def delete(self) -> None:
        self.path.unlink()
        _fsync_directory(self.path.parent)

    def reject(self) -> None:
        self.path.rename(self.path.with_suffix(".rejected"))

    def close(self) -> None:
        os.close(self.fd)


def encode_row(row: Row) -> bytes:
    """One JSON line; datetimes (with their offset) and UUIDs as tagged values."""
    return (json.dumps(row, default=_tagged, separators=(",", ":")) + "\n").encode()


def decode_rows(lines: Iterable[bytes], origin: Path) -> Iterable[Row]:
    """The rows of a spool file; a line that is not JSON (a write torn by a crash, whose
    request was never answered) is skipped and logged."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line, object_hook=_untagged)
        except ValueError:
            log.warning("audit spool %s: line %d is not JSON, skipped", origin.name, number)


def _tagged(value: object) -> dict[str, str]:
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    raise TypeError(f"an audit row cannot hold {type(value).__name__}")


def _untagged(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if "$datetime" in obj:
            return datetime.fromisoformat(obj["$datetime"])
        if "$uuid" in obj:
            return uuid.UUID(obj["$uuid"])
    return obj


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
