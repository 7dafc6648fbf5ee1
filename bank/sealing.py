"""Encryption at rest of the bank's secrets: reference answers, explanations, and the other
columns that repeat them (a column says so by its type, :class:`SealedText`).

A sealed value is text, ``pk1:<key id>:<base64url(nonce || ciphertext)>``: AES-256-GCM
with a random 12-byte nonce, whose associated data binds the format version, the key id and
the column (``items.answer``), so a value moved to another column, or given another key
id, fails to open. The key id in every value lets keys rotate: a :class:`Keyring` holds
several keys, seals with the last one (the active key) and opens with any
(``bank.resealing`` moves old values to the active key).

A stored value without the ``pk1:`` prefix is read as clear text: rows written before
encryption existed, until ``proctor bank rotate-key`` seals them. (Every value written
through :class:`SealedText` is sealed, so only such old rows are ever clear.)

Key entries (``PROCTOR_BANK_KEYS``, or a key file one per line) are ``KEY_ID:BASE64``,
32 random bytes in standard base64, the key id ``[A-Za-z0-9_-]{1,32}``; the last entry is the
active key. Errors name the source and the entry, never the key material.

The keyring is process-wide (:func:`install`): a ``TypeDecorator`` is handed the dialect,
never the engine or the session, so there is no per-engine place to look a key up, and the
server, the CLI, the judge workers and the demo each install the keyring of their settings
at start-up. Nothing installed is an error on the first seal or sealed read, never clear
text written silently.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Dialect, Text, TypeDecorator

FORMAT = "pk1"
PREFIX = FORMAT + ":"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")
KEY_ID_RULE = "[A-Za-z0-9_-]{1,32}"


class BankKeyError(ValueError):
    """The keys are missing or malformed (a configuration problem); the message names the
    source and the entry, never key material."""


class SealError(ValueError):
    """A stored value cannot be opened: unknown key id, tampered with, or moved from another
    column."""


class Keyring:
    """Keys by id; the last one given is the active key (it seals), every one opens."""

    __slots__ = ("_ciphers", "active_id")

    def __init__(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """``entries`` in order, ``(key id, 32-byte key)``; raises ``BankKeyError`` on an
        empty list, a bad id or key length, or an id given twice."""
        if not entries:
            raise BankKeyError("a keyring needs at least one key")
        ciphers: dict[str, AESGCM] = {}
        for key_id, key in entries:
            if not KEY_ID_PATTERN.fullmatch(key_id):
                raise BankKeyError(
                    f"a key id ({len(key_id)} characters) does not match {KEY_ID_RULE}"
                )
            if len(key) != KEY_BYTES:
                raise BankKeyError(f"key {key_id!r} is {len(key)} bytes, expected {KEY_BYTES}")
            if key_id in ciphers:
                raise BankKeyError(f"key id {key_id!r} is given twice")
            ciphers[key_id] = AESGCM(key)
        self._ciphers = ciphers
        self.active_id: str = entries[-1][0]

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._ciphers)

    def __repr__(self) -> str:  # never the keys
        return f"Keyring(key_ids={self.key_ids!r}, active={self.active_id!r})"

    def seal(self, text: str, *, column: str) -> str:
        """``text`` sealed under the active key for ``column`` (e.g. ``items.answer``)."""
        nonce = os.urandom(NONCE_BYTES)
        body = self._ciphers[self.active_id].encrypt(
            nonce, text.encode("utf-8"), _associated(self.active_id, column)
        )
        token = base64.urlsafe_b64encode(nonce + body).decode("ascii")
        return f"{PREFIX}{self.active_id}:{token}"

    def open(self, stored: str, *, column: str) -> str:
        """The text of a sealed ``stored`` value of ``column``; ``SealError`` if it cannot
        be opened (unknown key id, tampered with, sealed for another column)."""
        key_id, token = _split(stored, column)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SealError(
                f"{column}: a value is sealed under key {key_id!r}, which the keyring does not "
                f"hold (it has {', '.join(self._ciphers)})"
            )
        try:
            raw = base64.urlsafe_b64decode(token.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise SealError(f"{column}: a sealed value is not base64url") from None
        if len(raw) < NONCE_BYTES + 16:
            raise SealError(f"{column}: a sealed value is too short")
        try:
            plain = cipher.decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(key_id, column)
            )
        except InvalidTag:
            raise SealError(
                f"{column}: a value under key {key_id!r} fails authentication (altered, or "
                "sealed for another column)"
            ) from None
        return plain.decode("utf-8")


def _associated(key_id: str, column: str) -> bytes:
    return f"{FORMAT}\x00{key_id}\x00{column}".encode()


def _split(stored: str, column: str) -> tuple[str, str]:
    key_id, sep, token = stored[len(PREFIX) :].partition(":")
    if not stored.startswith(PREFIX) or not sep or not KEY_ID_PATTERN.fullmatch(key_id):
        raise SealError(f"{column}: a value is not in the {FORMAT} format")
    return key_id, token


def is_sealed(stored: str) -> bool:
    """Whether a stored value is sealed (clear text otherwise: a row from before sealing)."""
    return stored.startswith(PREFIX)


def key_id_of(stored: str) -> str | None:
    """The key id a stored value is sealed under; None for clear text."""
    if not is_sealed(stored):
        return None
    return stored[len(PREFIX) :].partition(":")[0]


# --- key entries ------------------------------------------------------------------------


def parse_keyring(text: str, *, source: str, lines: bool) -> Keyring:
    """The keyring of ``text`` from ``source`` (a setting or a file name, for messages):
    one entry per line with ``#`` comments and blank lines (``lines``), else entries
    separated by commas. Raises ``BankKeyError`` ``"<source>: entry 2: ..."`` (``line 2``
    for files)."""
    where = "line" if lines else "entry"
    pieces = text.splitlines() if lines else text.split(",")
    entries: list[tuple[str, bytes]] = []
    seen: dict[str, int] = {}
    for number, piece in enumerate(pieces, start=1):
        entry = piece.split("#", 1)[0].strip() if lines else piece.strip()
        if not entry:
            if lines:
                continue
            raise BankKeyError(f"{source}: {where} {number}: empty (entries are KEY_ID:BASE64)")
        try:
            key_id, key = _parse_entry(entry)
        except BankKeyError as error:
            raise BankKeyError(f"{source}: {where} {number}: {error}") from None
        if key_id in seen:
            raise BankKeyError(
                f"{source}: {where} {number}: key id {key_id!r} is already given at {where} "
                f"{seen[key_id]}"
            )
        seen[key_id] = number
        entries.append((key_id, key))
    if not entries:
        raise BankKeyError(f"{source}: no key (entries are KEY_ID:BASE64, the last is active)")
    return Keyring(entries)


def _parse_entry(entry: str) -> tuple[str, bytes]:
    key_id, sep, encoded = entry.partition(":")
    key_id = key_id.strip()
    if not sep:
        raise BankKeyError("expected KEY_ID:BASE64")  # the entry itself may be a key: not shown
    if not KEY_ID_PATTERN.fullmatch(key_id):  # not shown: it may be a key written first
        raise BankKeyError(f"the key id ({len(key_id)} characters) does not match {KEY_ID_RULE}")
    try:
        key = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise BankKeyError(f"key {key_id!r} is not standard base64") from None
    if len(key) != KEY_BYTES:
        raise BankKeyError(f"key {key_id!r} is {len(key)} bytes, expected {KEY_BYTES}")
    return key_id, key


def new_entry(key_id: str) -> str:
    """A fresh ``KEY_ID:BASE64`` entry with 32 random bytes."""
    if not KEY_ID_PATTERN.fullmatch(key_id):
        raise BankKeyError(f"key id {key_id!r} does not match {KEY_ID_RULE}")
    return f"{key_id}:{base64.b64encode(os.urandom(KEY_BYTES)).decode('ascii')}"


# --- the process-wide keyring -----------------------------------------------------------

KeyringSource = Keyring | Callable[[], Keyring]
"""A keyring, or a loader called (once) when a value is first sealed or opened."""


@dataclass(frozen=True, slots=True)
class Installed:
    """What :func:`install` replaced, for :func:`restore`."""

    previous: KeyringSource | None


_lock = threading.Lock()
_source: KeyringSource | None = None


def install(source: KeyringSource | None) -> Installed:
    """Make ``source`` the process's keyring (None: none); returns what it replaced."""
    global _source
    with _lock:
        previous, _source = _source, source
    return Installed(previous)


