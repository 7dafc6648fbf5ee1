"""``proctor leaderboard``, ``proctor admin set-anchor`` and ``proctor bank anchor-set`` as a
user runs them: real subprocesses on a database scored through the API and the local judge."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import func, select

from bank.models import Item
from server.cli.leaderboard import print_leaderboard
from tests.server.leaderboard.test_leaderboard_api import drive, register, settings_for
from tests.support.api import World, running_api
from tests.support.cli import proctor_env
from tests.support.database import database_session
from tests.support.fake_llm import running_fake_llm
from tests.support.sessions import JUDGE_NAME as JUDGE

FORMULA_NAME = "=cmd|' /C calc'!A0"
"""A vendor's model name that a spreadsheet would run as a formula."""


@pytest.fixture
async def scored_world(world_db: tuple[str, World]) -> tuple[str, World, dict[str, str]]:
    """Two models of organisation A (2/3 and 1/3 right) with two scored 12-item sessions each."""
    db_url, world = world_db
    assert world.a.model_id is not None
    with running_fake_llm() as llm:
        async with running_api(settings_for(db_url, llm)) as (_, client):
            other = await register(client, world.a.keys, FORMULA_NAME)
            plans: list[tuple[uuid.UUID, Callable[[int], bool]]] = [
                (world.a.model_id, lambda p: p % 3 != 0),  # 2/3 right
                (other, lambda p: p % 3 == 0),  # 1/3 right
            ]
            for model_id, correct in plans:
                for _ in range(2):
                    await drive(
                        client,
                        db_url,
                        keys=world.a.keys,
                        model_id=model_id,
                        n_items=12,
                        correct=correct,
                    )
    env = {"PROCTOR_DATABASE_URL": db_url, "PROCTOR_JUDGES": json.dumps([_judge()])}
    return db_url, world, env


def _judge() -> dict[str, Any]:
    return {"name": JUDGE, "base_url": "http://127.0.0.1:9/v1", "model": "judge"}


