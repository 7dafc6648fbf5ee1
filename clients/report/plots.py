"""The report's plots as inline SVG: the scores with their intervals, and the
per-discipline heatmap.

Plots are drawn with matplotlib's object API (``Figure`` and the SVG canvas, never pyplot),
text kept as SVG ``<text>`` (``svg.fonttype: none``, mathtext off: a ``$`` in a name is
drawn as it is); the heatmap's cells are vectors, only the colour bar's gradient is an
inline PNG (a ``data:`` URI). Ids in the SVG are prefixed per plot, so the document's ids
stay unique. matplotlib reads some settings from its global ``rcParams`` while drawing
(the salt of the SVG ids, the font type); they are set with ``rc_context`` under a module
lock, so concurrent reports do not interfere (other matplotlib users in the process may
see them while a plot is drawn), and the output is byte-identical for the same board.
"""

from __future__ import annotations

import io
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType

from clients.report.board import ModelRow, as_mapping, as_number
from clients.report.formatting import MISSING, percent_text

DISCIPLINE_SCALE = 10.0
"""Per-discipline scores are on a 0-10 scale (LLMEval-Fair, tables 1 and 8)."""

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


def group_colours(models: Sequence[ModelRow]) -> dict[int | None, str]:
    """Tie group -> colour, in order of appearance; rows without a group are grey."""
    colours: dict[int | None, str] = {None: "#7f7f7f"}
    for model in models:
        if model.group not in colours:
            colours[model.group] = GROUP_COLOURS[(len(colours) - 1) % len(GROUP_COLOURS)]
    return colours


def _short(name: str) -> str:
    return name if len(name) <= MAX_PLOT_LABEL else name[: MAX_PLOT_LABEL - 1] + "\u2026"


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
class ScorePoint:
    model: ModelRow
    mean: float
    low: float | None
    high: float | None


def score_points(models: Sequence[ModelRow]) -> tuple[str, list[ScorePoint]]:
    """Which score the CI plot shows and its points: ``R`` when every scored row has it,
    else ``S`` for all rows (the two are on different scales and never share an axis)."""

    def points(key: str) -> list[ScorePoint]:
        out = []
        for model in models:
            summary = as_mapping(model.row.get(key))
            mean = as_number(summary.get("mean"))
            if mean is not None:
                low, high = as_number(summary.get("ci_low")), as_number(summary.get("ci_high"))
                out.append(ScorePoint(model, mean, low, high))
        return out

    relative, absolute = points("relative"), points("absolute")
    if relative and len(relative) >= len(absolute):
        return "relative", relative
    return "absolute", absolute


def scores_plot(
    metric: str, points: Sequence[ScorePoint], colours: Mapping[int | None, str], level: float
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
        ax.set_xlabel(f"{label}, {percent_text(level)} CI")
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


def discipline_heatmap(models: Sequence[ModelRow], disciplines: Sequence[str]) -> str:
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
