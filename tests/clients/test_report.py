"""The HTML report of a leaderboard (clients.report).

The document is parsed back with ``html.parser`` into a small element tree, so the checks
are on what a browser would see (table cells, SVG ``<text>`` elements), not on substrings
of the markup; escaping is checked on the raw markup. One board is written out by hand
(a tie group of two, a hostile name, a model without a relative score or disciplines); one
comes from the real code path (``build_leaderboard`` -> ``leaderboard_json``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pytest

from clients.report import render_report, write_report
from judge.contamination.generalisation_gap import ScoreEstimate, generalisation_gap
from judge.contamination.replay import replay_rate
from judge.ranking.leaderboard import ModelRecord, board_diagnostics, build_leaderboard
from server.leaderboard.fields import ModelInfo
from server.leaderboard.schemas import leaderboard_json
from server.leaderboard.service import Contamination, LeaderboardData
from server.scoring.assignment import JudgeAssignment

WHEN = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script>"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


# --- a small element tree -------------------------------------------------------------------

VOID = {"meta", "link", "br", "hr", "img", "input", "col", "source", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def iter(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        return [
            node
            for node in self.iter()
            if node.tag == tag and all(node.attrs.get(k) == v for k, v in attrs.items())
        ]

    def find(self, tag: str, **attrs: str) -> Node:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag} {attrs}>"
        return found[0]

    def text(self) -> str:
        parts = [c if isinstance(c, str) else c.text() for c in self.children]
        return re.sub(r"\s+", " ", "".join(parts)).strip()


class TreeBuilder(HTMLParser):
    """Builds a ``Node`` tree; fails on an end tag that closes nothing open."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.doctype: str | None = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert tag in (n.tag for n in self.stack), f"stray </{tag}>"
        while self.stack.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(document: str) -> Node:
    builder = TreeBuilder()
    builder.feed(document)
    builder.close()
    assert [n.tag for n in builder.stack] == ["#document"], "unclosed elements"
    return builder.root


