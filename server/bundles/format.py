"""The session bundle format, shared by the writer (``service``) and the checker (``check``).

A bundle is JSON Lines: one JSON object per line, each in canonical form (sorted keys, no
spaces, ASCII with ``\\uXXXX`` escapes) and ended by ``\\n``. The lines are, in order:

* one ``header`` (format, session, organisation, model, mode, state, times, signing key);
* one ``item`` per delivered position, by position (question, options, type, discipline:
  never the reference answer or explanation);
* one ``answer`` per answered position, by position;
* one ``verdict`` per verdict (judges' and human reviewers' ``human:<reviewer>``), by
  position (never the judge's reply or stated reason: both quote the reference);
* one ``commitment`` (the sample commitment; its opening once the session is scored);
* one ``signature``: the SHA-256 of every preceding line's bytes (newline included) and
  the Ed25519 signature of ``SIGNED_PREFIX + sha256_hex`` by the server's audit key.

Every line but the header also has ``prev``: the SHA-256 (hex) of the line before it
(newline included; the header's is null). The signature alone proves the bundle intact;
``prev`` lets a checker name the place where lines were changed, removed, inserted or
moved.

The signed bytes start with ``SIGNED_PREFIX``, never ``{``, so a bundle signature can never
be mistaken for a checkpoint's (whose payloads are JSON objects) made with the same key.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

FORMAT = "proctor-session-bundle/1"
SIGNED_PREFIX = b"proctor-session-bundle/1 sha256:"
MEDIA_TYPE = "application/x-ndjson"
MAX_LINE_BYTES = 16 * 1024 * 1024
"""No line of a bundle the server writes is longer (the longest is the commitment's
opening: 100,000 item ids are 4 MB); the checker refuses longer ones unread."""

HEADER = "header"
ITEM = "item"
ANSWER = "answer"
VERDICT = "verdict"
COMMITMENT = "commitment"
SIGNATURE = "signature"


def timestamp(value: datetime | None) -> str | None:
    """A stored time as UTC ISO 8601 with microseconds (naive values are UTC: SQLite)."""
    if value is None:
        return None
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def line(fields: dict[str, Any]) -> bytes:
    """The canonical bytes of one line, newline included."""
    plain = {
        key: str(value) if isinstance(value, uuid.UUID) else value for key, value in fields.items()
    }
    return canonical(plain) + b"\n"


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, ASCII."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def signed_payload(sha256_hex: str) -> bytes:
    """The bytes the bundle's signature signs."""
    return SIGNED_PREFIX + sha256_hex.encode("ascii")
