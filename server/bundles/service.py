"""Writing a session's signed bundle (the format: ``server.bundles.format``).

``session_bundle`` yields the lines one at a time from streamed queries, hashing as it
goes: a session of 100,000 items is never held in memory, and the signature line comes
last. The queries select columns, never whole ``Item`` or ``Verdict`` rows, so the sealed
reference answers, explanations, judges' replies and stated reasons are not even read.

The seed, salt, source and committed item order are revealed only for a scored or
reviewed session whose sample has a commitment (``SCORED_STATE_VALUES``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Exposure, Item, Sample, SampleItem
from bank.sampling.source import parse_source, source_json
from server.bundles import format as fmt
from server.errors import NotFound
from server.ledger.signing import SigningKey
from server.registry.models import RegisteredModel
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from server.sessions.states import SCORED_STATE_VALUES

YIELD_PER = 1000


@dataclass(frozen=True, slots=True)
class BundleSource:
    """The rows a bundle starts from."""

    session: EvalSession
    model: RegisteredModel
    sample: Sample


async def bundle_source(db: AsyncSession, session_id: uuid.UUID) -> BundleSource:
    """The session, its model and its sample; ``NotFound`` if there is no such session."""
    session = await db.get(EvalSession, session_id)
    if session is None:
        raise NotFound(f"no session {session_id}")
    model = await db.get(RegisteredModel, session.model_id)
    sample = await db.get(Sample, session.sample_id)
    if model is None or sample is None:  # foreign keys make this impossible
        raise NotFound(f"session {session_id} has no model or sample")
    return BundleSource(session, model, sample)


async def session_bundle(
    db: AsyncSession, session_id: uuid.UUID, *, key: SigningKey, now: datetime
) -> AsyncIterator[bytes]:
    """The bundle of ``session_id``, line by line (each ending in ``\\n``), signed with
    ``key``; ``NotFound`` (before any line) if there is no such session."""
    source = await bundle_source(db, session_id)
    digest = hashlib.sha256()
    prev: str | None = None
    for part in (
        _header(source, key, now),
        _items(db, source),
        _answers(db, source),
        _verdicts(db, source),
        _commitment(db, source),
    ):
        async for fields in _iterate(part):
            data = fmt.line({**fields, "prev": prev})
            digest.update(data)
            prev = hashlib.sha256(data).hexdigest()
            yield data
    sha = digest.hexdigest()
    yield fmt.line(
        {
            "type": fmt.SIGNATURE,
            "prev": prev,
            "sha256": sha,
            "signature": key.sign(fmt.signed_payload(sha)),
            "key_id": key.public.key_id,
        }
    )


async def _iterate(part: Any) -> AsyncIterator[dict[str, Any]]:
    if isinstance(part, dict):
        yield part
    else:
        async for fields in part:
            yield fields


def _header(source: BundleSource, key: SigningKey, now: datetime) -> dict[str, Any]:
    session = source.session
    return {
        "type": fmt.HEADER,
        "format": fmt.FORMAT,
        "session_id": session.id,
        "org_id": session.org_id,
        "model_id": source.model.id,
        "model_name": source.model.name,
        "model_snapshot": source.model.api_snapshot,
        "mode": session.mode,
        "state": session.state,
        "n_items": session.n_items,
        "n_delivered": session.n_delivered,
        "created_at": fmt.timestamp(session.created_at),
        "ended_at": fmt.timestamp(session.ended_at),
        "exported_at": fmt.timestamp(now),
        "key_id": key.public.key_id,
        "public_key": key.public.raw_b64,
    }


async def _items(db: AsyncSession, source: BundleSource) -> AsyncIterator[dict[str, Any]]:
    session = source.session
    query = (
        select(
            SampleItem.position,
            SampleItem.item_id,
            SampleItem.family_id,
            Item.question,
            Item.options,
            Item.qtype,
            Item.discipline,
            Answer.delivered_at,
            Exposure.delivered_at,
        )
        .join(Item, Item.id == SampleItem.item_id)
        .outerjoin(
            Answer,
            and_(Answer.session_id == session.id, Answer.position == SampleItem.position),
        )
        .outerjoin(
            Exposure,
            and_(Exposure.session_id == session.id, Exposure.item_id == SampleItem.item_id),
        )
        .where(SampleItem.sample_id == session.sample_id)
        .where(SampleItem.position < session.n_delivered)
        .order_by(SampleItem.position)
        .execution_options(yield_per=YIELD_PER)
    )
    rows = await db.stream(query)
    async for position, item_id, family_id, question, options, qtype, discipline, *times in rows:
        answered, exposed = times
        yield {
            "type": fmt.ITEM,
            "position": position,
            "item_id": item_id,
            "family_id": family_id,
            "question": question,
            "options": list(options) if options is not None else None,
            "qtype": qtype,
            "discipline": discipline,
            "delivered_at": fmt.timestamp(answered or exposed),
        }


async def _answers(db: AsyncSession, source: BundleSource) -> AsyncIterator[dict[str, Any]]:
    query = (
        select(
            Answer.position,
            Answer.item_id,
            Answer.answer,
            Answer.reasoning,
            Answer.submitted_at,
            Answer.delivered_at,
            Answer.prompt_tokens,
            Answer.completion_tokens,
        )
        .where(Answer.session_id == source.session.id)
        .order_by(Answer.position)
    )
    written = {"submitted_at": fmt.timestamp, "delivered_at": fmt.timestamp}
    async for fields in _rows(db, fmt.ANSWER, query, written):
        yield fields


async def _verdicts(db: AsyncSession, source: BundleSource) -> AsyncIterator[dict[str, Any]]:
    query = (
        select(
            Verdict.position,
            Verdict.judge,
            Verdict.prompt_version,
            Verdict.score,
            Verdict.method,
            Verdict.needs_review,
            Verdict.created_at,
        )
        .where(Verdict.session_id == source.session.id)
        .order_by(Verdict.position, Verdict.created_at, Verdict.id)
    )
    written: dict[str, Callable[[Any], Any]] = {
        "needs_review": bool,
        "created_at": fmt.timestamp,
    }
    async for fields in _rows(db, fmt.VERDICT, query, written):
        yield fields


async def _rows(
    db: AsyncSession, kind: str, query: Select[Any], written: Mapping[str, Callable[[Any], Any]]
) -> AsyncIterator[dict[str, Any]]:
    """One line of type ``kind`` per row of ``query``, whose columns are named as the
    line's fields, streamed ``YIELD_PER`` rows at a time; ``written`` maps a field to what
    writes its value (the others go as they are)."""
    rows = await db.stream(query.execution_options(yield_per=YIELD_PER))
    async for row in rows:
        fields = {
            name: written[name](value) if name in written else value
            for name, value in row._mapping.items()
        }
        yield {"type": kind, **fields}


def revealable(source: BundleSource) -> bool:
    """Whether the bundle opens the commitment: the session is scored or reviewed and its
    sample has a commitment with its salt and source."""
    sample = source.sample
    return (
        source.session.state in SCORED_STATE_VALUES
        and sample.commitment is not None
        and sample.salt is not None
        and sample.source is not None
    )


async def _commitment(db: AsyncSession, source: BundleSource) -> AsyncIterator[dict[str, Any]]:
    sample = source.sample
    fields: dict[str, Any] = {
        "type": fmt.COMMITMENT,
        "commitment": sample.commitment,
        "revealed": False,
    }
    if revealable(source):
        ids = await db.execute(
            select(SampleItem.item_id)
            .where(SampleItem.sample_id == sample.id)
            .where(SampleItem.drawn_position.is_not(None))
            .order_by(SampleItem.drawn_position)
        )
        fields.update(
            revealed=True,
            seed=sample.seed,
            salt=sample.salt,
            source=source_json(parse_source(sample.source)),
            item_ids=[str(item_id) for item_id in ids.scalars()],
        )
    yield fields
