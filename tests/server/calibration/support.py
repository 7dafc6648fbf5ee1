"""Helpers of the calibration tests: a synthetic human-scored set, judge settings on the
local fake judge server, and changing a fake judge's noise while the server runs."""

from __future__ import annotations

import csv
import json
import random
import uuid
from pathlib import Path
from typing import Any

import httpx

from server.calibration.models import CalibrationSource
from server.calibration.service import CalibrationRow, create_set
from server.config import Settings
from server.review.raters import HUMAN_METHOD, HUMAN_PROMPT_VERSION, human_rater
from server.scoring.models import Verdict
from tests.support.api import World, evaluator_session, login, running_api, test_settings
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm
from tests.support.sessions import answer_for, answer_items

N_ANSWERS = 100
N_FAMILIES = 25


def calibration_rows(
    n: int = N_ANSWERS, families: int = N_FAMILIES, seed: int = 7
) -> list[dict[str, str]]:
    """``n`` answers in ``families`` item families, half right and half wrong. People give
    a right answer 3 (2 for one in ten: a weak explanation) and a wrong one 0 (1 for one in
    ten); the noise-free fake judge gives 3 and 0, so it agrees with people on about 90%."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        family = i % families
        reference = f"cobalt {family * 10 + i // families}"
        right = rng.random() < 0.5
        answer = f"It is {reference}, as the table shows." if right else "It is lead 999."
        partial = rng.random() < 0.1
        score = (2 if partial else 3) if right else (1 if partial else 0)
        rows.append(
            {
                "question": f"Item family {family}, variant {i}: which element is meant?",
                "reference": reference,
                "answer": answer,
                "human_score": str(score),
                "language": "en",
                "discipline": ["chemistry", "physics"][family % 2],
                "model_family": ["OpenAI", "Other"][i % 2],
                "cluster": f"family-{family}",
            }
        )
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def judge_entries(llm: FakeLlm, judges: dict[str, str]) -> list[dict[str, str]]:
    """``PROCTOR_JUDGES`` entries: judge name -> fake profile (the model sent)."""
    return [
        {"name": name, "base_url": llm.base_url, "model": model} for name, model in judges.items()
    ]


def calibration_settings(
    db_url: str, llm: FakeLlm, judges: dict[str, str], **extra: Any
) -> Settings:
    """Test settings with ``judges`` on the fake server and a gate that accepts sets of
    ``N_ANSWERS`` answers."""
    values: dict[str, Any] = {
        "judges": judge_entries(llm, judges),
        "judge_min_calibration_n": 50,
        "judge_drift_interval_s": 0,
        **extra,
    }
    return test_settings(db_url, **values)


def calibration_env(db_url: str, llm: FakeLlm, judges: dict[str, str]) -> dict[str, str]:
    """The environment of a ``proctor`` subprocess with the same settings."""
    return {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_JUDGES": json.dumps(judge_entries(llm, judges)),
        "PROCTOR_JUDGE_MIN_CALIBRATION_N": "50",
    }


def set_profile(llm: FakeLlm, profile: str, **fields: Any) -> None:
    """Change fields of a served fake profile (e.g. a judge's noise) while it runs."""
    response = httpx.patch(f"{llm.root}/admin/profiles/{profile}", json=fields, timeout=10)
    response.raise_for_status()


async def seed_reviewed_answer(db_url: str, world: World) -> None:
    """One answered item of organisation A with a human verdict (so a set can be frozen
    from the review queue) and a calibration set of ``calibration_rows(10)`` (so one set's
    runs can be read): for route tests that need both to exist."""
    async with running_api(test_settings(db_url, judge_drift_interval_s=0)) as (_, client):
        _, session_id = await evaluator_session(client, world.a, n_items=1)
        vendor = await login(client, world.a.keys["vendor"])
        answered = await answer_items(
            client, db_url, session_id, vendor, lambda item, _: answer_for(item, True), limit=1
        )
    rows = [CalibrationRow(**_typed(row)) for row in calibration_rows(10)]
    async with database_session(db_url) as db:
        db.add(
            Verdict(
                session_id=uuid.UUID(session_id),
                position=answered[0].position,
                judge=human_rater("seed"),
                prompt_version=HUMAN_PROMPT_VERSION,
                score=3,
                method=HUMAN_METHOD,
            )
        )
        await create_set(
            db, name="seeded", rows=rows, source=CalibrationSource.CSV, created_by="seed"
        )


def _typed(row: dict[str, str]) -> dict[str, Any]:
    return {**row, "human_score": int(row["human_score"])}
