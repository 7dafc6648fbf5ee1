"""``proctor judge ...`` as a user runs it: real subprocesses, the real local judge server."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import select

from judge.prompts import PROMPT_VERSION
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.scoring.judges import default_judge
from server.scoring.models import JudgeCalibration
from tests.support.api import World, running_api, test_settings
from tests.support.cli import proctor_env
from tests.support.fake_llm import FakeLlm, running_fake_llm
from tests.support.sessions import drive_session, verdicts


def judges_env(db_url: str, llm: FakeLlm, *names: str) -> dict[str, str]:
    judges = [{"name": name, "base_url": llm.base_url, "model": "judge"} for name in names]
    return {"PROCTOR_DATABASE_URL": db_url, "PROCTOR_JUDGES": json.dumps(judges)}


async def test_judge_run_scores_a_session_and_a_rerun_changes_nothing(
    world_db: tuple[str, World], run_sync: Any
) -> None:
    db_url, world = world_db
    with running_fake_llm() as llm:
        # No judge configured in the API: open answers wait for review until the re-run.
        async with running_api(test_settings(db_url, scoring_in_process=True)) as (_, client):
            driven = await drive_session(client, db_url, world, n_items=12)
        env = judges_env(db_url, llm, "judge-v1")
        first = await run_sync(proctor_env, env, "judge", "run", "--session", str(driven.id))
        calls = llm.stats()["requests"]
        again = await run_sync(proctor_env, env, "judge", "run", "--session", str(driven.id))
        calls_again = llm.stats()["requests"]
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["judge"] == "judge-v1" and summary["prompt_version"] == PROMPT_VERSION
    assert summary["answers"] == summary["scored"] == 12
    assert summary["needs_review"] == summary["waiting"] == 0
    assert summary["points"] == sum(driven.expected.values())
    assert "12 jobs queued" in first.stderr
    assert "scoring" in first.stderr  # the progress bar
    assert json.loads(again.stdout) == summary
    assert "0 jobs queued" in again.stderr
    assert calls_again == calls, "a re-run must not pay for a judge call again"
    scores = {
        v.position: v.score for v in await verdicts(db_url, driven.id) if v.judge == "judge-v1"
    }
    assert scores == driven.expected


def test_judge_run_refuses_a_bad_session_id(tmp_path: Path) -> None:
    env = {"PROCTOR_DATA_DIR": str(tmp_path)}
    bad = proctor_env(env, "judge", "run", "--session", "not-a-uuid")
    missing = proctor_env(env, "judge", "run", "--session", str(uuid.uuid4()))
    assert bad.returncode == 2 and "--session: 'not-a-uuid' is not a session id" in bad.stderr
    assert missing.returncode == 1 and "no session" in missing.stderr


def write_ratings(path: Path, rows: list[tuple[str, str, int, str, str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["answer_id", "rater", "score", "model", "model_family"])
        writer.writerows(rows)
    return path


def synthetic_ratings(seed: int = 7) -> list[tuple[str, str, int, str, str]]:
    """Human labels and three judges of different quality on 6 models x 30 answers."""
    rng = np.random.default_rng(seed)
    rows = []
    flip = {"judge-good": 0.05, "judge-fair": 0.3, "judge-poor": 0.6}
    for m in range(6):
        family = ["OpenAI", "Google", "Other"][m % 3]
        for i in range(30):
            answer = f"a{m}-{i}"
            truth = int(rng.integers(0, 4))
            rows.append((answer, "human", truth, f"model-{m}", family))
            for judge, p in flip.items():
                score = int(rng.integers(0, 4)) if rng.random() < p else truth
                rows.append((answer, judge, score, f"model-{m}", family))
    return rows


async def test_agreement_json_equals_scikit_learn_and_store_picks_the_default_judge(
    fresh_db_url: str, tmp_path: Path, run_sync: Any
) -> None:
    rows = synthetic_ratings()
    path = write_ratings(tmp_path / "ratings.csv", rows)
    env = {
        "PROCTOR_DATABASE_URL": fresh_db_url,
        "PROCTOR_JUDGES": json.dumps(
            [
                {"name": name, "base_url": "http://127.0.0.1:9/v1", "model": "x"}
                for name in ("judge-poor", "judge-fair", "judge-good")
            ]
        ),
        "PROCTOR_JUDGE_MIN_CALIBRATION_N": "100",
    }
    result = await run_sync(
        proctor_env,
        env,
        "judge",
        "agreement",
        str(path),
        "--json",
        "--store",
        "--family",
        "judge-good=OpenAI",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    human = {a: s for a, r, s, _, _ in rows if r == "human"}
    for judge in ("judge-good", "judge-fair", "judge-poor"):
        theirs = {a: s for a, r, s, _, _ in rows if r == judge}
        ids = sorted(human)
        a, b = [human[i] for i in ids], [theirs[i] for i in ids]
        figures = report["raters"][judge]
        assert figures["n"] == 180
        assert abs(figures["kappa"] - cohen_kappa_score(a, b, labels=[0, 1, 2, 3])) < 1e-9
        weighted = cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic")
        assert abs(figures["weighted_kappa"] - weighted) < 1e-9
        assert figures["exact"] == sum(x == y for x, y in zip(a, b, strict=True)) / 180
        # the intervals the review route and `judge calibrate` give, offline too
        interval = report["intervals"]["raters"][judge]
        for kind, point in (("plain", figures["kappa"]), ("weighted", weighted)):
            assert interval[kind]["estimate"] == pytest.approx(point)
            assert interval[kind]["low"] < point < interval[kind]["high"]
            assert interval[kind]["n"] == 180
    models = {m for _, _, _, m, _ in rows}
    assert set(report["intervals"]["models"]) == models
    assert set(report["intervals"]["families"]) == {f for *_, f in rows}
    assert "judge-good vs judge-poor" in report["ranking_agreement"]
    assert report["family_bias"]["judge-good"]["family"] == "OpenAI"
    assert "stored the calibration of 3 raters" in result.stderr

    settings = Settings(
        _env_file=None, database_url=fresh_db_url, judges=json.loads(env["PROCTOR_JUDGES"])
    )
    engine = create_engine(fresh_db_url)
    async with unit_of_work(engine) as db:
        stored = {
            row.judge: row
            for row in (await db.execute(select(JudgeCalibration))).scalars()
            if row.set_id is None
        }
        chosen = await default_judge(db, settings)
    await engine.dispose()
    assert set(stored) == {"judge-good", "judge-fair", "judge-poor"}
    assert stored["judge-good"].n == 180
    assert stored["judge-good"].kappa == report["raters"]["judge-good"]["kappa"]
    # figures from a ratings file are kept for the record; the gate reads runs on a
    # calibration set only, and with no set the gate is open: the first configured judge
    assert chosen == "judge-poor"


def test_agreement_reports_every_bad_row_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("answer_id,rater,score\na1,human,2\na1,judge,4\na2,human,x\n")
    result = proctor_env({"PROCTOR_DATA_DIR": str(tmp_path)}, "judge", "agreement", str(path))
    assert result.returncode == 1
    assert f"{path}:3: score: '4' is not an integer 0-3" in result.stderr
    assert f"{path}:4: score: 'x' is not an integer 0-3" in result.stderr
    missing = proctor_env(
        {"PROCTOR_DATA_DIR": str(tmp_path)}, "judge", "agreement", str(tmp_path / "nope.csv")
    )
    assert missing.returncode == 1 and "nope.csv" in missing.stderr
