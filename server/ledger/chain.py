"""Hash chains: the pure part of the tamper-evident logs (no I/O).

A *log* (``Log``: the audit log, the results ledger) is split into *chains*, each written
by one writer in insertion order, so writers never wait for each other (the audit log's
group commit keeps working). Row *k* of a chain stores

    prev_hash_k = row_hash_{k-1}        (``genesis(log, chain)`` for the first row)
    row_hash_k  = SHA-256(prev_hash_k || "\\n" || canonical(fields_k))

so editing a row changes its hash, deleting or inserting one breaks the next row's link,
and only the chain's last rows can go unnoticed, until a signed checkpoint
(``server.ledger.checkpoints``) has fixed the head. This is the construction of
Haber and Stornetta, "How to time-stamp a digital document" (J. Cryptology, 1991), and of
Crosby and Wallach, "Efficient data structures for tamper-evident logging" (USENIX
Security 2009) in its simplest, linear form.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

HASH_HEX = 64


class Log(StrEnum):
    """The chained logs."""

    AUDIT = "audit"
    RESULTS = "results"


def genesis(log: Log, chain: str) -> str:
    """The ``prev_hash`` of a chain's first row: bound to the log and the chain's name, so
    a row cannot be moved to another chain."""
    return hashlib.sha256(f"proctor-chain-v1\x1f{log.value}\x1f{chain}".encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A JSON-able form of a field value that reads back identically from every backend."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"cannot chain a {type(value).__name__}")


def canonical(fields: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a row's fields: sorted keys, no spaces, ASCII (so lone
    surrogates and other hostile text are escaped, never an encoding error); times as UTC
    with microseconds, UUIDs as their string form, floats by ``repr``."""
    plain = {key: _plain(value) for key, value in fields.items()}
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def link(prev_hash: str, fields: Mapping[str, Any]) -> str:
    """The ``row_hash`` of a row with ``fields`` following ``prev_hash`` (hex SHA-256)."""
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical(fields))
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ChainedRow:
    """One stored row as a verifier reads it."""

    id: int
    prev_hash: str
    row_hash: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first row of a chain that does not verify, and why."""

    chain: str
    row_id: int
    reason: str
    """``edited`` (the row's hash does not match its fields), ``broken link`` (its
    ``prev_hash`` is not the previous row's hash: a row before it was deleted, or it was
    inserted), or what else went wrong."""


@dataclass(frozen=True, slots=True)
class ChainHead:
    """Where a walked chain ends."""

    chain: str
    n_rows: int
    last_row_id: int | None
    head_hash: str


def walk(
    log: Log,
    chain: str,
    rows: Iterable[ChainedRow],
    *,
    start: ChainHead | None = None,
) -> tuple[ChainHead, ChainBreak | None]:
    """Verify ``rows`` (one chain, in id order) link by link, from the chain's genesis or
    from ``start`` (a checkpoint's head: the rows must then be those after it). Returns the
    head reached and the first break (None if every row verifies); the walk stops at the
    first break."""
    head = start or ChainHead(chain, 0, None, genesis(log, chain))
    for row in rows:
        if row.prev_hash != head.head_hash:
            return head, ChainBreak(chain, row.id, "broken link")
        if link(row.prev_hash, row.fields) != row.row_hash:
            return head, ChainBreak(chain, row.id, "edited")
        head = ChainHead(chain, head.n_rows + 1, row.id, row.row_hash)
    return head, None
