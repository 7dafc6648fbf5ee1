"""Checking a session's sample commitment, with nothing of the server (pure, no I/O).

When a session is created the server commits to its sample: ``Session.commitment`` is the
SHA-256 of the canonical JSON (sorted keys, no spaces, ASCII only) of::

    {"v": "proctor-sample-commitment-v1", "seed": SEED, "salt": SALT,
     "source": SOURCE, "items": [ITEM_ID, ...]}

with the item ids as lowercase hyphenated UUIDs in the order the draw gave them. Once
the session is scored, ``get_commitment`` returns what opens it (``CommitmentReveal``)
and :func:`verify_commitment` recomputes the hash and checks the items you were given
against it: the server could not have changed the sample (or its order) after seeing your
answers. It is the hash commitment of Halevi and Micali, "Practical and provably-secure
commitment schemes from collision-free hashing" (CRYPTO 1996).

::

    session = client.create_session(model_id=MODEL_ID)
    promised = session.commitment          # keep it: it binds the server from now on
    delivered = []
    for item in client.items(session.id):
        delivered.append(item)
        client.submit_answer(session.id, item, my_model(item.question))
    client.wait_scored(session.id)
    check = verify_commitment(
        client.get_commitment(session.id), delivered, expected_commitment=promised
    )
    assert check.ok, check.problems
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clients.sdk.types import CommitmentReveal, Item, SampleSource, SessionMode

VERSION = "proctor-sample-commitment-v1"

Delivered = Item | tuple[int, str | uuid.UUID]
"""An item you were given: the SDK's ``Item``, or its ``(position, item_id)``."""


def commitment_of(
    *,
    seed: str,
    salt: str,
    source: SampleSource | Mapping[str, Any],
    item_ids: Sequence[str | uuid.UUID],
) -> str:
    """The SHA-256 commitment (hex) to a sample: the module docstring's paragraph."""
    body = {
        "v": VERSION,
        "seed": seed,
        "salt": salt,
        "source": source.to_json() if isinstance(source, SampleSource) else dict(source),
        "items": [str(uuid.UUID(str(i))) for i in item_ids],
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CommitmentCheck:
    """The outcome of :func:`verify_commitment`: ``ok`` when nothing is wrong, else every
    ``problem`` found (a reveal that is not open yet is not ok)."""

    ok: bool
    problems: tuple[str, ...]
    recomputed: str | None
    """The hash of the revealed seed, salt, source and items; None if nothing was
    revealed."""

    def __bool__(self) -> bool:
        return self.ok


def verify_commitment(
    reveal: CommitmentReveal,
    delivered_items: Iterable[Delivered] | None = None,
    *,
    expected_commitment: str,
    mode: SessionMode | str = SessionMode.FIXED,
) -> CommitmentCheck:
    """Check that ``reveal`` opens its commitment and that the items you got were in it.

    * the hash of the revealed seed, salt, source and item ids must equal
      ``reveal.commitment``, and that must equal ``expected_commitment`` (required: the
      ``Session.commitment`` you got when the session was created, kept by you; a reveal
      only agrees with itself without it, which proves nothing, since the server could
      have drawn the items after seeing your answers);
    * every delivered item (``delivered_items``: the ``Item``s you were given, or
      ``(position, item_id)`` pairs) must be in the committed list, and, unless ``mode`` is
      ``adaptive`` (whose server picks which undelivered item comes next), at its
      position in it: fixed, replay, anchor and item-set sessions deliver in drawn order.
    """
    problems: list[str] = []
    if reveal.commitment != expected_commitment:
        problems.append(
            f"the reveal's commitment {reveal.commitment} is not the one given at creation "
            f"({expected_commitment})"
        )
    if reveal.commitment is None:
        problems.append("the session's sample has no commitment (drawn before commitments)")
    if not reveal.revealed or None in (reveal.seed, reveal.salt, reveal.source, reveal.item_ids):
        problems.append("not revealed yet: the session is not scored")
        return CommitmentCheck(False, tuple(problems), None)
    assert reveal.seed is not None and reveal.salt is not None  # for the type checker
    assert reveal.source is not None and reveal.item_ids is not None
    try:
        recomputed = commitment_of(
            seed=reveal.seed, salt=reveal.salt, source=reveal.source, item_ids=reveal.item_ids
        )
        committed = {str(uuid.UUID(str(i))): p for p, i in enumerate(reveal.item_ids)}
    except (TypeError, ValueError) as error:
        problems.append(f"the reveal is malformed: {error}")
        return CommitmentCheck(False, tuple(problems), None)
    if recomputed != reveal.commitment:
        problems.append(f"the revealed sample hashes to {recomputed}, not {reveal.commitment}")
    ordered = mode != SessionMode.ADAPTIVE
    for position, item_id in _pairs(delivered_items or ()):
        at = committed.get(item_id)
        if at is None:
            problems.append(f"item {item_id} (position {position}) is not in the committed sample")
        elif ordered and at != position:
            problems.append(
                f"item {item_id} was delivered at position {position}, committed at {at}"
            )
    return CommitmentCheck(not problems, tuple(problems), recomputed)


def _pairs(delivered: Iterable[Delivered]) -> list[tuple[int, str]]:
    """``(position, normalised item id)`` of each delivered item."""
    pairs = []
    for entry in delivered:
        position, item_id = (entry.position, entry.item_id) if isinstance(entry, Item) else entry
        pairs.append((int(position), str(uuid.UUID(str(item_id)))))
    return pairs
