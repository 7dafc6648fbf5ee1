"""The HTML report of a leaderboard (``proctor demo``, issue 6).

One self-contained HTML5 document from the server's leaderboard JSON (the per-model view,
``GET /v1/leaderboard``): no external CSS, scripts, fonts or images. It holds

* a header: title, generation time, judge and prompt version, the anchor of ``R`` and
  whether it was designated, the confidence level, and the run's configuration;
* the leaderboard table: position, tie group, rank range, ``R`` and ``S`` with their
  intervals, sessions, P(beats next), latency and (when known) cost; the rows of one tie
  group are drawn as one block, and the groups of two or more models are named as ones
  the data cannot order;
* two plots as inline SVG: the scores with their intervals as error bars in leaderboard
  order (best at the top), coloured by tie group, and a heatmap of the per-discipline
  scores (10-point scale). The first shows ``R``, or ``S`` for every model when some
  model has no ``R`` (the two are on different scales and never share an axis);
* the ReLE diagnostics and the contamination checks, when the board has them.

The board may be any subset of the fields (vendors see the configured public ones) and any
value may be null: what is missing shows as ``-``. Every string from the board is escaped.

Plots are drawn with matplotlib's object API (``Figure`` and the SVG canvas, never pyplot),
text kept as SVG ``<text>`` (``svg.fonttype: none``, mathtext off: a ``$`` in a name is
drawn as it is); the heatmap's cells are vectors, only the colour bar's gradient is an
inline PNG (a ``data:`` URI). Ids in the SVG are prefixed per plot, so the document's ids
stay unique. matplotlib reads some settings from its global ``rcParams`` while drawing
(the salt of the SVG ids, the font type); they are set with ``rc_context`` under a module
lock, so concurrent reports do not interfere (other matplotlib users in the process may
see them while a plot is drawn), and the output is byte-identical for the same board and
``generated_at``.
"""

from __future__ import annotations

import html
import io
import math
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType

__all__ = ["render_report", "write_report"]

DISCIPLINE_SCALE = 10.0
"""Per-discipline scores are on a 0-10 scale (papers/004 tables 1 and 8)."""

MISSING = "-"
"""What a missing or null value shows as."""

MAX_PLOT_LABEL = 40
"""Model names longer than this are shortened in the plots (the table has them in full)."""

GROUP_COLOURS: tuple[str, ...] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Colours of the tie groups, in order of appearance (matplotlib's ``tab10``), cycled."""

_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.image_inline": True,
    "svg.id": None,
    "text.parse_math": False,
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
}
"""matplotlib settings of every plot; ``svg.hashsalt`` is set per plot."""

_MATPLOTLIB_LOCK = threading.Lock()

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


# --- values -------------------------------------------------------------------------------


def _esc(value: object) -> str:
    """``value`` as text safe in HTML element content and quoted attributes."""
    return html.escape(str(value), quote=True)


