"""Recorded verdicts for bank-health tests: registered models of two families and sizes,
one scored session each, written straight to the database (the verdict rows the scoring
pipeline would have written)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from bank.models import Item, Sample
from judge.prompts import PROMPT_VERSION
from server.database import create_engine, unit_of_work
from server.registry.models import RegisteredModel
from server.scoring.assignment import JudgeAssignment
from server.scoring.models import Verdict
from server.sessions.models import Answer, EvalSession
from tests.support.api import World


async def originals(db_url: str) -> list[Item]:
    """The bank's original items in slot order."""
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(Item).where(Item.variant == "original").order_by(Item.slot)
            )
            return list(rows.scalars())
    finally:
        await engine.dispose()


N_MODELS = 10
HEALTH_JUDGES = JudgeAssignment(default="judge-a", panel=("judge-a", "judge-b"))
"""The board's judges for ``record_verdicts``' verdicts (both of the disputed item's)."""
HEALTH_JUDGE_SETTINGS: dict[str, Any] = {
    "judges": [
        {"name": name, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}
        for name in HEALTH_JUDGES.panel
    ],
    "judge_panel": list(HEALTH_JUDGES.panel),
}
"""Settings whose board is ``HEALTH_JUDGES`` (the judges are never called)."""
HEALTH_JUDGE_ENV = {f"PROCTOR_{k.upper()}": json.dumps(v) for k, v in HEALTH_JUDGE_SETTINGS.items()}
"""The same as environment variables, for the ``proctor`` command."""
FAMILIES = ("alpha", "beta")
SIZES = (1.0, 3.0, 7.0, 14.0, 70.0)


async def _originals(db_url: str) -> list[Item]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(Item).where(Item.variant == "original").order_by(Item.slot)
            )
            return list(rows.scalars())
    finally:
        await engine.dispose()


def rubric_score(model: int, item: int) -> int:
    """Rubric score of model ``model`` (ability grows with the index) on item ``item``:
    item 0 everyone gets right, item 1 no one; the rest by a difficulty ladder."""
    if item == 0:
        return 3
    if item == 1:
        return 0
    return 3 if (model + 1) / N_MODELS > (item % 9) / 9 else 0


async def record_verdicts(
    db_url: str, world: World, items: list[Item], *, disputed: Item | None = None
) -> list[str]:
    """Ten registered models (two families of five sizes) with one scored session each
    over ``items``; ``disputed`` is judged by two judges who disagree on every model."""
    engine = create_engine(db_url)
    names = []
    now = datetime.now(UTC)
    try:
        async with unit_of_work(engine) as db:
            for m in range(N_MODELS):
                family, size = FAMILIES[m % 2], SIZES[m // 2]
                model = RegisteredModel(
                    org_id=world.a.id,
                    name=f"{family}-{size:g}b",
                    api_snapshot="v1",
                    family=family,
                    params_b=size,
                )
                db.add(model)
                await db.flush()
                names.append(f"{model.name}@v1")
                sample = Sample(
                    org_id=world.a.id, seed="0", n_requested=len(items), n_drawn=len(items)
                )
                db.add(sample)
                await db.flush()
                session = EvalSession(
                    org_id=world.a.id,
                    model_id=model.id,
                    sample_id=sample.id,
                    mode="fixed",
                    state="scored",
                    n_items=len(items),
                    n_delivered=len(items),
                    n_completed=len(items),
                    deadline_at=now + timedelta(hours=1),
                    created_by="test",
                    created_at=now - timedelta(days=N_MODELS - m),
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
                            delivered_at=now,
                        )
                    )
                await db.flush()  # answers before the verdicts that reference them
                for position, item in enumerate(items):
                    score = rubric_score(m, position)
                    db.add(_verdict(session.id, position, "judge-a", score))
                    if item is disputed:
                        db.add(_verdict(session.id, position, "judge-b", 3 - score))
            await db.flush()
    finally:
        await engine.dispose()
    return names


def _verdict(session_id: uuid.UUID, position: int, judge: str, score: int) -> Verdict:
    return Verdict(
        session_id=session_id,
        position=position,
        judge=judge,
        prompt_version=PROMPT_VERSION,
        score=score,
        method="judge",
    )
