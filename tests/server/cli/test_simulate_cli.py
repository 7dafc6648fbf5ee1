"""``proctor simulate``: as a user runs it (real subprocesses) on a small synthetic response
matrix, on one whose every model scores all or nothing in each discipline (so a sample's
per-discipline means are exact when, and only when, the items' disciplines reach the
replay), and on the MMLU-Pro responses when present; input errors in-process (Typer's
runner).

The subprocesses are started at once (each pays ~2.5 s of interpreter and import start-up)
and the tests read the finished results.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from server.cli.main import app
from server.sessions.limits import AdaptiveDefaults
from tests.support.cli import Run, proctor
from tests.support.paths import SHARED_DATA

ACCURACY = {"m20": 0.2, "m35": 0.35, "m50": 0.5, "m65": 0.65, "m80": 0.8, "m95": 0.95}
"""Simulated models and their accuracies: well separated."""
HISTORY = {"h30": 0.3, "h55": 0.55, "h70": 0.7, "h90": 0.9}
DISCIPLINES = ("math", "law", "biology", "history")
N_ITEMS = 400
BUDGET = 150
RUNS = 4
ALL = ["full", "uniform", "proportional", "neyman", "neyman-irt", "model-assisted"]
REQUIRED = {"items_mean", "saved_vs_full", "mae", "spearman", "kendall", "coverage"}
NEW = {"stopped_settled", "discipline_mae", "max_exposure"}
"""The figures the model-assisted policy brought (every policy reports them)."""
SOLVED = {"s1": ("math",), "s2": ("math", "law"), "s3": ("math", "law", "biology")}
"""All-or-nothing models: each solves every item of its disciplines and no other."""
MMLU_PRO = SHARED_DATA / "mmlu_pro"


def item_id(j: int) -> str:
    return str(1000 + j)


def write_responses(path: Path, accuracy: dict[str, float], seed: int) -> None:
    """Scores 1/0 from a logistic model with item difficulties, a few cells empty."""
    rng = np.random.default_rng(seed)
    difficulty = np.random.default_rng(99).normal(0.0, 1.0, N_ITEMS)
    lines = ["model," + ",".join(item_id(j) for j in range(N_ITEMS))]
    for model, p in accuracy.items():
        ability = np.log(p / (1 - p))
        correct = rng.random(N_ITEMS) < 1.0 / (1.0 + np.exp(difficulty - ability))
        cells = ["1" if c else "0" for c in correct]
        for j in rng.choice(N_ITEMS, size=5, replace=False):
            cells[j] = ""
        lines.append(model + "," + ",".join(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_items(path: Path) -> None:
    records = [
        {
            "question_id": int(item_id(j)),
            "category": DISCIPLINES[j % len(DISCIPLINES)],
            "src": f"src-{j % 7}",
            **({"type": "open"} if j % 5 == 0 else {}),
        }
        for j in range(N_ITEMS)
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")


def write_all_or_nothing(path: Path) -> None:
    """Responses of :data:`SOLVED` over the items of :func:`write_items`, every cell filled."""
    lines = ["model," + ",".join(item_id(j) for j in range(N_ITEMS))]
    for model, solved in SOLVED.items():
        cells = [
            "1" if DISCIPLINES[j % len(DISCIPLINES)] in solved else "0" for j in range(N_ITEMS)
        ]
        lines.append(model + "," + ",".join(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("simulate")
    write_responses(folder / "responses.csv", ACCURACY, seed=1)
    write_responses(folder / "history.csv", HISTORY, seed=2)
    write_items(folder / "items.jsonl")
    write_all_or_nothing(folder / "all_or_nothing.csv")
    return folder


def small(folder: Path, *args: str) -> tuple[str, ...]:
    return (
        "simulate",
        "--responses",
        str(folder / "responses.csv"),
        "--items",
        str(folder / "items.jsonl"),
        "--runs",
        str(RUNS),
        "--budget",
        str(BUDGET),
        *args,
    )


@pytest.fixture(scope="module")
def runs(folder: Path) -> dict[str, Run]:
    commands: dict[str, tuple[str, ...]] = {
        "json": small(folder, "--json", "--jobs", "1"),
        "json_jobs": small(folder, "--json", "--jobs", "2"),
        "restricted": small(folder, "--policy", "uniform", "--policy", "neyman", "--json"),
        "table": small(folder, "--jobs", "1", "--bound", "normal"),
        "table_json": small(folder, "--jobs", "1", "--bound", "normal", "--json"),
        "history": small(
            folder,
            "--history",
            str(folder / "history.csv"),
            "--policy",
            "neyman-irt",
            "--policy",
            "model-assisted",
            "--json",
        ),
        "disciplines": (
            "simulate",
            "--responses",
            str(folder / "all_or_nothing.csv"),
            "--items",
            str(folder / "items.jsonl"),
            "--strata",
            "type",
            "--policy",
            "uniform",
            "--policy",
            "proportional",
            "--runs",
            str(RUNS),
            "--budget",
            str(BUDGET),
            "--json",
        ),
    }
    if MMLU_PRO.is_dir():
        commands["mmlu_pro"] = (
            "simulate",
            "--responses",
            str(MMLU_PRO / "responses.csv"),
            "--items",
            str(MMLU_PRO / "items.jsonl"),
            "--policy",
            "neyman-irt",
            "--policy",
            "model-assisted",
            "--runs",
            "2",
            "--budget",
            "300",
            "--json",
        )
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {name: pool.submit(proctor, *args) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def output(run: Run) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    return report


def test_json_report(runs: dict[str, Run]) -> None:
    report = output(runs["json"])
    assert set(report) >= {"config", "models", "full_scores", "policies"}
    assert report["models"] == list(ACCURACY)
    assert list(report["full_scores"]) == list(ACCURACY)
    scores = [report["full_scores"][m] for m in ACCURACY]
    assert scores == sorted(scores)
    assert all(0 <= s <= 100 for s in scores)
    config = report["config"]
    assert config["budget"] == BUDGET
    assert config["runs"] == RUNS
    assert config["bound"] == "hoeffding-serfling"
    assert config["delta"] == 0.05
    assert config["target_halfwidth"] == AdaptiveDefaults().target_halfwidth == 7.25
    assert config["strata"] == ["discipline", "type"]
    assert config["n_strata"] == len(DISCIPLINES) * 2
    assert config["n_disciplines"] == len(DISCIPLINES)
    assert (config["n_models"], config["n_items"]) == (len(ACCURACY), N_ITEMS)
    assert list(report["policies"]) == ALL
    for name, figures in report["policies"].items():
        assert set(figures) >= REQUIRED | NEW | {"items_p95", "halfwidth_mean", "stopped_precise"}
        assert figures["saved_vs_full"] == pytest.approx(1 - figures["items_mean"] / BUDGET)
        assert 0 < figures["items_mean"] <= figures["items_p95"] <= BUDGET, name
        assert 0 <= figures["coverage"] <= 1
        assert 0 <= figures["stopped_precise"] <= 1
        assert 0 <= figures["stopped_settled"] <= 1 - figures["stopped_precise"], name
        assert figures["spearman"] > 0.9, name
        assert figures["kendall"] > 0.7, name
        assert 0 <= figures["mae"] < 10, name
        # a discipline's estimate rests on about a quarter of the items: less precise
        assert figures["mae"] < figures["discipline_mae"] < 15, name
        # some item is given at least as often as the items' average
        assert figures["items_mean"] / N_ITEMS <= figures["max_exposure"] <= 1, name
    for name in ALL[:-1]:  # only model-assisted looks at the other models' scores
        assert report["policies"][name]["stopped_settled"] == 0, name
    full = report["policies"]["full"]
    assert full["items_mean"] == full["items_p95"] == BUDGET
    assert full["saved_vs_full"] == 0
    assert full["stopped_precise"] == 0
    # six well separated models: a model's place is settled well before 150 items
    assisted = report["policies"]["model-assisted"]
    assert assisted["stopped_settled"] >= 0.5
    assert assisted["items_mean"] < report["policies"]["uniform"]["items_mean"]


def test_results_do_not_depend_on_jobs(runs: dict[str, Run]) -> None:
    assert output(runs["json_jobs"])["policies"] == output(runs["json"])["policies"]


def test_policy_option_restricts_and_keeps_the_order(runs: dict[str, Run]) -> None:
    report = output(runs["restricted"])
    assert list(report["policies"]) == ["uniform", "neyman"]
    assert report["config"]["policies"] == ["uniform", "neyman"]
    # the same draws as in the run of every policy
    everything = output(runs["json"])["policies"]
    assert report["policies"]["neyman"] == everything["neyman"]


def test_table_output(runs: dict[str, Run], folder: Path) -> None:
    run = runs["table"]
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    for name in ALL:
        assert any(line.startswith(f"│ {name} ") for line in lines), name
    assert "bound normal, delta 0.05, target half-width 7.25 points" in run.stdout
    assert f"budget {BUDGET}, runs {RUNS}" in run.stdout
    assert f"{len(ACCURACY)} models x {N_ITEMS} items" in run.stdout
    for header in ("items mean", "MAE", "Spearman", "Kendall", "coverage"):
        assert header in run.stdout
    # the new columns' headers wrap over two lines of the 160-column table
    for header in ("discipline", "settled", "exposure"):
        assert header in run.stdout
    figures = output(runs["table_json"])["policies"]
    for name in ALL:
        row = next(line for line in lines if line.startswith(f"│ {name} "))
        cells = [cell.strip() for cell in row.strip().strip("│").split("│")]
        assert len(cells) == 13, row
        assert cells[5] == f"{figures[name]['discipline_mae']:.2f}", name
        assert cells[11] == f"{figures[name]['stopped_settled'] * 100:.0f}%", name
        assert cells[12] == f"{figures[name]['max_exposure'] * 100:.1f}%", name
    # progress on stderr, one line per policy
    for name in ALL:
        assert f"{name}: {RUNS * len(ACCURACY)} sessions in" in run.stderr


def test_history_gives_the_item_parameters(runs: dict[str, Run], folder: Path) -> None:
    report = output(runs["history"])
    assert report["config"]["history"] == str(folder / "history.csv")
    assert list(report["policies"]) == ["neyman-irt", "model-assisted"]
    for figures in report["policies"].values():
        assert figures["spearman"] > 0.9
        assert figures["mae"] < 10
    # fitted on other models, the parameters give other draws than the left-one-out fits
    assert (
        report["policies"]["model-assisted"] != output(runs["json"])["policies"]["model-assisted"]
    )


def test_disciplines_come_from_the_items_whatever_the_strata(runs: dict[str, Run]) -> None:
    """Every model scores all or nothing in each discipline, so any sample's mean of a
    discipline is exact; the strata (question types) mix disciplines, so had the replay
    taken them for disciplines, their means would miss."""
    report = output(runs["disciplines"])
    assert report["config"]["strata"] == ["type"]
    assert (report["config"]["n_strata"], report["config"]["n_disciplines"]) == (2, 4)
    for name in ("uniform", "proportional"):
        figures = report["policies"][name]
        assert figures["discipline_mae"] == 0, name
        assert figures["mae"] > 0, name  # the sessions did not take every item


@pytest.mark.skipif(not MMLU_PRO.is_dir(), reason=f"real data not found at {MMLU_PRO}")
def test_mmlu_pro(runs: dict[str, Run]) -> None:
    report = output(runs["mmlu_pro"])
    assert len(report["models"]) == 20
    assert report["config"]["n_models"] == 20
    assert list(report["policies"]) == ["neyman-irt", "model-assisted"]
    for name, figures in report["policies"].items():
        assert figures["items_mean"] <= 300, name
        assert figures["mae"] < 5, name
        assert figures["spearman"] > 0.9, name
        assert 0.5 <= figures["coverage"] <= 1, name
        assert figures["mae"] < figures["discipline_mae"] < 15, name
        # 40 sessions of at most 300 of 12,032 items: no item reaches every session
        assert 0 < figures["max_exposure"] < 0.5, name


# input errors, in-process


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def rewrite(source: Path, target: Path, edit: Any) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
    return target


def test_bad_score_cell_names_file_line_and_column(folder: Path, tmp_path: Path) -> None:
    def spoil(lines: list[str]) -> list[str]:
        cells = lines[3].split(",")
        cells[3] = "x"
        return [*lines[:3], ",".join(cells), *lines[4:]]

    bad = rewrite(folder / "responses.csv", tmp_path / "bad.csv", spoil)
    run = invoke(
        "simulate", "--responses", str(bad), "--items", str(folder / "items.jsonl"), "--json"
    )
    assert run.exit_code == 1
    assert f"error: {bad}:4: {item_id(2)}: 'x' is not a score in [0, 1] or empty" in run.stderr
    assert run.stdout == ""


def test_unknown_item_id(folder: Path, tmp_path: Path) -> None:
    def rename(lines: list[str]) -> list[str]:
        return [lines[0].replace(f",{item_id(7)},", ",Q-unknown,"), *lines[1:]]

    bad = rewrite(folder / "responses.csv", tmp_path / "unknown.csv", rename)
    items = folder / "items.jsonl"
    run = invoke("simulate", "--responses", str(bad), "--items", str(items))
    assert run.exit_code == 1
    assert f"error: {bad}:1: Q-unknown: 1 item ids not in {items}: Q-unknown" in run.stderr


def test_history_must_not_hold_a_simulated_model(folder: Path, tmp_path: Path) -> None:
    def add(lines: list[str]) -> list[str]:
        return [
            *lines,
            next(
                line
                for line in (folder / "responses.csv").read_text().splitlines()
                if line.startswith("m50,")
            ),
        ]

    history = rewrite(folder / "history.csv", tmp_path / "history.csv", add)
    run = invoke(*small(folder, "--history", str(history)))
    assert run.exit_code == 1
    assert f"error: {history}: model: 'm50' also in {folder / 'responses.csv'}" in run.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--delta", "0"),
        ("--delta", "1.5"),
        ("--target-halfwidth", "0"),
        ("--runs", "0"),
        ("--budget", "0"),
        ("--strata", "discipline,colour"),
        ("--policy", "greedy"),
    ],
)
def test_option_out_of_range(folder: Path, option: str, value: str) -> None:
    run = invoke(*small(folder, option, value))
    assert run.exit_code == 2
    assert option in run.stderr


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        (("--policy", "model-assisted"), "model-assisted without --history needs"),
        (("--policy", "uniform"), None),
        ((), "neyman-irt and model-assisted without --history need"),
    ],
)
def test_item_parameters_need_three_models_without_history(
    folder: Path, tmp_path: Path, policies: tuple[str, ...], message: str | None
) -> None:
    two = rewrite(folder / "responses.csv", tmp_path / "two.csv", lambda lines: lines[:3])
    run = invoke(
        "simulate",
        "--responses",
        str(two),
        "--items",
        str(folder / "items.jsonl"),
        "--runs",
        "1",
        "--budget",
        "20",
        "--jobs",
        "1",
        "--json",
        *policies,
    )
    if message is None:
        assert run.exit_code == 0, run.stderr
        assert list(json.loads(run.stdout)["policies"]) == ["uniform"]
    else:
        assert run.exit_code == 1
        assert f"error: {two}: model: {message} at least three models" in run.stderr
        assert run.stdout == ""


def test_unreadable_file(folder: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.csv"
    run = invoke("simulate", "--responses", str(missing), "--items", str(folder / "items.jsonl"))
    assert run.exit_code == 1
    assert f"error: {missing}: No such file or directory" in run.stderr
