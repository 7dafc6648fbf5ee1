"""``proctor demo`` as a newcomer runs it (small settings): no services, one command."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from server.cli.demo_runner import DEMO_MODELS, DemoResult


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(COLUMNS="160", PROCTOR_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run(
        [sys.executable, "-m", "server", "demo", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


async def test_demo_ranks_the_models_as_configured_and_writes_the_report(
    tmp_path: Path, run_sync: Any
) -> None:
    report = tmp_path / "report.html"
    workdir = tmp_path / "work"
    done = await run_sync(
        demo,
        tmp_path,
        "--items",
        "24",
        "--sessions",
        "2",
        "--models",
        "3",
        "--report",
        str(report),
        "--workdir",
        str(workdir),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    expected = [name for name, _ in DEMO_MODELS[:3]]
    assert "The ranking matches the configured abilities: " + " > ".join(expected) in out
    # the printed table lists the models best first (models of one tie group, which the
    # data cannot order, in either order), each with its interval
    positions = [out.index(name) for name in expected]
    assert positions[0] == min(positions)
    assert re.search(r"\[\d+\.\d\d, \d+\.\d\d\]", out), "no confidence interval printed"
    # the judge passed the calibration gate, and the header says how well it agrees
    header = re.search(
        r"judge demo-judge, prompt \S+, weighted kappa (\d\.\d\d) \[(\d\.\d\d), (\d\.\d\d)\]"
        r" on demo-experts v1 \(n=160\)",
        out,
    )
    assert header, out[:3000]
    kappa, low, high = (float(x) for x in header.groups())
    assert 0.6 <= low <= kappa <= high <= 1.0
    # the report: one HTML file with the two plots and every model
    html = report.read_text(encoding="utf-8")
    assert html.count("<svg") >= 2 and all(name in html for name in expected)
    # what happened underneath: 3 models x 2 sessions x 24 items, every answer scored
    with sqlite3.connect(workdir / "demo.db") as db:
        sessions = db.execute("SELECT state, n_items FROM eval_sessions").fetchall()
        verdicts = db.execute("SELECT count(*) FROM verdicts WHERE score IS NOT NULL").fetchone()
        judged = db.execute("SELECT count(*) FROM verdicts WHERE method = 'judge'").fetchone()
        item_disciplines = [row[0] for row in db.execute("SELECT DISTINCT discipline FROM items")]
        taxonomy = dict(db.execute("SELECT key, evaluated FROM disciplines").fetchall())
        sampled = {
            row[0]
            for row in db.execute(
                "SELECT DISTINCT i.discipline FROM answers a JOIN items i ON i.id = a.item_id"
            )
        }
    assert sorted(sessions) == [("scored", 24)] * 6
    assert verdicts == (144,)
    assert judged[0] > 0, "no answer went to the local judge"
    # MMLU-Pro's "biology" and GAOKAO-Bench's "Biology" are one discipline: every item holds
    # a canonical key of the taxonomy, and sessions draw only from evaluated disciplines
    assert len({d.casefold() for d in item_disciplines}) == len(item_disciplines) > 1
    assert set(item_disciplines) <= set(taxonomy)
    assert sampled and all(taxonomy[d] for d in sampled)
    assert (workdir / "transcript-demo-strong.jsonl").exists()
    # every figure it computes on its own data: the discipline counts say what the
    # leaderboard shows, and RSA is computed (ReLE's schemes over the disciplines present)
    stocked = set(item_disciplines)
    drawn = {d for d in stocked if taxonomy[d]}
    assert f"{len(stocked)} disciplines with items, {len(drawn)} evaluated" in out
    assert "RSA unavailable" not in out and re.search(r"demo-\w+: RSA \d+", out), out[-3000:]


async def test_the_server_can_drive_the_demo_s_models_itself(
    tmp_path: Path, run_sync: Any
) -> None:
    workdir = tmp_path / "work"
    args = ("--driver", "server", "--items", "12", "--sessions", "2", "--models", "2")
    done = await run_sync(
        demo, tmp_path, *args, "--report", str(tmp_path / "r.html"), "--workdir", str(workdir)
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = [name for name, _ in DEMO_MODELS[:2]]
    assert "server runs: 2 models × 2 sessions × 12 items" in done.stdout
    assert "The ranking matches the configured abilities: " + " > ".join(expected) in done.stdout
    with sqlite3.connect(workdir / "demo.db") as db:
        runs = db.execute("SELECT state, sessions FROM runs").fetchall()
        sessions = db.execute("SELECT state, n_items FROM eval_sessions").fetchall()
        endpoints = db.execute("SELECT count(*) FROM model_endpoints").fetchone()
    assert sorted(runs) == [("finished", 2)] * 2  # the server drove every session
    assert sorted(sessions) == [("scored", 12)] * 4
    assert endpoints == (2,)
    assert not list(workdir.glob("transcript-*.jsonl"))  # nothing was driven client-side


def test_demo_refuses_bad_settings(tmp_path: Path) -> None:
    done = demo(tmp_path, "--models", "9")
    assert done.returncode == 2 and "--models" in done.stderr
    done = demo(tmp_path, "--driver", "robot")
    assert done.returncode == 2 and "--driver" in done.stderr and "Traceback" not in done.stderr


def test_models_the_data_cannot_order_may_swap_but_no_others() -> None:
    def matches(printed: list[str], groups: list[list[str]]) -> bool:
        result = DemoResult({}, {}, ["a", "b", "c"], printed, Path(), Path(), 0.0, [], groups)
        return result.ranking_matches

    assert matches(["a", "b", "c"], [])
    assert matches(["a", "c", "b"], [["b", "c"]])  # one tie group: either order
    assert not matches(["a", "c", "b"], [])
    assert not matches(["b", "a", "c"], [["b", "c"]])  # a and b are not tied
    assert not matches(["a", "b"], [])
