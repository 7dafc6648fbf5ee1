"""``proctor analyze``: as a user runs it (real subprocesses, no database) on table 8 and a
bad file, and in-process (Typer's runner) for the other cases.

The subprocesses are started at once (each pays ~2.5 s of interpreter and import start-up)
and the tests read the finished results.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from scipy import stats
from typer.testing import CliRunner

from server.cli.main import app
from tests.judge.ranking.table8 import ANCHOR, DISCIPLINES, TABLE8, load_table8
from tests.support.cli import Run, proctor


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("analyze")


@pytest.fixture(scope="module")
def runs(folder: Path) -> dict[str, Run]:
    bad = folder / "bad.csv"
    bad.write_text("model,overall,math,law\nA,80,8,9\nB,70,seven,6\n", encoding="utf-8")
    table8 = str(TABLE8)
    commands = {
        "json": ("analyze", table8, "--json"),
        "human": ("analyze", table8, "--anchor", "GPT-4o"),
        "bad": ("analyze", str(bad)),
    }
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {name: pool.submit(proctor, *args) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def in_process(folder: Path) -> dict[str, Result]:
    small = folder / "small.txt"  # no extension: the delimiter is sniffed
    small.write_text("name;math;law;lit\nA;8;9;5\nB;7;6;9\nC;5;5;5\n", encoding="utf-8")
    one = folder / "one.json"
    one.write_text(json.dumps({"law only": {"Law": 1}}), encoding="utf-8")
    small_schemes = folder / "small.json"
    small_schemes.write_text(
        json.dumps({"stem": {"math": 3, "law": 1}, "humanities": {"law": 1, "lit": 3}}),
        encoding="utf-8",
    )
    wrong = folder / "wrong.json"
    wrong.write_text('{"s": {"Lawyering": 1, "Law": -2}}', encoding="utf-8")
    broken = folder / "broken.json"
    broken.write_text('{"s":\n  {"Law": }', encoding="utf-8")
    table8 = str(TABLE8)
    commands = {
        "one_scheme": ("analyze", table8, "--schemes", str(one), "--json"),
        "small": ("analyze", str(small), "--schemes", str(small_schemes), "--json"),
        "small_human": ("analyze", str(small)),
        "unknown_anchor": ("analyze", table8, "--anchor", "GPT-9"),
        "wrong_schemes": ("analyze", table8, "--schemes", str(wrong)),
        "broken_schemes": ("analyze", table8, "--schemes", str(broken)),
    }
    runner = CliRunner()
    return {name: runner.invoke(app, list(args)) for name, args in commands.items()}


def ok_json(run: Run | Result) -> Any:
    code = run.returncode if isinstance(run, subprocess.CompletedProcess) else run.exit_code
    assert code == 0, run.stderr
    return json.loads(run.stdout)


def test_table8_json_matches_the_paper_and_numpy(runs: dict[str, Run]) -> None:
    report = ok_json(runs["json"])
    table = load_table8()
    assert report["anchor"] == ANCHOR and report["anchor_designated"] is False
    assert report["overall_source"] == "S_abs"
    assert report["dimensions"] == list(DISCIPLINES)
    assert report["ignored_columns"] == ["access", "ref_year", "R_sota"]
    relative = np.array([report["relative"][m] for m in table.models])
    assert np.max(np.abs(relative - table.r_sota)) <= 0.01
    pairs = [
        stats.pearsonr(table.disciplines[:, a], table.disciplines[:, b]).statistic
        for a, b in combinations(range(10), 2)
    ]
    assert report["anisotropy_index"] == pytest.approx(1 - np.mean(pairs), abs=1e-12)
    assert report["schemes_source"] == "rele"
    assert list(report["schemes"]) == ["general", "professional", "reasoning"]
    ranks = np.array(
        [[report["scheme_ranks"][s][m] for m in table.models] for s in report["schemes"]]
    )
    assert [report["rsa"][m] for m in table.models] == (ranks.max(0) - ranks.min(0)).tolist()
    assert report["rsa"]["QwQ-32B"] == max(report["rsa"].values()) == 8
    assert set(report["capability_inconsistency"]) == set(table.models)
    assert report["ci_floor"] == 0.1 and report["ci_floored"] == []
    assert len(report["ci_difficulty_anchors"]) == 10


def test_table8_human_output(runs: dict[str, Run]) -> None:
    run = runs["human"]
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "anchor GPT-4o (designated, overall 82.51) = 100" in out
    assert "anisotropy index 0.0506" in out
    assert "RSA over 3 schemes (general, professional, reasoning; ReLE §6.1)" in out
    gpt4o = next(line for line in out.splitlines() if "│ GPT-4o " in line)
    assert "100.00" in gpt4o
    doubao = next(line for line in out.splitlines() if f"│ {ANCHOR} " in line)
    assert f"{93.67 / 82.51 * 100:.2f}" in doubao


def test_a_single_scheme_gives_rsa_0(in_process: dict[str, Result]) -> None:
    report = ok_json(in_process["one_scheme"])
    assert set(report["rsa"].values()) == {0}
    assert report["schemes"] == {"law only": {"Law": 1.0}}
    law_order = sorted(report["models"], key=lambda m: -report["scheme_ranks"]["law only"][m])
    assert report["scheme_ranks"]["law only"][law_order[-1]] == 1


def test_a_small_semicolon_table_with_user_schemes(in_process: dict[str, Result]) -> None:
    report = ok_json(in_process["small"])
    assert report["models"] == ["A", "B", "C"]
    assert report["overall_source"] == "mean of dimensions"
    overall = {"A": 22 / 3, "B": 22 / 3, "C": 5.0}
    assert report["overall"] == pytest.approx(overall)
    assert report["anchor"] == "A"  # the first of the two top models
    assert report["relative"] == pytest.approx({"A": 100.0, "B": 100.0, "C": 5 / (22 / 3) * 100})
    # stem: A 8.25, B 6.75, C 5; humanities: A 6, B 8.25, C 5.
    assert report["scheme_ranks"] == {
        "stem": {"A": 1, "B": 2, "C": 3},
        "humanities": {"A": 2, "B": 1, "C": 3},
    }
    assert report["rsa"] == {"A": 1, "B": 1, "C": 0}
    values = np.array([[8, 9, 5], [7, 6, 9], [5, 5, 5]], dtype=float)
    corr = np.corrcoef(values, rowvar=False)[np.triu_indices(3, 1)]
    assert report["anisotropy_index"] == pytest.approx(1 - corr.mean(), abs=1e-12)


def test_without_schemes_a_generic_table_has_no_rsa(in_process: dict[str, Result]) -> None:
    run = in_process["small_human"]
    assert run.exit_code == 0, run.stderr
    assert "RSA: not computed" in run.stdout
    assert "anchor A (the top model" in run.stdout


def test_a_non_numeric_cell_is_named_with_file_line_and_column(
    runs: dict[str, Run], folder: Path
) -> None:
    run = runs["bad"]
    bad = folder / "bad.csv"
    assert run.returncode == 1
    assert f"error: {bad}:3: math: 'seven' is not a number" in run.stderr
    assert "--dimensions" in run.stderr
    assert run.stdout == ""


def test_unknown_anchor_is_named(in_process: dict[str, Result]) -> None:
    run = in_process["unknown_anchor"]
    assert run.exit_code == 1
    assert "error: --anchor: model 'GPT-9' is not in" in run.stderr
    assert "59 models" in run.stderr


def test_bad_schemes_are_refused(in_process: dict[str, Result]) -> None:
    wrong = in_process["wrong_schemes"]
    assert wrong.exit_code == 1
    assert "scheme 's': unknown dimension 'Lawyering'" in wrong.stderr
    assert "scheme 's': Law: weight -2 is negative" in wrong.stderr
    broken = in_process["broken_schemes"]
    assert broken.exit_code == 1
    assert "broken.json:2: json: Expecting value" in broken.stderr