async def test_leaderboard_json_table_disciplines_csv_and_anchor(
    scored_world: tuple[str, World, dict[str, str]], run_sync: Any, tmp_path: Path
) -> None:
    *_, env = scored_world
    out_csv = tmp_path / "board.csv"
    as_json = await run_sync(proctor_env, env, "leaderboard", "--json", "--csv", str(out_csv))
    table = await run_sync(proctor_env, env, "leaderboard")
    disciplines = await run_sync(proctor_env, env, "leaderboard", "--by-discipline", "--json")
    assert as_json.returncode == 0, as_json.stderr
    board = json.loads(as_json.stdout)
    assert len(board["models"]) == 2 and board["judge"] == JUDGE
    top, second = board["models"]
    assert top["relative"]["mean"] == pytest.approx(100)
    assert {"latency", "cost", "contamination"} <= top.keys()
    # the table shows every model with its interval and says how R is anchored
    assert table.returncode == 0, table.stderr
    for row in board["models"]:
        assert row["name"] in table.stdout
        assert f"{row['relative']['ci_low']:.2f}" in table.stdout
    assert "top model" in table.stdout
    # the CSV holds one row per model, in order, with a column per discipline
    with out_csv.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["model_id"] for r in rows] == [m["model_id"] for m in board["models"]]
    assert float(rows[0]["relative"]) == pytest.approx(top["relative"]["mean"], abs=1e-3)
    assert float(rows[1]["absolute_ci_low"]) == pytest.approx(second["absolute"]["ci_low"])
    for discipline, score in top["disciplines"].items():
        assert float(rows[0][discipline]) == pytest.approx(score["score"])
    # the vendor's name is text to the spreadsheet, not a formula (one writer for exports)
    assert second["name"] == FORMULA_NAME and rows[1]["name"] == "'" + FORMULA_NAME
    view = json.loads(disciplines.stdout)
    assert {b["discipline"] for b in view["disciplines"]} == set(top["disciplines"])

    # a static leaderboard that orders the two the other way round; Elo needs shared items
    static = tmp_path / "static.csv"
    static.write_text(f"model,score\n{top['name']},40\n{second['name']},60\n", encoding="utf-8")
    compared = await run_sync(
        proctor_env, env, "leaderboard", "--json", "--baselines", "--compare", str(static)
    )
    printed = await run_sync(proctor_env, env, "leaderboard", "--compare", str(static))
    broken = tmp_path / "broken.csv"
    broken.write_text("model,score\nx,high\n", encoding="utf-8")
    refused = await run_sync(proctor_env, env, "leaderboard", "--compare", str(broken))
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert result["static_comparison"]["n_common"] == 2, result["static_comparison"]
    assert result["static_comparison"]["spearman"] == pytest.approx(-1)
    assert result["static_comparison"]["inverted_share"] == pytest.approx(1)
    assert result["static_comparison"]["displacement"] == {top["name"]: 1, second["name"]: -1}
    # one organisation is never served an item twice, so its models share no item
    assert result["baselines"]["n_comparisons"] == 0
    assert result["baselines"]["note"] == "no two models share an item"
    assert "Spearman -1.000" in printed.stdout and "inverted pairs 100.0%" in printed.stdout
    assert refused.returncode == 1 and "broken.csv:2" in refused.stderr

    # ReLE diagnostics of the discipline scores; RSA needs schemes for these disciplines
    plain = json.loads(
        (await run_sync(proctor_env, env, "leaderboard", "--json", "--diagnostics")).stdout
    )
    found = plain["diagnostics"]
    assert found["rsa"] is None and isinstance(found["anisotropy_index"], float)
    assert list(found["unavailable"]) == ["rsa"]  # and says why
    assert set(found["capability_inconsistency"]) == {top["name"], second["name"]}
    disciplines_of = sorted(top["disciplines"])
    schemes = tmp_path / "schemes.json"
    schemes.write_text(
        json.dumps({f"only-{d}": {d: 1.0} for d in disciplines_of[:2]}), encoding="utf-8"
    )
    weighted = await run_sync(
        proctor_env, env, "leaderboard", "--json", "--diagnostics", "--schemes", str(schemes)
    )
    assert weighted.returncode == 0, weighted.stderr
    rsa = json.loads(weighted.stdout)["diagnostics"]["rsa"]
    assert set(rsa) == {top["name"], second["name"]} and all(v in (0, 1) for v in rsa.values())
    schemes.write_text(json.dumps({"bad": {"no-such-discipline": 1.0}}), encoding="utf-8")
    bad = await run_sync(
        proctor_env, env, "leaderboard", "--diagnostics", "--schemes", str(schemes)
    )
    assert bad.returncode == 1 and "no-such-discipline" in bad.stderr

    # designating the second model: its R becomes 100; --top goes back; bad input refused
    chosen = await run_sync(proctor_env, env, "admin", "set-anchor", second["model_id"])
    assert chosen.returncode == 0, chosen.stderr
    anchored = json.loads((await run_sync(proctor_env, env, "leaderboard", "--json")).stdout)
    relative = {m["model_id"]: m["relative"]["mean"] for m in anchored["models"]}
    assert relative[second["model_id"]] == pytest.approx(100)
    assert anchored["anchor"]["designated"] is True
    missing = await run_sync(proctor_env, env, "admin", "set-anchor", str(uuid.uuid4()))
    both = await run_sync(proctor_env, env, "admin", "set-anchor", second["model_id"], "--top")
    assert missing.returncode == 1 and "no model" in missing.stderr
    assert both.returncode == 2
    back = await run_sync(proctor_env, env, "admin", "set-anchor", "--top")
    assert back.returncode == 0 and "top model" in back.stdout


async def test_bank_anchor_set_withholds_families(
    world_db: tuple[str, World], run_sync: Any
) -> None:
    db_url, _world = world_db
    env = {"PROCTOR_DATABASE_URL": db_url}
    done = await run_sync(proctor_env, env, "bank", "anchor-set", "--size", "6", "--json")
    too_many = await run_sync(proctor_env, env, "bank", "anchor-set", "--size", "100000")
    assert done.returncode == 0, done.stderr
    change = json.loads(done.stdout)
    assert change["families"] == 6 and sum(change["by_discipline"].values()) == 6
    async with database_session(db_url) as db:
        families = await db.scalar(
            select(func.count(func.distinct(Item.family_id))).where(Item.status == "anchor")
        )
        items = await db.scalar(select(func.count()).where(Item.status == "anchor"))
    assert families == 6 and items == change["items"]
    assert too_many.returncode == 1
    assert "cannot withhold 100000" in too_many.stderr


def test_the_table_prints_unavailable_diagnostics_with_their_reasons() -> None:
    """Regression: a null statistic (here capability inconsistency) crashed the table."""
    reason = "discipline 'D0': every model scores 0, so its difficulty is undefined"
    view: dict[str, Any] = {
        "judge": JUDGE,
        "prompt_version": "v1",
        "anchor": {"name": None, "designated": False, "note": None},
        "models": [],
        "groups": [],
        "diagnostics": {
            "models": ["a", "b"],
            "anisotropy_index": 0.25,
            "rsa": {"a": 0, "b": 1},
            "capability_inconsistency": None,
            "unavailable": {"capability_inconsistency": reason},
        },
    }
    out = io.StringIO()
    print_leaderboard(view, Console(file=out, width=300, highlight=False))
    printed = out.getvalue()
    assert "anisotropy index 0.2500" in printed
    assert "a: RSA 0" in printed and "b: RSA 1" in printed
    assert f"capability inconsistency unavailable: {reason}" in printed
