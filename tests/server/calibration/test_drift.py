"""The drift check, on real PostgreSQL with the local fake judge server over HTTP and the
app's own in-process drift job: a judge whose noise is raised while the server runs is
found drifting, the default falls to the next gated judge, and a later passing full run
clears it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from server.calibration.drift import drift_indexes
from server.calibration.models import CalibrationKind, CalibrationSource, JudgeDrift
from server.calibration.runner import calibrate
from server.calibration.service import create_set, parse_calibration_csv
from server.database import create_engine
from server.scoring.judges import default_judge
from server.scoring.models import JudgeCalibration
from tests.server.calibration.support import (
    calibration_rows,
    calibration_settings,
    set_profile,
    write_csv,
)
from tests.support.api import login, running_api, seed_world
from tests.support.database import database_session
from tests.support.fake_llm import FakeLlm, running_fake_llm
from tests.support.sessions import wait_until

JUDGES = {"judge-a": "judge", "judge-b": "judge-noisy"}


@pytest.fixture
def llm() -> Iterator[FakeLlm]:
    with running_fake_llm() as server:
        yield server


def drifting_gauge(judge: str) -> float | None:
    return REGISTRY.get_sample_value("proctor_judge_drifting", {"judge": judge})


async def drift_runs(db_url: str) -> list[JudgeCalibration]:
    async with database_session(db_url) as db:
        return list(
            (
                await db.execute(
                    select(JudgeCalibration)
                    .where(JudgeCalibration.kind == CalibrationKind.DRIFT.value)
                    .order_by(JudgeCalibration.created_at)
                )
            ).scalars()
        )


async def drifts(db_url: str) -> list[JudgeDrift]:
    async with database_session(db_url) as db:
        return list((await db.execute(select(JudgeDrift))).scalars())


@pytest.mark.parametrize("backend", ["postgres"])
async def test_a_drifting_judge_is_replaced_by_the_next_gated_one_until_it_passes_again(
    fresh_db_url: str, tmp_path: Path, llm: FakeLlm
) -> None:
    world = await seed_world(fresh_db_url, per_cell=1)
    path = write_csv(tmp_path / "set.csv", calibration_rows())
    async with database_session(fresh_db_url) as db:
        chosen = await create_set(
            db,
            name="demo",
            rows=parse_calibration_csv(str(path), path.read_text()),
            source=CalibrationSource.CSV,
            created_by="test",
        )
    settings = calibration_settings(
        fresh_db_url,
        llm,
        JUDGES,
        scoring_in_process=True,
        judge_drift_interval_s=0.4,
        judge_drift_items=40,
    )
    engine = create_engine(fresh_db_url)
    try:
        for judge in JUDGES:
            await calibrate(engine, settings, judge=judge, set_name="demo")
        async with database_session(fresh_db_url) as db:
            assert await default_judge(db, settings) == "judge-a"

        async with running_api(settings) as (_, client):
            auditor = await login(client, world.a.keys["auditor"])
            runs = await wait_until(
                lambda: drift_runs(fresh_db_url), within_s=20, what="a drift run"
            )
            assert runs[0].judge == "judge-a" and runs[0].n == 40
            subset = drift_indexes(100, 40, chosen.sha256)
            assert runs[0].scores is not None
            assert [i for i, s in enumerate(runs[0].scores) if s is not None] == sorted(subset)
            assert await drifts(fresh_db_url) == [], "an unchanged judge does not drift"
            assert drifting_gauge("judge-a") == 0

            set_profile(llm, "judge", noise=0.6, noise_mode="uniform")
            found = await wait_until(lambda: drifts(fresh_db_url), within_s=20, what="a drift")
            assert [d.judge for d in found] == ["judge-a"] and found[0].cleared_at is None
            print(f"drift found: {found[0].detail}")
            assert "change -" in found[0].detail
            assert drifting_gauge("judge-a") == 1

            judges = (await client.get("/v1/admin/judges", headers=auditor)).json()
            assert judges["default"] == "judge-b"
            by_name = {j["name"]: j for j in judges["judges"]}
            assert by_name["judge-a"]["status"] == "drifting" and by_name["judge-a"]["drifting"]
            assert not by_name["judge-a"]["eligible"] and not by_name["judge-a"]["default"]
            assert found[0].detail in by_name["judge-a"]["reason"]
            assert by_name["judge-b"]["default"] and by_name["judge-b"]["status"] == "passed"
            async with database_session(fresh_db_url) as db:
                assert await default_judge(db, settings) == "judge-b"

            # the drift job now checks the new default, which is steady
            await wait_until(
                lambda: _any_drift_run_of(fresh_db_url, "judge-b"), within_s=20, what="judge-b"
            )
            assert len(await drifts(fresh_db_url)) == 1

            # a noisy full run does not clear the drift; a passing one does
            refused = await calibrate(engine, settings, judge="judge-a", set_name="demo")
            assert refused.cleared_drifts == 0
            set_profile(llm, "judge", noise=0.0)
            passed = await calibrate(engine, settings, judge="judge-a", set_name="demo")
            assert passed.cleared_drifts == 1
            cleared = await drifts(fresh_db_url)
            assert cleared[0].cleared_at is not None and str(passed.id) in str(
                cleared[0].cleared_by
            )
            judges = (await client.get("/v1/admin/judges", headers=auditor)).json()
            assert judges["default"] == "judge-a"
            assert [j["status"] for j in judges["judges"]] == ["passed", "passed"]
            assert judges["judges"][0]["run"]["id"] == str(passed.id)
            await wait_until(_gauge_is(0.0, "judge-a"), within_s=20, what="the gauge back at 0")
            set_runs = await client.get(
                f"/v1/admin/calibration-sets/{chosen.id}/runs", headers=auditor
            )
            kinds = [r["kind"] for r in set_runs.json()]
            assert kinds.count("full") == 4 and kinds.count("drift") >= 2
    finally:
        await engine.dispose()


async def _any_drift_run_of(db_url: str, judge: str) -> bool:
    return any(run.judge == judge for run in await drift_runs(db_url))


def _gauge_is(value: float, judge: str) -> Any:
    async def check() -> bool:
        return drifting_gauge(judge) == value

    return check


def test_the_drift_subset_is_fixed_by_the_set_and_distinct() -> None:
    first = drift_indexes(100, 40, "a" * 64)
    assert first == drift_indexes(100, 40, "a" * 64)
    assert len(set(first)) == 40 and all(0 <= i < 100 for i in first)
    assert first != drift_indexes(100, 40, "b" * 64)
    assert first[:10] == drift_indexes(100, 10, "a" * 64), "a smaller subset is a prefix"
    assert sorted(drift_indexes(5, 40, str(uuid.uuid4()))) == [0, 1, 2, 3, 4]
