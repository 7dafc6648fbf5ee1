"""The demo's judge calibration: a frozen set of answers with expert scores, and the local
judge run on it through its real client, so the gate admits it and the leaderboard header
can say how well it agrees with people.

The demo has no human experts, so the set is synthetic and says so: answers are the stand-in
models' right and wrong answers to the bank's judged (not objective) items, and the
"expert" score is 3 for a right answer and 0 for a wrong one, moved one step toward the
middle for a seeded :data:`EXPERT_DOUBT` share of answers (an expert who finds the
reasoning only partly sound, fig. 11's 2 and 1). The judge grades from the reference only,
so it disagrees with those experts by one point there: its kappa has something to measure.
"""

from __future__ import annotations

import random

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bank.models import Item
from fakellm.answer_key import KeyItem
from fakellm.behaviour import right_answer, wrong_answer
from judge.cascade import OBJECTIVE_QTYPES
from server.calibration.models import CalibrationSource
from server.calibration.runner import CalibrationRun, calibrate
from server.calibration.service import CalibrationRow, create_set
from server.config import Settings
from server.database import unit_of_work

SET_NAME = "demo-experts"
SET_SIZE = 160
RIGHT_SHARE = 0.6
EXPERT_DOUBT = 0.15


async def calibrate_demo_judge(
    engine: AsyncEngine, settings: Settings, *, judge: str, seed: int
) -> CalibrationRun:
    """Freeze the demo's calibration set and run ``judge`` on it (see the module doc)."""
    async with unit_of_work(engine) as db:
        items = list(
            (
                await db.execute(
                    select(Item).where(Item.qtype.not_in(OBJECTIVE_QTYPES)).order_by(Item.id)
                )
            ).scalars()
        )
        await create_set(
            db,
            name=SET_NAME,
            rows=synthetic_rows(items, seed=seed),
            source=CalibrationSource.CSV,
            created_by="demo",
        )
    return await calibrate(engine, settings, judge=judge, set_name=SET_NAME, created_by="demo")


def synthetic_rows(items: list[Item], *, seed: int) -> list[CalibrationRow]:
    """One answer to each of up to :data:`SET_SIZE` items, with its synthetic expert score."""
    rng = random.Random(seed)
    chosen = rng.sample(items, min(SET_SIZE, len(items)))
    decoys = [item.answer for item in items]
    rows = []
    for item in chosen:
        key = KeyItem(item.question, item.answer, item.discipline, item.qtype)
        right = rng.random() < RIGHT_SHARE
        answer = right_answer(key) if right else wrong_answer(key, seed, "demo", decoys)
        score = 3 if right else 0
        if rng.random() < EXPERT_DOUBT:
            score = 2 if right else 1
        rows.append(
            CalibrationRow(
                question=item.question,
                reference=item.answer,
                answer=answer,
                human_score=score,
                language=item.language,
                discipline=item.discipline,
                model_family="demo",
                cluster=str(item.family_id),
            )
        )
    return rows
