"""Commitments to samples (pure, no I/O).

When a session is created its creator gets ``commitment(seed, salt, source, item_ids)``
before any item is delivered; once the session is scored the seed, the salt, the source
and the ordered item ids are revealed, and anyone can recompute the hash. A commitment
binds the server to the whole sample and its order (it cannot pick items after seeing
answers), and hides it until the reveal: the seed is 128 random bits and the salt 128
more. It is the hash commitment of Halevi and Micali, "Practical and provably-secure
commitment schemes from collision-free hashing" (CRYPTO 1996), in its plain form.

The bytes hashed are the canonical JSON (sorted keys, no spaces, ASCII) of::

    {"v": "proctor-sample-commitment-v1", "seed": SEED, "salt": SALT,
     "source": SOURCE, "items": [ITEM_ID, ...]}

with item ids as lowercase hyphenated UUID strings in the drawn order and ``SOURCE`` the
source's JSON object (``bank.sampling.source.source_json``; a JSON object given as it is,
as a reveal sends it). The SDK (``clients.sdk``) re-implements this paragraph, so a vendor
needs nothing of the server.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from bank.sampling.source import SampleSource, source_json

VERSION = "proctor-sample-commitment-v1"
SALT_BYTES = 16


def new_salt() -> str:
    """A fresh salt from the operating system's CSPRNG (hex)."""
    return secrets.token_hex(SALT_BYTES)


def commitment_payload(
    *,
    seed: str,
    salt: str,
    source: SampleSource | Mapping[str, Any],
    item_ids: Sequence[uuid.UUID | str],
) -> bytes:
    """The canonical bytes a commitment hashes (see the module docstring)."""
    body = {
        "v": VERSION,
        "seed": seed,
        "salt": salt,
        "source": dict(source) if isinstance(source, Mapping) else source_json(source),
        "items": [str(i) if isinstance(i, uuid.UUID) else str(uuid.UUID(i)) for i in item_ids],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def commitment(
    *,
    seed: str,
    salt: str,
    source: SampleSource | Mapping[str, Any],
    item_ids: Sequence[uuid.UUID | str],
) -> str:
    """The SHA-256 commitment (hex) to a sample drawn with ``seed`` from ``source``."""
    payload = commitment_payload(seed=seed, salt=salt, source=source, item_ids=item_ids)
    return hashlib.sha256(payload).hexdigest()
