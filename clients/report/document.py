"""The HTML report as one document: header, leaderboard table, plots, diagnostics and
contamination sections, and :func:`render_report` / :func:`write_report` that put them
together."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clients.report.board import (
    ModelRow,
    as_integer,
    as_mapping,
    as_name,
    as_number,
    as_sequence,
    confidence_level,
    discipline_names,
    model_rows,
    tie_blocks,
    tie_groups,
)
from clients.report.formatting import (
    MISSING,
    escape,
    interval_html,
    join_names,
    number_text,
    percent_text,
    rank_range_text,
    timestamp_texts,
    usd_text,
)
from clients.report.plots import (
    DISCIPLINE_SCALE,
    discipline_heatmap,
    group_colours,
    score_points,
    scores_plot,
)

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
  max-width: 72rem; padding: 0 1rem; color: #1b1b1b; line-height: 1.4; }
h1 { margin-bottom: 0.2rem; }
.subtitle { margin-top: 0; color: #555; font-size: 1.1rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #333; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.meta th { font-weight: 600; color: #444; padding-left: 0; }
table.board tbody { border-top: 1px solid #bbb; }
table.board tbody.tied { background: #f3f6fb; border-top: 2px solid #6b7fa8;
  border-bottom: 2px solid #6b7fa8; }
.swatch { display: inline-block; width: 0.75rem; height: 0.75rem; border-radius: 2px;
  margin-right: 0.35rem; vertical-align: -0.05rem; }
.ci { color: #555; }
.org { color: #666; font-size: 0.85em; }
.tag { font-size: 0.75em; background: #e8e8e8; border-radius: 3px; padding: 0 0.3em; }
.flag { color: #b00020; font-weight: 600; }
.note { color: #555; font-size: 0.9rem; }
figure { margin: 1rem 0 2rem; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.9rem; }
"""


def _calibration_text(raw: Any) -> str:
    """The default judge's weighted kappa with its interval, on which calibration set."""
    figures = as_mapping(raw)
    kappa = as_number(figures.get("weighted_kappa"))
    if kappa is None:
        return "uncalibrated"
    low, high = (
        as_number(figures.get("weighted_ci_low")),
        as_number(figures.get("weighted_ci_high")),
    )
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    name = as_name(figures.get("calibration_set")) or "?"
    version, n = as_number(figures.get("set_version")), as_number(figures.get("n"))
    return escape(
        f"weighted kappa {kappa:.2f}{interval} (95% interval) on calibration set {name}"
        + (f" v{version:g}" if version is not None else "")
        + (f", {n:g} answers" if n is not None else "")
    )


def _meta_table(pairs: Sequence[tuple[str, str]], css: str = "meta") -> str:
    """A two-column table; the keys and values are HTML already."""
    rows = "".join(f'<tr><th scope="row">{k}</th><td>{v}</td></tr>' for k, v in pairs)
    return f'<table class="{css}"><tbody>{rows}</tbody></table>'


def _config_value(value: object) -> str:
    if value is None:
        return MISSING
    if isinstance(value, float):
        return escape(f"{value:g}")
    if isinstance(value, list | tuple):
        return escape(", ".join(str(v) for v in value))
    return escape(value)


def _header(
    board: Mapping[str, Any],
    title: str,
    subtitle: str | None,
    config: Mapping[str, Any] | None,
    generated_at: datetime,
) -> str:
    machine, human = timestamp_texts(generated_at)
    parts = [f"<h1>{escape(title)}</h1>"]
    if subtitle:
        parts.append(f'<p class="subtitle">{escape(subtitle)}</p>')
    judge, version = as_name(board.get("judge")), as_name(board.get("prompt_version"))
    anchor = as_mapping(board.get("anchor"))
    anchor_name = as_name(anchor.get("name")) or as_name(anchor.get("model_id"))
    if anchor_name is None:
        anchor_text = "none (no relative scores)"
    elif anchor.get("designated") is True:
        anchor_text = f"{escape(anchor_name)} (designated)"
    elif anchor.get("designated") is False:
        anchor_text = f"{escape(anchor_name)} (not designated: the top usable model)"
    else:
        anchor_text = escape(anchor_name)
    note = as_name(anchor.get("note"))
    if note:
        anchor_text += f' <span class="note">\u2014 {escape(note)}</span>'
    threshold = as_number(board.get("tie_threshold"))
    pairs = [
        ("Generated", f'<time datetime="{escape(machine)}">{escape(human)}</time>'),
        (
            "Judge",
            (escape(judge) if judge else MISSING)
            + (f" (prompt version {escape(version)})" if version else ""),
        ),
        ("Judge agreement with people", _calibration_text(board.get("judge_calibration"))),
        ("Anchor of R", anchor_text),
        ("Confidence level", percent_text(confidence_level(board))),
    ]
    if threshold is not None:
        pairs.append(
            ("Tie threshold", f"neighbours are separated when P(beats next) \u2265 {threshold:g}")
        )
    parts.append(_meta_table(pairs))
    if config:
        parts.append("<h2>Configuration</h2>")
        parts.append(
            _meta_table([(escape(k), _config_value(v)) for k, v in config.items()], "meta config")
        )
    return "<header>" + "".join(parts) + "</header>"