def _num(value: object) -> float | None:
    """A finite number, or None for anything else (null, NaN, text, booleans)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _int(value: object) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number == int(number) else None


def _map(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _seq(value: object) -> Sequence[Any]:
    """``value`` if it is a list or tuple, else an empty one."""
    return value if isinstance(value, list | tuple) else ()


def _text(value: object) -> str | None:
    """A non-empty string form of a name or identifier, None when absent."""
    if value is None or isinstance(value, Mapping | list | tuple):
        return None
    text = str(value)
    return text or None


def _fmt(value: object, digits: int = 1) -> str:
    number = _num(value)
    return MISSING if number is None else f"{number:.{digits}f}"


def _interval(summary: object, digits: int = 1) -> str:
    """``mean [low, high]`` of a score summary as HTML; ``-`` without a mean."""
    found = _map(summary)
    mean, low, high = (_num(found.get(k)) for k in ("mean", "ci_low", "ci_high"))
    if mean is None:
        return MISSING
    text = f"{mean:.{digits}f}"
    if low is not None and high is not None:
        text += f' <span class="ci">[{low:.{digits}f}, {high:.{digits}f}]</span>'
    return text


def _rank_range(value: object) -> str:
    bounds = [_int(v) for v in _seq(value)]
    if len(bounds) != 2 or bounds[0] is None or bounds[1] is None:
        return MISSING
    low, high = bounds
    return str(low) if low == high else f"{low}\u2013{high}"


def _usd(value: object) -> str:
    number = _num(value)
    if number is None:
        return MISSING
    return f"{number:,.2f}" if abs(number) >= 1 else f"{number:.3g}"


def _percent(level: float) -> str:
    return f"{level * 100:g}%"


def _join_names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (already escaped)."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _short(name: str) -> str:
    return name if len(name) <= MAX_PLOT_LABEL else name[: MAX_PLOT_LABEL - 1] + "\u2026"


def _timestamp(moment: datetime) -> tuple[str, str]:
    """(machine-readable, human-readable) forms; aware times are shown in UTC."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
        return moment.isoformat(timespec="seconds"), moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.isoformat(timespec="seconds"), moment.strftime("%Y-%m-%d %H:%M:%S")


# --- the board ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Model:
    """One leaderboard row, normalised: whatever the board lacks is None or empty."""

    name: str
    model_id: str | None
    group: int | None
    row: Mapping[str, Any]
    disciplines: Mapping[str, float | None]


def _models(board: Mapping[str, Any]) -> list[_Model]:
    """The board's rows in its (leaderboard) order."""
    out = []
    for i, raw in enumerate(_seq(board.get("models"))):
        row = _map(raw)
        scores = {
            str(d): _num(_map(s).get("score")) for d, s in _map(row.get("disciplines")).items()
        }
        out.append(
            _Model(
                name=_text(row.get("name")) or _text(row.get("model_id")) or f"model {i + 1}",
                model_id=_text(row.get("model_id")),
                group=_int(row.get("group")),
                row=row,
                disciplines=scores,
            )
        )
    return out


def _blocks(models: Sequence[_Model]) -> list[list[_Model]]:
    """Consecutive rows of one tie group (a row without a group is a block of its own)."""
    blocks: list[list[_Model]] = []
    for model in models:
        if blocks and model.group is not None and blocks[-1][-1].group == model.group:
            blocks[-1].append(model)
        else:
            blocks.append([model])
    return blocks


def _group_colours(models: Sequence[_Model]) -> dict[int | None, str]:
    """Tie group -> colour, in order of appearance; rows without a group are grey."""
    colours: dict[int | None, str] = {None: "#7f7f7f"}
    for model in models:
        if model.group not in colours:
            colours[model.group] = GROUP_COLOURS[(len(colours) - 1) % len(GROUP_COLOURS)]
    return colours


def _tie_groups(board: Mapping[str, Any], models: Sequence[_Model]) -> list[list[str]]:
    """Groups of two or more models the data cannot order: the board's ``groups``, else
    the rows sharing a ``group``."""
    listed = [[str(n) for n in _seq(g)] for g in _seq(board.get("groups"))]
    if not listed:
        by_group: dict[int, list[str]] = {}
        for model in models:
            if model.group is not None:
                by_group.setdefault(model.group, []).append(model.name)
        listed = list(by_group.values())
    return [group for group in listed if len(group) >= 2]


def _disciplines(models: Sequence[_Model]) -> list[str]:
    return sorted({d for model in models for d in model.disciplines})


def _confidence(board: Mapping[str, Any]) -> float:
    level = _num(board.get("confidence_level"))
    return level if level is not None and 0 < level < 1 else 0.95


# --- plots --------------------------------------------------------------------------------


_SVG_TAG = re.compile(r"<[^<>]*>")
_SVG_ID = re.compile(r'(\sid="|href="#|url\(#)')
_NO_METADATA: dict[str, Any] = {"Date": None, "Creator": None, "Format": None, "Type": None}
"""No ``<metadata>``: neither the date nor matplotlib's version end up in the report."""


