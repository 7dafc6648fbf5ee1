"""``proctor judge calibrate`` and the gate, on real PostgreSQL with the local fake judge
server over HTTP: figures with intervals, a noisy judge refused, and a judge accepted after
a better prompt version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import select

from judge.prompts import PROMPT_VERSION
from server.calibration import drift, gate, runner
from server.calibration.gate import GateStatus, eligible_judges, gate_report
from server.calibration.runner import calibrate
from server.calibration.service import find_set, set_answers
from server.database import create_engine, unit_of_work
from server.scoring.judges import default_judge
from server.scoring.models import JudgeCalibration
from tests.server.calibration.support import (
    calibration_env,
    calibration_rows,
    calibration_settings,
    set_profile,
    write_csv,
)
from tests.support.cli import proctor_env
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm, running_fake_llm

pytestmark = pytest.mark.parametrize("backend", ["postgres"])

JUDGES = {"judge-a": "judge", "judge-b": "judge-noisy"}
"""Judge name -> the fake profile it calls: ``judge`` is noise-free until a test raises its
noise; ``judge-noisy`` moves one rating in five by one step (it still passes the gate)."""


@pytest.fixture
def llm() -> Any:
    with running_fake_llm() as server:
        yield server


async def import_set(run_sync: Any, env: dict[str, str], path: Path, name: str) -> dict[str, Any]:
    result = await run_sync(
        proctor_env, env, "judge", "calibration-set", "import", str(path), "--name", name
    )
    assert result.returncode == 0, result.stderr
    imported: dict[str, Any] = json.loads(result.stdout)
    return imported


async def calibrate_cli(run_sync: Any, env: dict[str, str], judge: str, name: str) -> Any:
    result = await run_sync(
        proctor_env, env, "judge", "calibrate", "--judge", judge, "--set", name, "--json"
    )
    assert result.returncode == 0, result.stderr
    return result


async def test_calibrate_stores_kappa_with_intervals_and_calls_the_judge_every_time(
    fresh_db_url: str, tmp_path: Path, run_sync: Any, llm: FakeLlm
) -> None:
    env = calibration_env(fresh_db_url, llm, JUDGES)
    rows = calibration_rows()
    await import_set(run_sync, env, write_csv(tmp_path / "set.csv", rows), "demo")
    llm.reset()
    result = await calibrate_cli(run_sync, env, "judge-a", "demo")
    assert llm.stats()["by_model"] == {"judge": len(rows)}, "one judge call per answer"
    shown = json.loads(result.stdout)
    assert "gate: judge-a passed" in result.stderr

    async with database_session(fresh_db_url) as db:
        stored = (await db.execute(select(JudgeCalibration))).scalars().one()
    assert (stored.judge, stored.model, stored.prompt_version, stored.kind) == (
        "judge-a",
        "judge",
        PROMPT_VERSION,
        "full",
    )
    assert stored.n == len(rows) == shown["n"] and stored.scores is not None
    human = [int(r["human_score"]) for r in rows]
    scores = [s for s in stored.scores if s is not None]
    assert len(scores) == len(rows), "every answer scored"
    assert stored.kappa == pytest.approx(cohen_kappa_score(human, scores, labels=[0, 1, 2, 3]))
    weighted = cohen_kappa_score(human, scores, labels=[0, 1, 2, 3], weights="quadratic")
    assert stored.weighted_kappa == pytest.approx(weighted)
    assert stored.exact == pytest.approx(
        sum(h == s for h, s in zip(human, scores, strict=True)) / len(rows)
    )
    assert stored.within_one == 1.0
    for low, estimate, high in (
        (stored.kappa_low, stored.kappa, stored.kappa_high),
        (stored.weighted_low, stored.weighted_kappa, stored.weighted_high),
    ):
        assert low is not None and high is not None and estimate is not None
        assert low < estimate < high <= 1.0
    assert shown["weighted_kappa"] == {
        "estimate": stored.weighted_kappa,
        "low": stored.weighted_low,
        "high": stored.weighted_high,
    }
    by_discipline = shown["by_discipline"]
    assert sorted(by_discipline) == ["chemistry", "physics"]
    assert sum(group["n"] for group in by_discipline.values()) == len(rows)
    chemistry = [i for i, r in enumerate(rows) if r["discipline"] == "chemistry"]
    expected = cohen_kappa_score(
        [human[i] for i in chemistry],
        [scores[i] for i in chemistry],
        labels=[0, 1, 2, 3],
        weights="quadratic",
    )
    assert by_discipline["chemistry"]["weighted"]["estimate"] == pytest.approx(expected)
    assert sorted(shown["by_model_family"]) == ["OpenAI", "Other"]
    print(
        f"noise-free judge: kappa {stored.kappa:.3f} [{stored.kappa_low:.3f}, "
        f"{stored.kappa_high:.3f}], weighted {stored.weighted_kappa:.3f} "
        f"[{stored.weighted_low:.3f}, {stored.weighted_high:.3f}]"
    )

    llm.reset()
    engine = create_engine(fresh_db_url)
    try:
        settings = calibration_settings(fresh_db_url, llm, JUDGES)
        again = await calibrate(engine, settings, judge="judge-a", set_name="demo")
    finally:
        await engine.dispose()
    assert llm.stats()["by_model"] == {"judge": len(rows)}, "a re-run is not served from cache"
    assert again.scores == stored.scores
    assert again.previous is not None and again.previous["run"] == str(stored.id)
    assert again.previous["change"]["weighted"]["change"] == 0  # type: ignore[index]
    gate_run = await run_sync(proctor_env, env, "judge", "gate", "--json")
    assert gate_run.returncode == 0, gate_run.stderr
    report = json.loads(gate_run.stdout)
    assert report["default"] == "judge-a"
    assert [j["status"] for j in report["judges"]] == ["passed", "uncalibrated"]


async def test_the_gate_refuses_a_noisy_judge_and_accepts_it_after_a_better_prompt_version(
    fresh_db_url: str, tmp_path: Path, run_sync: Any, llm: FakeLlm, monkeypatch: Any
) -> None:
    env = calibration_env(fresh_db_url, llm, JUDGES)
    settings = calibration_settings(fresh_db_url, llm, JUDGES)
    await import_set(run_sync, env, write_csv(tmp_path / "set.csv", calibration_rows()), "demo")
    engine = create_engine(fresh_db_url)
    try:

        async def statuses() -> dict[str, GateStatus]:
            async with unit_of_work(engine) as db:
                report = await gate_report(db, settings)
            return {g.judge: g.status for g in report.judges}

        async def default() -> str:
            async with unit_of_work(engine) as db:
                return await default_judge(db, settings)

        # a calibration set exists and nobody has run on it: the gate is shut
        assert await statuses() == {"judge-a": "uncalibrated", "judge-b": "uncalibrated"}
        assert await default() == "none"

        # judge-b passes; judge-a, with half its ratings drawn at random, is refused
        await calibrate(engine, settings, judge="judge-b", set_name="demo")
        set_profile(llm, "judge", noise=0.5, noise_mode="uniform")
        noisy = await calibrate_cli(run_sync, env, "judge-a", "demo")
        assert "gate: judge-a refused" in noisy.stderr
        refused = json.loads(noisy.stdout)["weighted_kappa"]
        assert refused["low"] < settings.judge_gate_min_kappa
        assert await statuses() == {"judge-a": "refused", "judge-b": "passed"}
        assert await default() == "judge-b"

        # a good run under another prompt version does not count for the current one
        set_profile(llm, "judge", noise=0.0)
        monkeypatch.setattr(runner, "PROMPT_VERSION", "fig11-v0")
        old = await calibrate(engine, settings, judge="judge-a", set_name="demo")
        assert old.prompt_version == "fig11-v0"
        # the rounds are compared (paired by answer): the better-behaved round gains kappa
        assert old.previous is not None and old.previous["prompt_version"] == PROMPT_VERSION
        gain = old.previous["change"]["weighted"]  # type: ignore[index]
        assert gain["low"] > 0, gain
        assert old.figures.weighted_low is not None
        assert old.figures.weighted_low >= settings.judge_gate_min_kappa
        assert (await statuses())["judge-a"] == "refused"

        # a new prompt version ships: the gate re-opens for judge-a (its runs are of older
        # versions), and the better-behaved judge passes under the new version
        for module in (runner, gate, drift):
            monkeypatch.setattr(module, "PROMPT_VERSION", "fig11-v2")
        assert await statuses() == {"judge-a": "uncalibrated", "judge-b": "uncalibrated"}
        better = await calibrate(engine, settings, judge="judge-a", set_name="demo")
        assert better.prompt_version == "fig11-v2"
        assert better.figures.weighted_low is not None
        assert better.figures.weighted_low >= settings.judge_gate_min_kappa
        assert (await statuses())["judge-a"] == "passed"
        async with unit_of_work(engine) as db:
            assert await eligible_judges(db, settings) == ["judge-a"]
        assert await default() == "judge-a"

        # back on the old version, only the old version's runs count: refused again
        for module in (runner, gate, drift):
            monkeypatch.setattr(module, "PROMPT_VERSION", PROMPT_VERSION)
        assert await statuses() == {"judge-a": "refused", "judge-b": "passed"}
        print(
            f"noisy judge (uniform noise 0.5): weighted kappa {refused['estimate']:.3f} "
            f"[{refused['low']:.3f}, {refused['high']:.3f}]; after the better prompt "
            f"version: {better.figures.weighted_kappa:.3f} [{better.figures.weighted_low:.3f}, "
            f"{better.figures.weighted_high:.3f}]; change noisy -> good round: "
            f"{gain['change']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]"
        )
    finally:
        await engine.dispose()


async def test_a_new_model_snapshot_reopens_the_gate(
    fresh_db_url: str, tmp_path: Path, llm: FakeLlm
) -> None:
    from server.calibration.models import CalibrationSource
    from server.calibration.service import create_set, parse_calibration_csv

    path = write_csv(tmp_path / "set.csv", calibration_rows())
    async with database_session(fresh_db_url) as db:
        await create_set(
            db,
            name="demo",
            rows=parse_calibration_csv(str(path), path.read_text()),
            source=CalibrationSource.CSV,
            created_by="test",
        )
    settings = calibration_settings(fresh_db_url, llm, {"judge-a": "judge"})
    engine = create_engine(fresh_db_url)
    try:
        await calibrate(engine, settings, judge="judge-a", set_name="demo")
        async with unit_of_work(engine) as db:
            assert await eligible_judges(db, settings) == ["judge-a"]
            answers = await set_answers(db, (await find_set(db, "demo")).id)  # type: ignore[union-attr]
        assert len(answers) == 100
        moved = calibration_settings(fresh_db_url, llm, {"judge-a": "judge-noisy"})
        async with unit_of_work(engine) as db:
            report = await gate_report(db, moved)
        assert report.judges[0].status is GateStatus.UNCALIBRATED
        assert report.default is None
    finally:
        await engine.dispose()