def _is_anchor(model: ModelRow, anchor: Mapping[str, Any]) -> bool:
    anchor_id, anchor_name = as_name(anchor.get("model_id")), as_name(anchor.get("name"))
    if anchor_id is not None and model.model_id is not None:
        return anchor_id == model.model_id
    return anchor_name is not None and anchor_name == model.name


def _board_table(board: Mapping[str, Any], models: Sequence[ModelRow]) -> str:
    level = percent_text(confidence_level(board))
    colours = group_colours(models)
    anchor = as_mapping(board.get("anchor"))
    with_cost = any(
        as_number(as_mapping(m.row.get("cost")).get("usd_per_1k_items")) is not None for m in models
    )
    headers = [
        ("Pos.", "num"),
        ("Group", "group"),
        ("Rank range", "num"),
        ("Model", "model"),
        (f"R [{level} CI]", "num"),
        (f"S [{level} CI]", "num"),
        ("Sessions", "num"),
        ("P(beats next)", "num"),
        ("Latency p50 / p95 (s)", "num"),
    ]
    if with_cost:
        headers.append(("USD per 1k items", "num"))
    head = "".join(f'<th scope="col" class="{c}">{escape(h)}</th>' for h, c in headers)
    bodies = []
    for block in tie_blocks(models):
        rows = []
        for model in block:
            row = model.row
            latency = as_mapping(row.get("latency"))
            p50, p95 = number_text(latency.get("median_s"), 2), number_text(latency.get("p95_s"), 2)
            group = (
                MISSING
                if model.group is None
                else f'<span class="swatch" style="background:{colours[model.group]}"></span>'
                f"{model.group}"
            )
            label = escape(model.name)
            if _is_anchor(model, anchor):
                label += ' <span class="tag">anchor</span>'
            organisation = as_name(row.get("organisation"))
            if organisation:
                label += f' <span class="org">{escape(organisation)}</span>'
            position = as_integer(row.get("position"))
            sessions = as_integer(row.get("sessions"))
            cells = [
                (MISSING if position is None else str(position), "num"),
                (group, "group"),
                (rank_range_text(row.get("rank_range")), "num"),
                (label, "model"),
                (interval_html(row.get("relative")), "num"),
                (interval_html(row.get("absolute")), "num"),
                (MISSING if sessions is None else str(sessions), "num"),
                (number_text(row.get("beats_next"), 2), "num"),
                (MISSING if p50 == p95 == MISSING else f"{p50} / {p95}", "num"),
            ]
            if with_cost:
                cells.append((usd_text(as_mapping(row.get("cost")).get("usd_per_1k_items")), "num"))
            rows.append("<tr>" + "".join(f'<td class="{c}">{v}</td>' for v, c in cells) + "</tr>")
        tied = ' class="tied"' if len(block) >= 2 else ""
        bodies.append(f"<tbody{tied}>{''.join(rows)}</tbody>")
    return (
        f'<table class="board"><thead><tr>{head}</tr></thead>{"".join(bodies)}</table>'
        if models
        else '<p class="note">The board has no models.</p>'
    )