def _svg(figure: Figure, name: str) -> str:
    """The figure as an ``<svg>`` element for inline use: no XML prolog, no metadata, and
    every id (and reference to one) prefixed with ``name``, so that two plots in one
    document never share an id."""
    buffer = io.StringIO()
    settings: dict[RcKeyType, Any] = {**_RC, "svg.hashsalt": f"proctor-report-{name}"}
    with mpl.rc_context(settings):
        figure.savefig(buffer, format="svg", metadata=_NO_METADATA)
    text = buffer.getvalue()
    text = text[text.index("<svg") :].strip()
    # Only inside tags: text content is escaped by matplotlib and holds no "<" or ">".
    return _SVG_TAG.sub(
        lambda tag: _SVG_ID.sub(lambda ref: f"{ref.group(1)}{name}-", tag.group(0)), text
    )


def _new_figure(width: float, height: float) -> Figure:
    """A figure of its own canvas (call under the lock and ``_RC``)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasSVG(figure)
    return figure


def _label_width(names: Iterable[str]) -> float:
    """Rough width in inches of the longest plot label at the plots' font size."""
    return 0.065 * max((len(_short(n)) for n in names), default=0)


@dataclass(frozen=True, slots=True)
class _Point:
    model: _Model
    mean: float
    low: float | None
    high: float | None


def _score_points(models: Sequence[_Model]) -> tuple[str, list[_Point]]:
    """Which score the CI plot shows and its points: ``R`` when every scored row has it,
    else ``S`` for all rows (the two are on different scales and never share an axis)."""

    def points(key: str) -> list[_Point]:
        out = []
        for model in models:
            summary = _map(model.row.get(key))
            mean = _num(summary.get("mean"))
            if mean is not None:
                low, high = _num(summary.get("ci_low")), _num(summary.get("ci_high"))
                out.append(_Point(model, mean, low, high))
        return out

    relative, absolute = points("relative"), points("absolute")
    if relative and len(relative) >= len(absolute):
        return "relative", relative
    return "absolute", absolute


