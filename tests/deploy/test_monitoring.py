"""deploy/prometheus and deploy/grafana: the alerts the operator's guide promises exist,
every ``proctor_*`` metric the alerts and the dashboard query is one the server exports
(``server.observability.metrics.METRIC_NAMES``), the jobs they name are the scrape
configuration's, and the dashboard is well formed."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.tools import GRAFANA, PROMETHEUS, load_yaml

REQUIRED_ALERTS = {
    "ProctorScoringBacklogGrowing",
    "ProctorJudgeErrorRate",
    "ProctorJudgeDrifting",
    "ProctorHigh5xxRate",
    "ProctorApiReplicaDown",
    "ProctorWorkerDown",
}
SEVERITIES = {"info", "warning", "critical"}
METRIC = re.compile(r"\bproctor_[a-z0-9_]+")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
JOB = re.compile(r'job="([^"]+)"')


def _rules() -> list[dict[str, Any]]:
    groups = load_yaml(PROMETHEUS / "alerts.yaml")["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GRAFANA / "proctor-dashboard.json").read_text("utf-8"))
    return loaded


def _panels() -> Iterator[dict[str, Any]]:
    for panel in _dashboard()["panels"]:
        if panel["type"] != "row":
            yield panel


def _expressions() -> Iterator[str]:
    for rule in _rules():
        yield rule["expr"]
    for panel in _panels():
        for target in panel["targets"]:
            yield target["expr"]
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["definition"]


def _families(expression: str, known: frozenset[str]) -> set[str]:
    """The metric families an expression reads: a histogram's series name its family (a
    counter, ``*_total``, has no such series)."""
    names = set()
    for name in METRIC.findall(expression):
        for suffix in HISTOGRAM_SERIES:
            family = name.removesuffix(suffix)
            if family != name and family in known and not family.endswith("_total"):
                name = family
        names.add(name)
    return names


def test_required_alerts_exist_and_are_complete() -> None:
    rules = _rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    assert set(names) >= REQUIRED_ALERTS
    for rule in rules:
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert METRIC.search(rule["expr"]) or "up{" in rule["expr"], rule["alert"]


def test_every_metric_queried_is_exported() -> None:
    metrics = importlib.import_module("server.observability.metrics")
    known: frozenset[str] = metrics.METRIC_NAMES
    used = set().union(*(_families(expression, known) for expression in _expressions()))
    assert used, "no proctor_* metric found: the pattern is wrong"
    assert used - known == set()


def test_family_names_are_resolved_against_the_known_ones() -> None:
    """The check above can fail: an unknown name, or a suffix on a non-histogram, stays."""
    known = frozenset({"proctor_http_request_duration_seconds", "proctor_answers_total"})
    expression = (
        "rate(proctor_http_request_duration_seconds_bucket[5m]) + proctor_answers_total_count"
        " + proctor_typo_total"
    )
    assert _families(expression, known) - known == {
        "proctor_answers_total_count",
        "proctor_typo_total",
    }


def test_jobs_in_alerts_and_dashboard_are_scraped() -> None:
    scraped = {
        job["job_name"] for job in load_yaml(PROMETHEUS / "prometheus.yml")["scrape_configs"]
    }
    assert scraped == {"proctor-api", "proctor-worker"}
    used = {job for expression in _expressions() for job in JOB.findall(expression)}
    assert used == scraped
    assert load_yaml(PROMETHEUS / "prometheus.yml")["rule_files"] == ["alerts.yaml"]


def test_promtool_accepts_the_rules() -> None:
    """Syntax of every PromQL expression, where promtool is installed (Debian's
    ``prometheus`` package; not part of the test extra)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (optional)")
    result = subprocess.run(
        [promtool, "check", "rules", str(PROMETHEUS / "alerts.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_panels_are_well_formed() -> None:
    dashboard = _dashboard()
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert "datasource" in variables
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert cells.isdisjoint(area), f"{panel['title']} overlaps another panel"
        cells |= area
    for panel in _panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
