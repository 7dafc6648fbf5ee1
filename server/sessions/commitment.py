"""A session's sample commitment: shown to its creator at once, opened once it is scored.

``bank.sampling.commitment`` defines the commitment. The session's creator reads it on
``POST /v1/sessions`` (before any item is delivered) and on every read of the session;
``GET /v1/sessions/{id}/commitment`` reveals the seed, the salt, the source and the item
ids in drawn order once the session is ``scored`` or ``reviewed``, to whoever may read the
session (its organisation, auditors and admins). Before that it shows the commitment only:
the reveal names every item of the sample, so it never comes before the answers are
scored, and nothing in it depends on an answer or a verdict.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank import bulk
from bank.models import Sample, SampleItem
from bank.sampling.source import SampleSource, parse_source
from server.auth.permissions import Principal
from server.sessions.models import EvalSession
from server.sessions.service import get_session
from server.sessions.states import SCORED_STATE_VALUES


@dataclass(frozen=True, slots=True)
class Reveal:
    """What ``GET /v1/sessions/{id}/commitment`` says: the commitment (None for samples
    drawn before commitments existed) and, once ``revealed``, what opens it."""

    commitment: str | None
    revealed: bool
    seed: str | None = None
    salt: str | None = None
    source: SampleSource | None = None
    item_ids: list[uuid.UUID] | None = None
    """In drawn order (the committed one), whatever positions delivery gave them."""


async def of_session(db: AsyncSession, record: EvalSession) -> str | None:
    """The commitment of ``record``'s sample (no statement right after the session was
    created: the sample is in the unit of work's identity map)."""
    sample = await db.get(Sample, record.sample_id)
    return None if sample is None else sample.commitment


async def of_sessions(
    db: AsyncSession, records: Sequence[EvalSession]
) -> dict[uuid.UUID, str | None]:
    """The commitment of each session's sample, by session id (one statement per chunk)."""
    sample_ids = list({r.sample_id for r in records})
    by_sample: dict[uuid.UUID, str | None] = {}
    for chunk in bulk.in_chunks(db, sample_ids):
        rows = await db.execute(
            select(Sample.id, Sample.commitment).where(bulk.column_in(db, Sample.id, chunk))
        )
        by_sample.update(rows.tuples().all())
    return {r.id: by_sample.get(r.sample_id) for r in records}


async def reveal(db: AsyncSession, *, principal: Principal, session_id: uuid.UUID) -> Reveal:
    """Session ``session_id``'s commitment, opened if the session is scored or reviewed;
    ``NotFound`` if ``principal`` may not read the session. The recorded source is read
    with ``parse_source`` (a ``SourceError`` if the record was damaged)."""
    record = await get_session(db, principal=principal, session_id=session_id)
    sample = await db.get(Sample, record.sample_id)
    if sample is None or sample.commitment is None:
        return Reveal(commitment=None, revealed=False)
    if record.state not in SCORED_STATE_VALUES:
        return Reveal(commitment=sample.commitment, revealed=False)
    item_ids = await db.scalars(
        select(SampleItem.item_id)
        .where(SampleItem.sample_id == sample.id)
        .order_by(SampleItem.drawn_position)
    )
    return Reveal(
        commitment=sample.commitment,
        revealed=True,
        seed=sample.seed,
        salt=sample.salt,
        source=None if sample.source is None else parse_source(sample.source),
        item_ids=list(item_ids),
    )