def _ties_sentence(board: Mapping[str, Any], models: Sequence[ModelRow]) -> str:
    groups = tie_groups(board, models)
    if not groups:
        if len(models) < 2:
            return ""
        return '<p class="ties">The data order every pair of neighbouring models.</p>'
    items = "".join(
        f"<li>{join_names([escape(n) for n in group])} cannot be ordered by the data.</li>"
        for group in groups
    )
    return (
        '<div class="ties"><p>Models in one tie group (shaded) cannot be ordered by the data; '
        f"their order in the table is that of the mean S only:</p><ul>{items}</ul></div>"
    )


def _leaderboard(board: Mapping[str, Any], models: Sequence[ModelRow]) -> str:
    level = percent_text(confidence_level(board))
    return (
        '<section id="leaderboard"><h2>Leaderboard</h2>'
        + _board_table(board, models)
        + _ties_sentence(board, models)
        + '<p class="note">R: score relative to the anchor (anchor = 100). S: absolute score '
        f"(0\u2013100). Intervals are bootstrap {level} confidence intervals; the rank range "
        "is the model's range of ranks over the bootstrap replicates; P(beats next) is the "
        "share of replicates in which the model scores above the next one down.</p></section>"
    )


def _plots(board: Mapping[str, Any], models: Sequence[ModelRow]) -> str:
    level = confidence_level(board)
    parts = ['<section id="plots"><h2>Plots</h2>']
    metric, points = score_points(models)
    if points:
        svg = scores_plot(metric, points, group_colours(models), level)
        what = "relative score R" if metric == "relative" else "absolute score S"
        caption = (
            f"Scores with CI bars: the {what} of each model with its {percent_text(level)} "
            "confidence interval, best at the top, coloured by tie group."
        )
        if metric == "absolute" and any(as_mapping(m.row.get("relative")) for m in models):
            caption += " S is shown because not every model has a relative score."
        left_out = len(models) - len(points)
        if left_out:
            caption += f" {left_out} model(s) without a score are left out."
        parts.append(f'<figure id="scores-plot">{svg}<figcaption>{caption}</figcaption></figure>')
    else:
        parts.append('<p class="note">No scores to plot.</p>')
    disciplines = discipline_names(models)
    if disciplines and models:
        svg = discipline_heatmap(models, disciplines)
        parts.append(
            f'<figure id="discipline-heatmap">{svg}<figcaption>Per-discipline heatmap: each '
            f"model's score in each discipline on the {DISCIPLINE_SCALE:g}-point scale, "
            f"models in leaderboard order; {MISSING} marks a discipline without scored items."
            "</figcaption></figure>"
        )
    else:
        parts.append('<p class="note">No per-discipline scores to plot.</p>')
    parts.append("</section>")
    return "".join(parts)


def _diagnostics(board: Mapping[str, Any]) -> str:
    found = as_mapping(board.get("diagnostics"))
    if not found:
        return ""
    rsa, inconsistency = (
        as_mapping(found.get("rsa")),
        as_mapping(found.get("capability_inconsistency")),
    )
    names = [str(n) for n in as_sequence(found.get("models"))]
    names += [str(n) for n in (*rsa, *inconsistency) if str(n) not in names]
    index = number_text(found.get("anisotropy_index"), 3)
    rows = "".join(
        f"<tr><td>{escape(name)}</td>"
        f'<td class="num">{MISSING if (a := as_integer(rsa.get(name))) is None else a}</td>'
        f'<td class="num">{number_text(inconsistency.get(name), 3)}</td></tr>'
        for name in names
    )
    table = (
        '<table class="diagnostics"><thead><tr><th scope="col">Model</th>'
        '<th scope="col" class="num">RSA</th>'
        '<th scope="col" class="num">Capability inconsistency</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if names
        else ""
    )
    return (
        '<section id="diagnostics"><h2>Diagnostics</h2>'
        f"<p>Anisotropy index: <strong>{index}</strong> (1 minus the mean correlation "
        "between disciplines over the models scored in every discipline: 0 when all "
        "disciplines rank models alike).</p>"
        + table
        + '<p class="note">RSA: the spread of the model\'s rank over the weighting schemes '
        "of the disciplines (0: the same rank under every scheme; "
        f"{MISSING} when no schemes apply). Capability inconsistency: the spread of the "
        "model's difficulty-adjusted discipline scores relative to their mean.</p></section>"
    )


