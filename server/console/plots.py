"""SVG charts drawn on the server (pure functions, no I/O, no script).

Every function returns ``Markup`` of one ``<svg class="chart">``: geometry as attributes
(the page's policy forbids inline styles), every label escaped (labels are model names,
disciplines and other hostile text), and a ``<title>`` describing the chart for screen
readers. Values are plain floats; None or NaN draws nothing for that point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from markupsafe import Markup, escape

WIDTH = 640
ROW_HEIGHT = 22
LABEL_WIDTH = 170
PAD = 12
BAR_COLOUR = "#2456a6"
INTERVAL_COLOUR = "#5b6473"


@dataclass(frozen=True, slots=True)
class Interval:
    """A value with its interval, drawn as a dot on a bar (``interval_chart``)."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _svg(width: float, height: float, title: str, body: list[str]) -> Markup:
    head = (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}">'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _text(x: float, y: float, text: object, anchor: str = "start") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(str(text))}</text>'


def _short(label: str, limit: int = 26) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _scale(lo: float, hi: float, left: float, right: float) -> tuple[float, float]:
    """Slope and offset mapping [lo, hi] onto [left, right]."""
    span = hi - lo if hi > lo else 1.0
    slope = (right - left) / span
    return slope, left - lo * slope


def interval_chart(
    rows: Sequence[Interval], *, lo: float, hi: float, title: str, unit: str = ""
) -> Markup:
    """One row per ``Interval``: a dot at the value and a bar from low to high on a shared
    axis from ``lo`` to ``hi`` (e.g. scores with their 95% intervals)."""
    height = PAD * 2 + ROW_HEIGHT * max(len(rows), 1) + 18
    slope, offset = _scale(lo, hi, LABEL_WIDTH, WIDTH - PAD - 40)
    body = []
    for tick in _ticks(lo, hi):
        x = tick * slope + offset
        body.append(
            f'<line x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{height - 18}" stroke="#e3e7ed"/>'
        )
        body.append(_text(x, height - 4, f"{tick:g}{unit}", "middle"))
    for i, row in enumerate(rows):
        y = PAD + ROW_HEIGHT * i + ROW_HEIGHT / 2
        body.append(_text(LABEL_WIDTH - 8, y + 4, _short(row.label), "end"))
        if _finite(row.low) and _finite(row.high):
            x1, x2 = row.low * slope + offset, row.high * slope + offset
            body.append(
                f'<line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" '
                f'stroke="{INTERVAL_COLOUR}" stroke-width="3" stroke-linecap="round"/>'
            )
        if _finite(row.value):
            x = row.value * slope + offset
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{BAR_COLOUR}"/>')
            body.append(_text(WIDTH - PAD, y + 4, f"{row.value:.1f}", "end"))
    return _svg(WIDTH, height, title, body)


def bar_chart(bars: Sequence[tuple[str, float | None]], *, title: str, unit: str = "") -> Markup:
    """Vertical bars, one per ``(label, value)`` (e.g. counts per bin); values ≥ 0."""
    height = 220
    base = height - 40
    finite = [v for _, v in bars if v is not None and math.isfinite(v)]
    top = max(finite, default=0.0) or 1.0
    n = max(len(bars), 1)
    step = (WIDTH - 2 * PAD - 40) / n
    body = [f'<line x1="{PAD + 40}" y1="{base}" x2="{WIDTH - PAD}" y2="{base}" stroke="#8a93a3"/>']
    body.append(_text(PAD + 34, PAD + 8, f"{top:g}{unit}", "end"))
    body.append(_text(PAD + 34, base, "0", "end"))
    for i, (label, value) in enumerate(bars):
        x = PAD + 40 + i * step
        if _finite(value):
            h = (base - PAD) * max(value, 0.0) / top
            body.append(
                f'<rect x="{x + step * 0.15:.1f}" y="{base - h:.1f}" width="{step * 0.7:.1f}" '
                f'height="{h:.1f}" fill="{BAR_COLOUR}"><title>{escape(label)}: '
                f"{value:g}{escape(unit)}</title></rect>"
            )
        body.append(_text(x + step / 2, base + 14, _short(label, 12), "middle"))
    return _svg(WIDTH, height, title, body)