def _scores_plot(
    metric: str, points: Sequence[_Point], colours: Mapping[int | None, str], level: float
) -> str:
    """Horizontal points with their intervals as error bars, best at the top."""
    names = [p.model.name for p in points]
    with _MATPLOTLIB_LOCK, mpl.rc_context(_RC):
        figure = _new_figure(4.5 + _label_width(names), 1.1 + 0.32 * len(points))
        ax = figure.add_subplot()
        seen: set[int | None] = set()
        for y, point in enumerate(points):
            low = point.mean if point.low is None else min(point.low, point.mean)
            high = point.mean if point.high is None else max(point.high, point.mean)
            group = point.model.group
            ax.errorbar(
                [point.mean],
                [y],
                xerr=[[point.mean - low], [high - point.mean]],
                fmt="o",
                color=colours[group],
                ecolor=colours[group],
                elinewidth=2.0,
                capsize=3.0,
                markersize=5.0,
                label=None if group in seen or group is None else f"group {group}",
            )
            seen.add(group)
            ax.annotate(
                f"{point.mean:.1f}",
                (high, y),
                xytext=(5, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color="#333333",
            )
        if metric == "relative":
            ax.axvline(100.0, color="#999999", linewidth=0.8, linestyle="--", zorder=0)
        ax.set_yticks(range(len(points)), [_short(n) for n in names])
        ax.set_ylim(len(points) - 0.5, -0.5)
        ax.margins(x=0.12)
        label = "R (anchor = 100)" if metric == "relative" else "S (0\u2013100)"
        ax.set_xlabel(f"{label}, {_percent(level)} CI")
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if len(seen - {None}) > 1:
            ax.legend(
                title="tie group",
                loc="upper left",
                bbox_to_anchor=(1.02, 1.0),
                frameon=False,
                fontsize=8,
                title_fontsize=8,
            )
        return _svg(figure, "scores")


def _heatmap(models: Sequence[_Model], disciplines: Sequence[str]) -> str:
    """Models (rows, leaderboard order) by disciplines, annotated, with a colour bar."""
    values = np.array(
        [
            [np.nan if (v := m.disciplines.get(d)) is None else v for d in disciplines]
            for m in models
        ],
        dtype=float,
    )
    names = [m.name for m in models]
    width = 2.2 + _label_width(names) + 0.75 * len(disciplines)
    with _MATPLOTLIB_LOCK, mpl.rc_context(_RC):
        figure = _new_figure(width, 1.6 + 0.34 * len(models))
        cmap = mpl.colormaps["viridis"].with_extremes(bad="#e6e6e6")
        norm = Normalize(vmin=0.0, vmax=DISCIPLINE_SCALE)
        ax = figure.add_subplot()
        # Vector cells (not imshow, which embeds a bitmap), a white line between them.
        mesh = ax.pcolormesh(
            np.ma.masked_invalid(values), cmap=cmap, norm=norm, edgecolors="#ffffff", linewidth=1.5
        )
        fontsize = 8.0 if len(disciplines) <= 12 else 6.5
        for i in range(len(models)):
            for j in range(len(disciplines)):
                value = values[i, j]
                if math.isnan(value):
                    ax.text(j + 0.5, i + 0.5, MISSING, ha="center", va="center", color="#555555")
                    continue
                r, g, b, _ = cmap(norm(value))
                ink = "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "#ffffff"
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    f"{value:.1f}",
                    ha="center",
                    va="center",
                    color=ink,
                    fontsize=fontsize,
                )
        ax.set_xticks(np.arange(len(disciplines)) + 0.5, list(disciplines))
        ax.set_yticks(np.arange(len(models)) + 0.5, [_short(n) for n in names])
        ax.set_ylim(len(models), 0)
        ax.tick_params(axis="x", labelrotation=35, length=0)
        ax.tick_params(axis="y", length=0)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
        for spine in ax.spines.values():
            spine.set_visible(False)
        # The colour bar's gradient is an embedded PNG (a data: URI), as matplotlib draws it.
        colorbar = figure.colorbar(mesh, ax=ax, shrink=0.9, pad=0.02)
        colorbar.set_label(f"score (0\u2013{DISCIPLINE_SCALE:g})")
        return _svg(figure, "heatmap")


# --- sections -----------------------------------------------------------------------------


def _meta_table(pairs: Sequence[tuple[str, str]], css: str = "meta") -> str:
    """A two-column table; the keys and values are HTML already."""
    rows = "".join(f'<tr><th scope="row">{k}</th><td>{v}</td></tr>' for k, v in pairs)
    return f'<table class="{css}"><tbody>{rows}</tbody></table>'


def _config_value(value: object) -> str:
    if value is None:
        return MISSING
    if isinstance(value, float):
        return _esc(f"{value:g}")
    if isinstance(value, list | tuple):
        return _esc(", ".join(str(v) for v in value))
    return _esc(value)