def board_rows(root: Node) -> list[list[str]]:
    table = root.find("table", **{"class": "board"})
    return [[td.text() for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]


def svg_texts(root: Node, figure_id: str) -> list[str]:
    figure = root.find("figure", id=figure_id)
    return [t.text() for t in figure.find("svg").find_all("text")]


def meta(root: Node) -> dict[str, str]:
    """The first key/value table under ``root``."""
    table = root.find_all("table")[0]
    return {tr.find("th").text(): tr.find("td").text() for tr in table.find_all("tr")}


def column(root: Node, header: str) -> list[str]:
    table = root.find("table", **{"class": "board"})
    headers = [th.text() for th in table.find("thead").find_all("th")]
    return [row[headers.index(header)] for row in board_rows(root)]


# --- a hand-written board -------------------------------------------------------------------


def summary(mean: float, low: float, high: float) -> dict[str, Any]:
    return {
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "variance": 1.5,
        "standard_error": 0.8,
        "session_values": [mean - 1, mean, mean + 1],
    }


def disciplines(**scores: float) -> dict[str, Any]:
    return {d: {"score": s, "standard_error": 0.2, "items": 40} for d, s in scores.items()}


def make_board() -> dict[str, Any]:
    """Four models: a leader (the designated anchor), a tie group of two (one with a
    hostile name and no ``writing`` score) and a last model whose relative score is null
    and whose disciplines, latency and cost are missing."""
    return {
        "judge": "judge-v1",
        "prompt_version": "p7",
        "anchor": {"model_id": "m-atlas", "name": "Atlas-70B", "designated": True, "note": None},
        "confidence_level": 0.95,
        "tie_threshold": 0.95,
        "groups": [["Atlas-70B"], ["Borealis-8B", HOSTILE], ["Cirrus-1B"]],
        "models": [
            {
                "model_id": "m-atlas",
                "position": 1,
                "group": 1,
                "rank_range": [1, 1],
                "beats_next": 0.998,
                "name": "Atlas-70B",
                "family": "atlas",
                "organisation": "Org A",
                "absolute": summary(72.4, 70.1, 74.6),
                "relative": summary(100.0, 100.0, 100.0),
                "sessions": 3,
                "disciplines": disciplines(code=7.3, math=6.84, writing=8.16),
                "latency": {"median_s": 1.234, "p95_s": 3.5},
                "cost": {
                    "prompt_tokens_per_item": 310.0,
                    "completion_tokens_per_item": 95.5,
                    "usd_per_1k_items": 0.42,
                },
                "contamination": {
                    "replay": {
                        "items": 50,
                        "near_exact": 2,
                        "rate": 0.04,
                        "ci_low": 0.0049,
                        "ci_high": 0.1371,
                    },
                    "generalisation_gap": None,
                },
            },
            {
                "model_id": "m-borealis",
                "position": 2,
                "group": 2,
                "rank_range": [2, 3],
                "beats_next": 0.61,
                "name": "Borealis-8B",
                "organisation": "Org B",
                "absolute": summary(60.4, 57.2, 63.5),
                "relative": summary(83.4, 79.1, 87.8),
                "sessions": 3,
                "disciplines": disciplines(code=6.1, math=5.5, writing=6.3),
                "latency": {"median_s": 2.0, "p95_s": 5.25},
                "cost": {"usd_per_1k_items": None},
                "contamination": {"replay": None, "generalisation_gap": None},
            },
            {
                "model_id": "m-hostile",
                "position": 3,
                "group": 2,
                "rank_range": [2, 3],
                "beats_next": 0.97,
                "name": HOSTILE,
                "organisation": "<img src=x onerror=alert(2)>",
                "absolute": summary(59.4, 56.0, 62.9),
                "relative": summary(82.0, 78.0, 86.0),
                "sessions": 2,
                "disciplines": disciplines(code=2.1, math=9.5),
                "latency": {"median_s": 0.5, "p95_s": None},
            },
            {
                "model_id": "m-cirrus",
                "position": 4,
                "group": 3,
                "rank_range": [4, 4],
                "beats_next": None,
                "name": "Cirrus-1B",
                "absolute": summary(40.2, 35.5, 44.9),
                "relative": None,
                "sessions": 1,
            },
        ],
        "diagnostics": {
            "models": ["Atlas-70B", "Borealis-8B"],
            "anisotropy_index": 0.3141,
            "rsa": None,
            "capability_inconsistency": {"Atlas-70B": 0.081, "Borealis-8B": 0.125},
        },
    }


CONFIG = {"items": 120, "sessions": 3, "models": 4, "seed": 7}


@pytest.fixture(scope="module")
def board() -> dict[str, Any]:
    return make_board()


@pytest.fixture(scope="module")
def document(board: dict[str, Any]) -> str:
    return render_report(board, subtitle="demo run", config=CONFIG, generated_at=WHEN)


@pytest.fixture(scope="module")
def tree(document: str) -> Node:
    return parse(document)


def ci_text(values: dict[str, Any]) -> str:
    return f"{values['mean']:.1f} [{values['ci_low']:.1f}, {values['ci_high']:.1f}]"


# --- structure ------------------------------------------------------------------------------


def test_the_document_is_html5_and_self_contained(document: str, tree: Node) -> None:
    assert document.startswith("<!DOCTYPE html>")
    assert tree.find("html").attrs["lang"] == "en"
    assert tree.find("meta", charset="utf-8")
    tags = {node.tag for node in tree.iter()}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed"}
    # Nothing is fetched: no src attributes, and every href is a fragment of the page or
    # inline data (the colour bar's gradient).
    assert not any("src" in node.attrs for node in tree.iter())
    hrefs = [v for node in tree.iter() for k, v in node.attrs.items() if k.endswith("href")]
    assert hrefs and all(h.startswith(("#", "data:image/png;base64,")) for h in hrefs)
    assert "url(http" not in document and "@import" not in document
    assert "<?xml" not in document and "<metadata" not in document


def test_the_plots_section_holds_exactly_the_two_svgs(tree: Node) -> None:
    plots = tree.find("section", id="plots")
    assert len(plots.find_all("svg")) == 2
    assert len(tree.find_all("svg")) == 2
    assert plots.find("figure", id="scores-plot").find("svg")
    assert plots.find("figure", id="discipline-heatmap").find("svg")


def test_ids_are_unique_and_every_svg_reference_resolves(document: str, tree: Node) -> None:
    ids = [node.attrs["id"] for node in tree.iter() if "id" in node.attrs]
    assert len(ids) == len(set(ids))
    references = set(re.findall(r'(?:href="#|url\(#)([^")]+)', document))
    assert references and references <= set(ids)


def test_the_header_shows_the_run(tree: Node) -> None:
    header = tree.find("header")
    text = header.text()
    assert tree.find("h1").text() == "Proctor leaderboard"
    assert "demo run" in text
    assert header.find("time").attrs["datetime"] == "2025-03-04T05:06:07+00:00"
    assert "2025-03-04 05:06:07 UTC" in text
    assert "judge-v1 (prompt version p7)" in text
    assert "Atlas-70B (designated)" in text
    assert "95%" in text
    config = header.find("table", **{"class": "meta config"})
    pairs = [(tr.find("th").text(), tr.find("td").text()) for tr in config.find_all("tr")]
    assert pairs == [(k, str(v)) for k, v in CONFIG.items()]


def test_the_header_shows_the_judges_agreement_with_people(board: dict[str, Any]) -> None:
    assert (
        meta(parse(render_report(board, generated_at=WHEN)).find("header"))[
            "Judge agreement with people"
        ]
        == "uncalibrated"
    )
    changed = copy.deepcopy(board)
    changed["judge_calibration"] = {
        "calibration_set": "experts<b>",
        "set_version": 2,
        "n": 120,
        "weighted_kappa": 0.912,
        "weighted_ci_low": 0.861,
        "weighted_ci_high": 0.947,
    }
    header = meta(parse(render_report(changed, generated_at=WHEN)).find("header"))
    assert header["Judge agreement with people"] == (
        "weighted kappa 0.91 [0.86, 0.95] (95% interval) on calibration set experts<b> v2, "
        "120 answers"
    )


def test_an_undesignated_anchor_and_its_note_are_said(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["anchor"] = {
        "model_id": "m-atlas",
        "name": "Atlas-70B",
        "designated": False,
        "note": "the designated anchor has no scored sessions; the top usable model is used",
    }
    text = parse(render_report(changed, generated_at=WHEN)).find("header").text()
    assert "Atlas-70B (not designated" in text
    assert "the designated anchor has no scored sessions" in text


# --- the leaderboard table ------------------------------------------------------------------


def test_rows_are_in_leaderboard_order_with_their_scores(board: dict[str, Any], tree: Node) -> None:
    rows = board_rows(tree)
    models = board["models"]
    assert len(rows) == len(models)
    assert column(tree, "Pos.") == ["1", "2", "3", "4"]
    names = column(tree, "Model")
    for name, model in zip(names, models, strict=True):
        assert name.startswith(model["name"])
    assert column(tree, "R [95% CI]") == [
        "100.0 [100.0, 100.0]",
        ci_text(models[1]["relative"]),
        "82.0 [78.0, 86.0]",
        "-",
    ]
    assert column(tree, "S [95% CI]") == [ci_text(m["absolute"]) for m in models]
    assert column(tree, "Rank range") == ["1", "2\u20133", "2\u20133", "4"]
    assert column(tree, "Sessions") == ["3", "3", "2", "1"]
    assert column(tree, "P(beats next)") == ["1.00", "0.61", "0.97", "-"]
    assert column(tree, "Latency p50 / p95 (s)") == ["1.23 / 3.50", "2.00 / 5.25", "0.50 / -", "-"]
    assert column(tree, "USD per 1k items") == ["0.42", "-", "-", "-"]
    assert names[0] == "Atlas-70B anchor Org A"


def test_the_cost_column_is_left_out_when_no_model_has_a_cost(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["models"][0]["cost"]["usd_per_1k_items"] = None
    tree = parse(render_report(changed, generated_at=WHEN))
    headers = [th.text() for th in tree.find("table", **{"class": "board"}).find_all("th")]
    assert "USD per 1k items" not in headers
    assert all(len(row) == len(headers) for row in board_rows(tree))


def test_a_tie_group_is_one_block_and_named_as_unorderable(tree: Node) -> None:
    table = tree.find("table", **{"class": "board"})
    bodies = table.find_all("tbody")
    assert [len(b.find_all("tr")) for b in bodies] == [1, 2, 1]
    assert [b.attrs.get("class") for b in bodies] == [None, "tied", None]
    tied = [tr.find_all("td")[3].text() for tr in bodies[1].find_all("tr")]
    assert tied[0].startswith("Borealis-8B") and tied[1].startswith(HOSTILE)
    sentences = [li.text() for li in tree.find("div", **{"class": "ties"}).find_all("li")]
    assert sentences == [f"Borealis-8B and {HOSTILE} cannot be ordered by the data."]


def test_tie_groups_come_from_the_rows_without_a_groups_list(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    del changed["groups"]
    changed["models"][3]["group"] = 2  # a group of three at the bottom
    tree = parse(render_report(changed, generated_at=WHEN))
    sentences = [li.text() for li in tree.find("div", **{"class": "ties"}).find_all("li")]
    assert sentences == [f"Borealis-8B, {HOSTILE} and Cirrus-1B cannot be ordered by the data."]


def test_a_board_without_ties_says_so(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["groups"] = [["Atlas-70B"], ["Borealis-8B"], [HOSTILE], ["Cirrus-1B"]]
    for i, model in enumerate(changed["models"]):
        model["group"] = i + 1
    document = render_report(changed, generated_at=WHEN)
    assert "cannot be ordered by the data" not in document
    assert not parse(document).find_all("tbody", **{"class": "tied"})


# --- plots ----------------------------------------------------------------------------------


def test_the_heatmap_labels_every_discipline_and_cell(tree: Node) -> None:
    texts = svg_texts(tree, "discipline-heatmap")
    for label in ("code", "math", "writing", "Atlas-70B", "Borealis-8B", HOSTILE, "Cirrus-1B"):
        assert label in texts
    cells = ["7.3", "6.8", "8.2", "6.1", "5.5", "6.3", "2.1", "9.5"]
    assert [t for t in texts if re.fullmatch(r"\d+\.\d", t)] == cells  # row by row
    assert texts.count("-") == 4  # the hostile model's writing, Cirrus' three
    assert "score (0\u201310)" in texts  # the colour bar


def test_the_scores_plot_falls_back_to_s_when_a_relative_score_is_null(tree: Node) -> None:
    texts = svg_texts(tree, "scores-plot")
    assert "S (0\u2013100), 95% CI" in texts
    assert [t for t in texts if t in {"72.4", "60.4", "59.4", "40.2"}] == [
        "72.4",
        "60.4",
        "59.4",
        "40.2",
    ]
    assert {"Atlas-70B", "Borealis-8B", HOSTILE, "Cirrus-1B"} <= set(texts)
    assert "not every model has a relative score" in tree.find("figure", id="scores-plot").text()


def test_the_scores_plot_shows_r_best_first_coloured_by_tie_group(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["models"][3]["relative"] = summary(55.5, 49.0, 62.0)
    figure = parse(render_report(changed, generated_at=WHEN)).find("figure", id="scores-plot")
    texts = [t.text() for t in figure.find("svg").find_all("text")]
    assert "R (anchor = 100), 95% CI" in texts
    assert [t for t in texts if t in {"100.0", "83.4", "82.0", "55.5"}] == [
        "100.0",
        "83.4",
        "82.0",
        "55.5",
    ]
    svg = "".join(str(n.attrs) for n in figure.find("svg").iter())
    # tab10's first three colours: groups 1, 2 (both tied models) and 3.
    for colour in ("#1f77b4", "#ff7f0e", "#2ca02c"):
        assert colour in svg
    assert "#d62728" not in svg  # a fourth colour would mean the tie group was split
    assert {"group 1", "group 2", "group 3"} <= set(texts)


# --- escaping and missing data --------------------------------------------------------------


def test_data_is_escaped_everywhere(document: str, tree: Node) -> None:
    assert HOSTILE not in document
    # Table, tie sentence, both plots: every occurrence is the escaped one.
    assert document.count("alert(1)") == document.count(HOSTILE_ESCAPED) >= 4
    assert "<img" not in document and "&lt;img src=x onerror=alert(2)&gt;" in document
    assert not tree.find_all("script") and not tree.find_all("img")


def test_hostile_strings_outside_the_rows_are_escaped_too(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["judge"] = '"><b>judge</b>'
    changed["anchor"]["note"] = "<i>note</i>"
    changed["diagnostics"]["capability_inconsistency"][HOSTILE] = 0.2
    document = render_report(
        changed,
        title="<u>title</u>",
        subtitle="<s>sub</s>",
        config={"<k>": "<v>"},
        generated_at=WHEN,
    )
    tags = {node.tag for node in parse(document).iter()}
    assert not tags & {"b", "i", "u", "s", "k", "v", "script"}
    assert "&lt;u&gt;title&lt;/u&gt;" in document and HOSTILE not in document


def test_names_that_look_like_mathtext_are_drawn_as_they_are(board: dict[str, Any]) -> None:
    changed = copy.deepcopy(board)
    changed["models"][1]["name"] = r"price $\frac{a$ & co_1^2"
    tree = parse(render_report(changed, generated_at=WHEN))
    assert r"price $\frac{a$ & co_1^2" in svg_texts(tree, "discipline-heatmap")


def test_missing_and_malformed_fields_show_a_dash() -> None:
    board = {
        "models": [
            {"model_id": "x", "name": "Only-a-name"},
            {
                "name": "Broken",
                "absolute": {"mean": float("nan")},
                "disciplines": None,
                "rank_range": "1-2",
                "position": "first",
                "latency": [],
                "sessions": None,
            },
        ]
    }
    tree = parse(render_report(board, generated_at=WHEN))
    rows = board_rows(tree)
    assert rows[0][3] == "Only-a-name" and rows[1][3] == "Broken"
    for row in rows:
        assert set(row) - {row[3]} == {"-"}
    header = meta(tree.find("header"))
    assert header["Anchor of R"].startswith("none") and header["Judge"] == "-"
    plots = tree.find("section", id="plots")
    assert not plots.find_all("svg")
    assert "No scores to plot." in plots.text()
    assert "No per-discipline scores to plot." in plots.text()
    assert not tree.find_all("section", id="diagnostics")
    assert not tree.find_all("section", id="contamination")


def test_an_empty_board_renders() -> None:
    tree = parse(render_report({}, generated_at=WHEN))
    assert "The board has no models." in tree.find("section", id="leaderboard").text()


def test_diagnostics_and_contamination(tree: Node) -> None:
    diagnostics = tree.find("section", id="diagnostics")
    assert "Anisotropy index: 0.314" in diagnostics.text()
    rows = [[td.text() for td in tr.find_all("td")] for tr in diagnostics.find_all("tr")[1:]]
    assert rows == [["Atlas-70B", "-", "0.081"], ["Borealis-8B", "-", "0.125"]]
    contamination = tree.find("section", id="contamination")
    rows = [[td.text() for td in tr.find_all("td")] for tr in contamination.find_all("tr")[1:]]
    assert rows == [["Atlas-70B", "4.0% [0.5, 13.7] (2/50)", "-", "-", "-", "-", "-", "-"]]


# --- determinism and files ------------------------------------------------------------------


def test_the_same_input_gives_the_same_bytes(board: dict[str, Any], document: str) -> None:
    again = render_report(board, subtitle="demo run", config=CONFIG, generated_at=WHEN)
    assert again == document
    later = render_report(
        board, subtitle="demo run", config=CONFIG, generated_at=WHEN + timedelta(hours=1)
    )
    assert later != document
    # Only the header's time differs; the plots carry no date.
    assert re.sub(r"<header>.*?</header>", "", later) == re.sub(
        r"<header>.*?</header>", "", document
    )


def test_renders_in_threads_are_identical(board: dict[str, Any], document: str) -> None:
    render: Callable[[int], str] = lambda _: render_report(  # noqa: E731
        board, subtitle="demo run", config=CONFIG, generated_at=WHEN
    )
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(render, range(6)))
    assert all(r == document for r in results)


def test_matplotlib_settings_are_left_as_they_were(board: dict[str, Any]) -> None:
    before = dict(mpl.rcParams)
    render_report(board, generated_at=WHEN)
    assert dict(mpl.rcParams) == before


def test_an_aware_time_is_shown_in_utc(board: dict[str, Any]) -> None:
    paris = datetime(2025, 3, 4, 6, 6, 7, tzinfo=timezone(timedelta(hours=1)))
    header = parse(render_report(board, generated_at=paris)).find("header")
    assert header.find("time").attrs["datetime"] == "2025-03-04T05:06:07+00:00"


def test_write_report_writes_utf8(board: dict[str, Any], tmp_path: Path) -> None:
    changed = copy.deepcopy(board)
    changed["models"][1]["name"] = "Modèle-ß"
    target = tmp_path / "out" / "report.html"
    written = write_report(target, changed, config=CONFIG, generated_at=WHEN)
    assert written == target
    raw = target.read_bytes()
    assert "Modèle-ß".encode() in raw and "\u2013".encode() in raw
    assert raw.decode("utf-8") == render_report(changed, config=CONFIG, generated_at=WHEN)


# --- the real shape -------------------------------------------------------------------------


def real_data() -> LeaderboardData:
    """Four models through ``build_leaderboard``: two of them drawn alike (a tie), with
    discipline scores, latencies, usage and prices, diagnostics and contamination."""
    rng = np.random.default_rng(11)
    profiles = {
        "Strong": (0.05, 0.1, 0.25, 0.6),
        "Twin-A": (0.15, 0.2, 0.3, 0.35),
        "Twin-B": (0.15, 0.2, 0.3, 0.35),
        "Weak": (0.4, 0.3, 0.2, 0.1),
    }
    records = []
    for i, (name, p) in enumerate(profiles.items()):
        sessions = [[int(x) for x in rng.choice(4, size=60, p=p)] for _ in range(3)]
        pooled = [s for session in sessions for s in session]
        records.append(
            ModelRecord(
                key=f"id-{i}",
                name=name,
                sessions=sessions,
                disciplines={"code": pooled[0::3], "math": pooled[1::3], "writing": pooled[2::3]},
                latencies_s=[float(x) for x in rng.gamma(2.0, 0.5, size=30)],
                prompt_tokens=30_000,
                completion_tokens=9_000,
                n_with_usage=100,
                usd_per_mtok_in=1.0 if name != "Weak" else None,
                usd_per_mtok_out=3.0 if name != "Weak" else None,
            )
        )
    board = build_leaderboard(records, anchor="id-1", n_resamples=300, seed=3)
    public = {r.key: ScoreEstimate(r.absolute.mean, r.absolute.standard_error) for r in board.rows}
    private = {k: ScoreEstimate(v.mean - 4.0, v.standard_error) for k, v in public.items()}
    return LeaderboardData(
        board=board,
        models={
            f"id-{i}": ModelInfo(family=name, organisation=f"Org {i}")
            for i, name in enumerate(profiles)
        },
        contamination=Contamination(
            replay={"id-0": replay_rate(near_exact=3, n=40)},
            gap=generalisation_gap(public, private),
        ),
        judges=JudgeAssignment.single("judge-v1"),
        prompt_version="p7",
        diagnostics=board_diagnostics(board),
    )


def test_a_board_from_the_server_renders() -> None:
    data = real_data()
    board = leaderboard_json(data)
    tree = parse(render_report(board, config=CONFIG, generated_at=WHEN))
    rows = board_rows(tree)
    assert len(rows) == 4
    for row, model in zip(rows, board["models"], strict=True):
        assert row[0] == str(model["position"])
        assert row[3].startswith(model["name"])
        assert row[4] == ci_text(model["relative"])
        assert row[5] == ci_text(model["absolute"])
    assert "Twin-A (designated)" in tree.find("header").text()
    tied = [g for g in board["groups"] if len(g) >= 2]
    assert tied, "the twins should tie"
    ties = tree.find("div", **{"class": "ties"}).text()
    for group in tied:
        assert " and ".join([", ".join(group[:-1]), group[-1]]) in ties
    assert len(tree.find("section", id="plots").find_all("svg")) == 2
    assert "R (anchor = 100), 95% CI" in svg_texts(tree, "scores-plot")
    heatmap = svg_texts(tree, "discipline-heatmap")
    for model in board["models"]:
        for score in model["disciplines"].values():
            assert f"{score['score']:.1f}" in heatmap
    assert tree.find_all("section", id="diagnostics")
    contamination = tree.find("section", id="contamination")
    assert len(contamination.find_all("tr")) == 1 + 4


def test_a_vendor_subset_of_the_fields_renders() -> None:
    board = leaderboard_json(real_data(), fields={"name", "position", "group", "rank_range"})
    tree = parse(render_report(board, generated_at=WHEN))
    for row, model in zip(board_rows(tree), board["models"], strict=True):
        assert row[3].startswith(model["name"])
    assert set(column(tree, "R [95% CI]")) == {"-"}
    assert not tree.find_all("svg")