def line_chart(
    points: Sequence[Interval], *, lo: float, hi: float, title: str, unit: str = ""
) -> Markup:
    """Values in order (e.g. a model's session scores over time) joined by a line, each
    with its interval as a vertical bar; labels on the x axis (thinned when crowded)."""
    height = 240
    left, right, top, base = PAD + 40, WIDTH - PAD, PAD, height - 40
    slope, offset = _scale(lo, hi, base, top)
    n = len(points)
    step = (right - left) / max(n - 1, 1)
    body = []
    for tick in _ticks(lo, hi):
        y = tick * slope + offset
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e3e7ed"/>')
        body.append(_text(left - 6, y + 4, f"{tick:g}{unit}", "end"))
    path: list[str] = []
    every = max(1, math.ceil(n / 8))
    for i, point in enumerate(points):
        x = left + i * step if n > 1 else (left + right) / 2
        if _finite(point.low) and _finite(point.high):
            y1, y2 = point.low * slope + offset, point.high * slope + offset
            body.append(
                f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" '
                f'stroke="{INTERVAL_COLOUR}" stroke-width="2"/>'
            )
        if _finite(point.value):
            y = point.value * slope + offset
            path.append(f"{'M' if not path else 'L'}{x:.1f},{y:.1f}")
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{BAR_COLOUR}"><title>'
                f"{escape(point.label)}: {point.value:.1f}{escape(unit)}</title></circle>"
            )
        if i % every == 0:
            body.append(_text(x, base + 16, _short(point.label, 12), "middle"))
    if len(path) > 1:
        body.insert(0, f'<path d="{" ".join(path)}" fill="none" stroke="{BAR_COLOUR}"/>')
    return _svg(WIDTH, height, title, body)


def heatmap(
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    lo: float,
    hi: float,
    title: str,
) -> Markup:
    """A table of values shaded from white (``lo``) to blue (``hi``), value in each cell
    (e.g. models × disciplines)."""
    cell_w = max(44.0, min(90.0, (WIDTH - LABEL_WIDTH - PAD) / max(len(columns), 1)))
    cell_h = 24
    width = LABEL_WIDTH + cell_w * len(columns) + PAD
    height = 70 + cell_h * len(rows) + PAD
    body = []
    for j, column in enumerate(columns):
        x = LABEL_WIDTH + j * cell_w + cell_w / 2
        body.append(
            f'<text x="{x:.1f}" y="62" text-anchor="start" '
            f'transform="rotate(-35 {x:.1f} 62)">{escape(_short(column, 18))}</text>'
        )
    for i, (label, row) in enumerate(zip(rows, values, strict=True)):
        y = 70 + i * cell_h
        body.append(_text(LABEL_WIDTH - 8, y + 16, _short(label), "end"))
        for j, value in enumerate(row):
            x = LABEL_WIDTH + j * cell_w
            shade = _shade(value, lo, hi)
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{cell_w - 2:.1f}" height="{cell_h - 2}" '
                f'fill="{shade}"/>'
            )
            if _finite(value):
                ink = "#ffffff" if _fraction(value, lo, hi) > 0.6 else "#1d2430"
                body.append(
                    f'<text x="{x + cell_w / 2:.1f}" y="{y + 16}" text-anchor="middle" '
                    f'fill="{ink}">{value:.0f}</text>'
                )
    return _svg(width, height, title, body)


def _fraction(value: float | None, lo: float, hi: float) -> float:
    if not _finite(value) or hi <= lo:
        return 0.0
    return min(max((value - lo) / (hi - lo), 0.0), 1.0)


def _shade(value: float | None, lo: float, hi: float) -> str:
    """White to Proctor blue, grey for no value."""
    if not _finite(value):
        return "#eceff3"
    f = _fraction(value, lo, hi)
    r, g, b = (round(255 + (c - 255) * f) for c in (36, 86, 166))
    return f"#{r:02x}{g:02x}{b:02x}"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks from ``lo`` to ``hi``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + k * step, 10) for k in range(int((hi - first) / step + 1e-9) + 1)]