def restore(installed: Installed) -> None:
    """Put back the keyring :func:`install` replaced."""
    install(installed.previous)


@contextmanager
def using(source: KeyringSource | None) -> Iterator[None]:
    """``source`` as the process's keyring inside the block."""
    token = install(source)
    try:
        yield
    finally:
        restore(token)


def is_installed() -> bool:
    """Whether the process has a keyring (or a loader for one)."""
    return _source is not None


def current() -> Keyring:
    """The process's keyring (a loader is called now, once); ``BankKeyError`` if none."""
    global _source
    source = _source
    if isinstance(source, Keyring):
        return source
    with _lock:
        if _source is None:
            raise BankKeyError(
                "no bank keyring is installed: reference answers cannot be sealed or opened"
            )
        if not isinstance(_source, Keyring):
            _source = _source()
        return _source


# --- the column type --------------------------------------------------------------------


class SealedText(TypeDecorator[str]):
    """Text sealed under the process's keyring when written and opened when read; values
    without the ``pk1:`` prefix are read as they are (rows from before sealing).

    ``column`` (``table.column``) goes into the associated data. Comparisons and SQL
    functions see only ciphertext: such columns are read and written, never searched."""

    impl = Text
    cache_ok = True

    def __init__(self, column: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.column = column

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return current().seal(value, column=self.column)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or not is_sealed(value):
            return value
        return current().open(value, column=self.column)

    def seal(self, value: str | None) -> str | None:
        """``value`` as stored, for writers that bypass SQLAlchemy (``COPY``)."""
        return self.process_bind_param(value, _NO_DIALECT)


_NO_DIALECT: Any = None