def _contamination(models: Sequence[ModelRow]) -> str:
    rows = []
    for model in models:
        found = as_mapping(model.row.get("contamination"))
        replay, gap = as_mapping(found.get("replay")), as_mapping(found.get("generalisation_gap"))
        if not replay and not gap:
            continue
        rate, low, high = (as_number(replay.get(k)) for k in ("rate", "ci_low", "ci_high"))
        replay_text = MISSING
        if rate is not None:
            replay_text = f"{rate * 100:.1f}%"
            if low is not None and high is not None:
                replay_text += f' <span class="ci">[{low * 100:.1f}, {high * 100:.1f}]</span>'
            hits, items = as_integer(replay.get("near_exact")), as_integer(replay.get("items"))
            if hits is not None and items is not None:
                replay_text += f" ({hits}/{items})"
        flagged = gap.get("flagged")
        flag = (
            '<span class="flag">yes</span>'
            if flagged is True
            else ("no" if flagged is False else MISSING)
        )
        cells = [
            replay_text,
            number_text(gap.get("public")),
            number_text(gap.get("anchor_set")),
            number_text(gap.get("gap")),
            number_text(gap.get("excess")),
            flag,
            number_text(gap.get("reported_score")),
        ]
        rows.append(
            f"<tr><td>{escape(model.name)}</td>"
            + "".join(f'<td class="num">{c}</td>' for c in cells)
            + "</tr>"
        )
    if not rows:
        return ""
    heads = (
        "Replay rate [CI]",
        "S public",
        "S anchor set",
        "Gap",
        "Excess",
        "Flagged",
        "Reported S",
    )
    head = '<th scope="col">Model</th>' + "".join(
        f'<th scope="col" class="num">{h}</th>' for h in heads
    )
    return (
        '<section id="contamination"><h2>Contamination</h2>'
        f'<table class="contamination"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="note">Replay rate: share of replayed items the model completed near-exactly. '
        "Generalisation gap: S on the public items minus S on the private anchor set; a model "
        "is flagged when its gap exceeds the typical gap by more than the threshold, "
        "significantly, and is then reported at the lower bound of its public score.</p>"
        "</section>"
    )


def render_report(
    board: Mapping[str, Any],
    *,
    title: str = "Proctor leaderboard",
    subtitle: str | None = None,
    config: Mapping[str, Any] | None = None,
    generated_at: datetime | None = None,
) -> str:
    """The leaderboard as one self-contained HTML5 document.

    Parameters
    ----------
    board : mapping
        The server's leaderboard JSON, per-model view (``leaderboard_json`` of
        :mod:`server.leaderboard.schemas`, ``GET /v1/leaderboard``). Any field may be
        missing or null; what is missing shows as ``-``, sections without data are left
        out (diagnostics, contamination) or say so (plots).
    title, subtitle : str
        Of the document.
    config : mapping, optional
        The run's settings (``proctor demo``: items, sessions, models, seed), shown as a
        key/value table in the header.
    generated_at : datetime, optional
        The time the header shows; default now (UTC). The same board and time give the
        same document, byte for byte.

    Returns
    -------
    str
        The HTML document: the header, the leaderboard table with its tie groups, the
        scores and per-discipline plots as inline SVG, and the diagnostics and
        contamination sections when the board has them.
    """
    moment = generated_at if generated_at is not None else datetime.now(UTC)
    models = model_rows(board)
    body = (
        _header(board, title, subtitle, config, moment)
        + "<main>"
        + _leaderboard(board, models)
        + _plots(board, models)
        + _diagnostics(board)
        + _contamination(models)
        + "</main>"
    )
    css = re.sub(r"\n\s*", " ", _CSS).strip()
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="Proctor">\n'
        f"<title>{escape(title)}</title>\n<style>{css}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def write_report(
    path: str | os.PathLike[str],
    board: Mapping[str, Any],
    *,
    title: str = "Proctor leaderboard",
    subtitle: str | None = None,
    config: Mapping[str, Any] | None = None,
    generated_at: datetime | None = None,
) -> Path:
    """Write :func:`render_report` of ``board`` to ``path`` (UTF-8), creating its directory.

    Returns
    -------
    Path
        Where the report was written.
    """
    target = Path(path)
    document = render_report(
        board, title=title, subtitle=subtitle, config=config, generated_at=generated_at
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(document, encoding="utf-8")
    return target
