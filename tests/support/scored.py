"""Scored sessions written straight to the database: the rows the scoring pipeline would
leave (sessions, answers, verdicts of ``JUDGE``), for leaderboard and console tests that need
a ranked board without waiting for real scoring. The server must have ``JUDGE`` configured
(``judges=[{"name": JUDGE, ...}]``) for its verdicts to count."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from bank.models import Item, Sample
from judge.prompts import PROMPT_VERSION
from server.database import create_engine, unit_of_work
from server.registry.models import RegisteredModel
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from tests.support.api import World

JUDGE = "judge-a"
HOSTILE = "<script>alert(1)</script>\"'"
FORMULA = '=HYPERLINK("http://evil.test","x")'


async def add_model(db_url: str, org_id: uuid.UUID, name: str, **extra: Any) -> uuid.UUID:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            model = RegisteredModel(org_id=org_id, name=name, api_snapshot="v1", **extra)
            db.add(model)
            await db.flush()
            return model.id
    finally:
        await engine.dispose()


async def scored_session(
    db_url: str,
    *,
    org_id: uuid.UUID,
    model_id: uuid.UUID,
    scores: Sequence[int],
    created_at: datetime,
    tokens: tuple[int, int] | None = None,
    offset: int = 0,
    mode: str = "fixed",
    judge: str = JUDGE,
) -> uuid.UUID:
    """A ``scored`` session (``mode``) of ``model_id`` whose answers ``judge`` scored
    ``scores`` (0-3), over the bank's originals (disciplines taking turns) from ``offset``;
    each answer took 2 s."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            originals = (
                await db.execute(select(Item).where(Item.variant == "original").order_by(Item.slot))
            ).scalars()
            by_discipline: dict[str, list[Item]] = {}
            for item in originals:
                by_discipline.setdefault(item.discipline, []).append(item)
            mixed = [item for row in zip(*by_discipline.values(), strict=False) for item in row]
            items = mixed[offset : offset + len(scores)]
            assert len(items) == len(scores)
            sample = Sample(org_id=org_id, seed="0", n_requested=len(items), n_drawn=len(items))
            db.add(sample)
            await db.flush()
            session = EvalSession(
                org_id=org_id,
                model_id=model_id,
                sample_id=sample.id,
                mode=mode,
                state="scored",
                n_items=len(items),
                n_delivered=len(items),
                n_completed=len(items),
                deadline_at=created_at + timedelta(hours=1),
                created_by="test",
                created_at=created_at,
                ended_at=created_at + timedelta(minutes=5),
            )
            db.add(session)
            await db.flush()
            for position, item in enumerate(items):
                db.add(
                    Answer(
                        session_id=session.id,
                        position=position,
                        item_id=item.id,
                        answer="x",
                        submitted_by="test",
                        delivered_at=created_at,
                        submitted_at=created_at + timedelta(seconds=2),
                        prompt_tokens=tokens[0] if tokens else None,
                        completion_tokens=tokens[1] if tokens else None,
                    )
                )
            await db.flush()  # answers before the verdicts that reference them
            for position, score in enumerate(scores):
                db.add(
                    Verdict(
                        session_id=session.id,
                        position=position,
                        judge=judge,
                        prompt_version=PROMPT_VERSION,
                        score=score,
                        method="judge",
                    )
                )
            return session.id
    finally:
        await engine.dispose()


def pattern(n: int, right_every: int) -> list[int]:
    """``n`` scores: 0 at every ``right_every``-th position, 3 elsewhere."""
    return [3 if position % right_every != 0 else 0 for position in range(n)]


async def seed_scores(db_url: str, world: World) -> tuple[uuid.UUID, ...]:
    """Scored sessions: org-a's model strong (two sessions, usage reported, priced),
    org-b's model weak (two sessions and a replay session), and two hostile-named org-b
    models (one each)."""
    assert world.a.model_id is not None and world.b.model_id is not None
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            strong = await db.get(RegisteredModel, world.a.model_id)
            assert strong is not None
            strong.usd_per_mtok_in, strong.usd_per_mtok_out = 2.0, 8.0
    finally:
        await engine.dispose()
    hostile = await add_model(db_url, world.b.id, HOSTILE)
    formula = await add_model(db_url, world.b.id, FORMULA)
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    plans = [
        (world.a.id, world.a.model_id, 6, (100, 50)),
        (world.b.id, world.b.model_id, 2, None),
        (world.b.id, hostile, 3, None),
        (world.b.id, formula, 4, None),
    ]
    for index, (org_id, model_id, right_every, tokens) in enumerate(plans):
        runs = 2 if index < 2 else 1
        for run in range(runs):
            await scored_session(
                db_url,
                org_id=org_id,
                model_id=model_id,
                scores=pattern(12, right_every)[run:] + pattern(12, right_every)[:run],
                created_at=start + timedelta(days=run, hours=index),
                tokens=tokens,
                offset=12 * run,
            )
    await scored_session(  # weak's replay check: 3 of 12 completions near-exact
        db_url,
        org_id=world.b.id,
        model_id=world.b.model_id,
        scores=[3, 3, 3] + [0] * 9,
        created_at=start + timedelta(days=3),
        offset=36,
        mode="replay",
    )
    return world.a.model_id, world.b.model_id, hostile, formula