def _header(
    board: Mapping[str, Any],
    title: str,
    subtitle: str | None,
    config: Mapping[str, Any] | None,
    generated_at: datetime,
) -> str:
    machine, human = _timestamp(generated_at)
    parts = [f"<h1>{_esc(title)}</h1>"]
    if subtitle:
        parts.append(f'<p class="subtitle">{_esc(subtitle)}</p>')
    judge, version = _text(board.get("judge")), _text(board.get("prompt_version"))
    anchor = _map(board.get("anchor"))
    anchor_name = _text(anchor.get("name")) or _text(anchor.get("model_id"))
    if anchor_name is None:
        anchor_text = "none (no relative scores)"
    elif anchor.get("designated") is True:
        anchor_text = f"{_esc(anchor_name)} (designated)"
    elif anchor.get("designated") is False:
        anchor_text = f"{_esc(anchor_name)} (not designated: the top usable model)"
    else:
        anchor_text = _esc(anchor_name)
    note = _text(anchor.get("note"))
    if note:
        anchor_text += f' <span class="note">\u2014 {_esc(note)}</span>'
    threshold = _num(board.get("tie_threshold"))
    pairs = [
        ("Generated", f'<time datetime="{_esc(machine)}">{_esc(human)}</time>'),
        (
            "Judge",
            (_esc(judge) if judge else MISSING)
            + (f" (prompt version {_esc(version)})" if version else ""),
        ),
        ("Anchor of R", anchor_text),
        ("Confidence level", _percent(_confidence(board))),
    ]
    if threshold is not None:
        pairs.append(
            ("Tie threshold", f"neighbours are separated when P(beats next) \u2265 {threshold:g}")
        )
    parts.append(_meta_table(pairs))
    if config:
        parts.append("<h2>Configuration</h2>")
        parts.append(
            _meta_table([(_esc(k), _config_value(v)) for k, v in config.items()], "meta config")
        )
    return "<header>" + "".join(parts) + "</header>"


def _is_anchor(model: _Model, anchor: Mapping[str, Any]) -> bool:
    anchor_id, anchor_name = _text(anchor.get("model_id")), _text(anchor.get("name"))
    if anchor_id is not None and model.model_id is not None:
        return anchor_id == model.model_id
    return anchor_name is not None and anchor_name == model.name


