"""``proctor bank health`` as a user runs it: on recorded files (MMLU-Pro's format), on the
server's verdicts (snapshot, --flag, --save-subset), and refusing bad input with a clear
message and exit status, never a traceback."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from bank.item_status import ItemStatus
from bank.models import HealthSnapshot, Item, ItemSet, ItemSetMember
from server.cli.main import app
from server.database import create_engine, unit_of_work
from tests.support.api import World, seed_world
from tests.support.cli import proctor, proctor_db
from tests.support.health import HEALTH_JUDGE_ENV, originals, record_verdicts
from tests.support.paths import SHARED_DATA

MMLU_PRO = SHARED_DATA / "mmlu_pro"
RECORDED = (
    "--responses",
    str(MMLU_PRO / "responses.csv"),
    "--items",
    str(MMLU_PRO / "items.jsonl"),
    "--models",
    str(MMLU_PRO / "models.csv"),
)


def test_recorded_data_gives_the_report_and_an_items_csv(tmp_path: Path) -> None:
    out = tmp_path / "items.csv"
    run = proctor(
        "bank", "health", *RECORDED, "--iterations", "10", "--json", "--items-csv", str(out)
    )
    assert run.returncode == 0, run.stderr
    body = json.loads(run.stdout)
    assert body["population"]["n_models"] == 20 and len(body["strata"]) == 14
    assert body["bank"]["ds"] > 0 and body["bank"]["stability"] > 0.9
    with out.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(body["items"]) > 10_000
    first = rows[0]
    assert float(first["p"]) == pytest.approx(body["items"][first["item_id"]]["p"], abs=1e-5)

    top = proctor(
        "bank",
        "health",
        *RECORDED,
        "--iterations",
        "10",
        "--population",
        "top:10",
        "--threshold",
        "saturated_p=0.8",
        "--json",
    )
    assert top.returncode == 0, top.stderr
    strict = json.loads(top.stdout)
    assert strict["population"]["n_models"] == 10
    assert json.loads(strict["choices"]["thresholds"])["saturated_p"] == 0.8
    saturated = [row["p"] for row in strict["items"].values() if "saturated" in row["flags"]]
    assert saturated and min(saturated) >= 0.8 - 1e-6 and min(saturated) < 0.95


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--population", "top:0"), "--population"),
        (("--population", "best:3"), "--population"),
        (("--responses", "x.csv"), "--responses and --items go together"),
        ((*RECORDED, "--flag"), "need the server's verdicts"),
        ((*RECORDED, "--save-subset", "cas=core"), "need the server's verdicts"),
        (("--save-subset", "best=core"), "RULE one of cad_ds, cas, cad_ds_cas"),
        (("--save-subset", "cas=\x01"), "--save-subset"),
        ((*RECORDED, "--peer", "law"), "expected STRATUM=CSV"),
        (("--threshold", "saturated_p"), "expected NAME=VALUE"),
        (("--threshold", "saturated_p=2"), "saturated_p must be in [0, 1]"),
        (("--threshold", "bogus=1"), "unknown threshold 'bogus'"),
        ((*RECORDED, "--population", "family:NOPE"), "no model of family 'NOPE'"),
    ],
)
def test_bad_options_are_refused_with_exit_2(args: tuple[str, ...], message: str) -> None:
    # In process (each refusal comes before any work): the same app the entry point runs.
    run = CliRunner().invoke(app, ["bank", "health", *args], env={"COLUMNS": "200"})
    assert run.exit_code == 2, run.output
    assert message in run.output
    assert run.exception is None or isinstance(run.exception, SystemExit)  # no traceback


def test_hostile_files_are_refused_with_file_line_and_field(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(
        '{"question_id": 70, "category": "law"}\n{"question_id": 71, "category": "law"}\n',
        encoding="utf-8",
    )
    good = tmp_path / "good.csv"
    good.write_text("model,70,71\nA,1,0\nB,0,1\n", encoding="utf-8")
    models = tmp_path / "models.csv"
    models.write_text("model,family,params_b,date\nA,f,-3,2024-13-01\n", encoding="utf-8")
    responses = tmp_path / "responses.csv"
    responses.write_bytes(b"model,70\nA,\xff\n")
    run = proctor(
        "bank", "health", "--responses", str(good), "--items", str(items), "--models", str(models)
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"{models}:2: params_b:" in run.stderr and f"{models}:2: date:" in run.stderr
    broken = proctor("bank", "health", "--responses", str(responses), "--items", str(items))
    assert broken.returncode == 1 and f"{responses}:2: file: not valid UTF-8" in broken.stderr


@pytest.fixture
async def world(fresh_db_url: str) -> tuple[str, World]:
    w = await seed_world(fresh_db_url, per_cell=3)
    await record_verdicts(fresh_db_url, w, (await originals(fresh_db_url))[:20])
    return fresh_db_url, w


async def _counts(db_url: str) -> dict[str, int]:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:

            async def count(statement: object) -> int:
                return int(await db.scalar(statement) or 0)  # type: ignore[call-overload]

            return {
                "snapshots": await count(select(func.count()).select_from(HealthSnapshot)),
                "flagged": await count(
                    select(func.count())
                    .select_from(Item)
                    .where(Item.status == ItemStatus.FLAGGED.value)
                ),
                "sets": await count(select(func.count()).select_from(ItemSet)),
                "members": await count(select(func.count()).select_from(ItemSetMember)),
            }
    finally:
        await engine.dispose()


async def test_on_the_server_it_snapshots_flags_and_saves_a_subset(
    world: tuple[str, World], tmp_path: Path
) -> None:
    db_url, _ = world
    plain = proctor_db(
        db_url, "bank", "health", "--iterations", "10", "--json", env=HEALTH_JUDGE_ENV
    )
    body = json.loads(plain.stdout)
    assert body["population"]["n_models"] == 10
    assert await _counts(db_url) == {"snapshots": 1, "flagged": 0, "sets": 0, "members": 0}
    stratum = sorted(body["strata"])[0]
    board = tmp_path / "board.csv"
    models = body["population"]["models"]
    board.write_text("model,score\n" + "".join(f"{m},{i}\n" for i, m in enumerate(models)), "utf-8")

    flagged = proctor_db(
        db_url,
        "bank",
        "health",
        "--iterations",
        "10",
        "--flag",
        "--save-subset",
        "cas=core",
        "--peer",
        f"{stratum}={board}",
        "--json",
        env=HEALTH_JUDGE_ENV,
    )
    assert "items moved to flagged" in flagged.stderr and "item set 'core' saved" in flagged.stderr
    assert json.loads(flagged.stdout)["strata"][stratum]["cbrc"] is not None
    counts = await _counts(db_url)
    assert counts["snapshots"] == 2 and counts["flagged"] >= 2
    assert counts["sets"] == 1 and counts["members"] > 0

    again = proctor_db(
        db_url,
        "bank",
        "health",
        "--save-subset",
        "cas=core",
        "--iterations",
        "10",
        check=False,
        env=HEALTH_JUDGE_ENV,
    )
    assert again.returncode == 1 and "exists already" in again.stderr
    assert (await _counts(db_url))["sets"] == 1