def _board_table(board: Mapping[str, Any], models: Sequence[_Model]) -> str:
    level = _percent(_confidence(board))
    colours = _group_colours(models)
    anchor = _map(board.get("anchor"))
    with_cost = any(
        _num(_map(m.row.get("cost")).get("usd_per_1k_items")) is not None for m in models
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
    head = "".join(f'<th scope="col" class="{c}">{_esc(h)}</th>' for h, c in headers)
    bodies = []
    for block in _blocks(models):
        rows = []
        for model in block:
            row = model.row
            latency = _map(row.get("latency"))
            p50, p95 = _fmt(latency.get("median_s"), 2), _fmt(latency.get("p95_s"), 2)
            group = (
                MISSING
                if model.group is None
                else f'<span class="swatch" style="background:{colours[model.group]}"></span>'
                f"{model.group}"
            )
            label = _esc(model.name)
            if _is_anchor(model, anchor):
                label += ' <span class="tag">anchor</span>'
            organisation = _text(row.get("organisation"))
            if organisation:
                label += f' <span class="org">{_esc(organisation)}</span>'
            position = _int(row.get("position"))
            sessions = _int(row.get("sessions"))
            cells = [
                (MISSING if position is None else str(position), "num"),
                (group, "group"),
                (_rank_range(row.get("rank_range")), "num"),
                (label, "model"),
                (_interval(row.get("relative")), "num"),
                (_interval(row.get("absolute")), "num"),
                (MISSING if sessions is None else str(sessions), "num"),
                (_fmt(row.get("beats_next"), 2), "num"),
                (MISSING if p50 == p95 == MISSING else f"{p50} / {p95}", "num"),
            ]
            if with_cost:
                cells.append((_usd(_map(row.get("cost")).get("usd_per_1k_items")), "num"))
            rows.append("<tr>" + "".join(f'<td class="{c}">{v}</td>' for v, c in cells) + "</tr>")
        tied = ' class="tied"' if len(block) >= 2 else ""
        bodies.append(f"<tbody{tied}>{''.join(rows)}</tbody>")
    return (
        f'<table class="board"><thead><tr>{head}</tr></thead>{"".join(bodies)}</table>'
        if models
        else '<p class="note">The board has no models.</p>'
    )


def _ties_sentence(board: Mapping[str, Any], models: Sequence[_Model]) -> str:
    groups = _tie_groups(board, models)
    if not groups:
        if len(models) < 2:
            return ""
        return '<p class="ties">The data order every pair of neighbouring models.</p>'
    items = "".join(
        f"<li>{_join_names([_esc(n) for n in group])} cannot be ordered by the data.</li>"
        for group in groups
    )
    return (
        '<div class="ties"><p>Models in one tie group (shaded) cannot be ordered by the data; '
        f"their order in the table is that of the mean S only:</p><ul>{items}</ul></div>"
    )


def _leaderboard(board: Mapping[str, Any], models: Sequence[_Model]) -> str:
    level = _percent(_confidence(board))
    return (
        '<section id="leaderboard"><h2>Leaderboard</h2>'
        + _board_table(board, models)
        + _ties_sentence(board, models)
        + '<p class="note">R: score relative to the anchor (anchor = 100). S: absolute score '
        f"(0\u2013100). Intervals are bootstrap {level} confidence intervals; the rank range "
        "is the model's range of ranks over the bootstrap replicates; P(beats next) is the "
        "share of replicates in which the model scores above the next one down.</p></section>"
    )


def _plots(board: Mapping[str, Any], models: Sequence[_Model]) -> str:
    level = _confidence(board)
    parts = ['<section id="plots"><h2>Plots</h2>']
    metric, points = _score_points(models)
    if points:
        svg = _scores_plot(metric, points, _group_colours(models), level)
        what = "relative score R" if metric == "relative" else "absolute score S"
        caption = (
            f"Scores with CI bars: the {what} of each model with its {_percent(level)} "
            "confidence interval, best at the top, coloured by tie group."
        )
        if metric == "absolute" and any(_map(m.row.get("relative")) for m in models):
            caption += " S is shown because not every model has a relative score."
        left_out = len(models) - len(points)
        if left_out:
            caption += f" {left_out} model(s) without a score are left out."
        parts.append(f'<figure id="scores-plot">{svg}<figcaption>{caption}</figcaption></figure>')
    else:
        parts.append('<p class="note">No scores to plot.</p>')
    disciplines = _disciplines(models)
    if disciplines and models:
        svg = _heatmap(models, disciplines)
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
    found = _map(board.get("diagnostics"))
    if not found:
        return ""
    rsa, inconsistency = _map(found.get("rsa")), _map(found.get("capability_inconsistency"))
    names = [str(n) for n in _seq(found.get("models"))]
    names += [str(n) for n in (*rsa, *inconsistency) if str(n) not in names]
    index = _fmt(found.get("anisotropy_index"), 3)
    rows = "".join(
        f"<tr><td>{_esc(name)}</td>"
        f'<td class="num">{MISSING if (a := _int(rsa.get(name))) is None else a}</td>'
        f'<td class="num">{_fmt(inconsistency.get(name), 3)}</td></tr>'
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


def _contamination(models: Sequence[_Model]) -> str:
    rows = []
    for model in models:
        found = _map(model.row.get("contamination"))
        replay, gap = _map(found.get("replay")), _map(found.get("generalisation_gap"))
        if not replay and not gap:
            continue
        rate, low, high = (_num(replay.get(k)) for k in ("rate", "ci_low", "ci_high"))
        replay_text = MISSING
        if rate is not None:
            replay_text = f"{rate * 100:.1f}%"
            if low is not None and high is not None:
                replay_text += f' <span class="ci">[{low * 100:.1f}, {high * 100:.1f}]</span>'
            hits, items = _int(replay.get("near_exact")), _int(replay.get("items"))
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
            _fmt(gap.get("public")),
            _fmt(gap.get("anchor_set")),
            _fmt(gap.get("gap")),
            _fmt(gap.get("excess")),
            flag,
            _fmt(gap.get("reported_score")),
        ]
        rows.append(
            f"<tr><td>{_esc(model.name)}</td>"
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


# --- the document -------------------------------------------------------------------------


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
    models = _models(board)
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
        f"<title>{_esc(title)}</title>\n<style>{css}</style>\n</head>\n"
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
