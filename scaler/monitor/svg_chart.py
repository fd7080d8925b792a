"""Charts of the run report as inline SVG text (pure: strings in, a string out; no script, no network).

Three shapes, each with labelled axes and units: a timeline (one row per worker lane, one bar per task), a
step chart (values over time, one line per series) and a range chart (per function: a bar from the median to the
99th percentile with ticks at the percentiles, on a duration axis). Sizes are in CSS pixels; the SVG keeps its
aspect ratio when the page scales it, so its text is never stretched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from scaler.monitor.run_stats import Timeline

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac", "#ff9da7")
FAILED_COLOUR = "#e15759"
WIDTH = 960
LEFT, RIGHT, TOP, BOTTOM = 170, 20, 12, 42  #: margins around the plot area
ROW_HEIGHT = 14
FONT = 'font-family="sans-serif" font-size="11"'


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]  #: (x, y), x ascending


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) from at or below `low` to at or above `high`."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low] if math.isfinite(low) else [0.0]
    raw = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(n * step, 12) for n in range(first, last + 1)]


def format_seconds(seconds: float) -> str:
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min"


def colour_of(names: Sequence[str]) -> dict[str, str]:
    return {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(sorted(set(names)))}


def _frame(height: int, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
    ]


def _x_axis(parts: list[str], ticks: list[float], x_of: _Scale, y: float, label: str, fmt: str = "{:g}") -> None:
    parts.append(f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="#333"/>')
    for tick in ticks:
        x = x_of(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle" {FONT}>{escape(fmt.format(tick))}</text>')
    middle = (LEFT + WIDTH - RIGHT) / 2
    parts.append(
        f'<text x="{middle}" y="{y + 32}" text-anchor="middle" {FONT} class="axis-label">{escape(label)}</text>'
    )


class _Scale:
    """A linear map from data values to pixels."""

    def __init__(self, low: float, high: float, to_low: float, to_high: float) -> None:
        self.low, self.span = low, (high - low) or 1.0
        self.to_low, self.to_span = to_low, to_high - to_low

    def __call__(self, value: float) -> float:
        return self.to_low + (value - self.low) / self.span * self.to_span


def timeline_svg(layout: Timeline, colours: dict[str, str], origin: float) -> str:
    """One row per worker lane; a bar per task from its start to its end, in seconds since `origin`."""
    rows = max(1, len(layout.rows))
    height = TOP + rows * ROW_HEIGHT + BOTTOM
    parts = _frame(height, "task timeline per worker")
    end = max(layout.end - origin, 1e-3)
    ticks = nice_ticks(0.0, end)
    x_of = _Scale(0.0, max(end, ticks[-1]), LEFT, WIDTH - RIGHT)
    for row, label in enumerate(layout.rows):
        if label:
            y = TOP + row * ROW_HEIGHT + ROW_HEIGHT - 3
            parts.append(f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" {FONT}>{escape(_short(label))}</text>')
    for placed in layout.placed:
        bar = placed.bar
        # a task that began before the report shows from the axis' start
        x0, x1 = x_of(max(0.0, bar.start - origin)), x_of(bar.end - origin)
        colour = FAILED_COLOUR if bar.failed else colours.get(bar.function_name, PALETTE[0])
        title = f"{bar.function_name}: {format_seconds(bar.end - bar.start)}" + (" (failed)" if bar.failed else "")
        parts.append(
            f'<rect class="bar" x="{x0:.1f}" y="{TOP + placed.row * ROW_HEIGHT + 1}" width="{max(1.0, x1 - x0):.1f}" '
            f'height="{ROW_HEIGHT - 2}" fill="{colour}"><title>{escape(title)}</title></rect>'
        )
    _x_axis(parts, ticks, x_of, TOP + rows * ROW_HEIGHT, "seconds since the report began")
    parts.append("</svg>")
    return "".join(parts)


def step_svg(series: Sequence[Series], y_label: str, x_label: str, height: int = 220) -> str:
    """Values over time as step lines, one per series, with a legend and both axes labelled."""
    xs = [x for s in series for x, _y in s.points] or [0.0, 1.0]
    ys = [y for s in series for _x, y in s.points] or [0.0]
    x_ticks, y_ticks = nice_ticks(min(xs), max(max(xs), min(xs) + 1e-3)), nice_ticks(0.0, max(1.0, max(ys)), 5)
    x_of = _Scale(x_ticks[0], x_ticks[-1], LEFT, WIDTH - RIGHT)
    bottom = height - BOTTOM
    y_of = _Scale(0.0, y_ticks[-1], bottom, TOP + 14)
    parts = _frame(height, y_label)
    for tick in y_ticks:
        y = y_of(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{tick:g}</text>')
    parts.append(
        f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end" {FONT} class="axis-label">{escape(y_label)}</text>'
    )
    for index, one in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        path = _step_path(one.points, x_of, y_of)
        parts.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        legend_x = LEFT + 10 + index * 160
        parts.append(f'<rect x="{legend_x}" y="{TOP}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="{TOP + 9}" {FONT}>{escape(_short(one.label))}</text>')
    _x_axis(parts, x_ticks, x_of, bottom, x_label)
    parts.append("</svg>")
    return "".join(parts)


def _step_path(points: Sequence[tuple[float, float]], x_of: _Scale, y_of: _Scale) -> str:
    """Hold each value until the next point, then step to the next value."""
    if not points:
        return "M0,0"
    x, y = points[0]
    commands = [f"M{x_of(x):.1f},{y_of(y):.1f}"]
    commands.extend(f"H{x_of(x):.1f}V{y_of(y):.1f}" for x, y in points[1:])
    return " ".join(commands)


def range_svg(rows: Sequence[tuple[str, float, float, float]], colours: dict[str, str]) -> str:
    """Per function (name, p50, p90, p99): a bar from p50 to p99 with a tick at p90, on a duration axis."""
    height = TOP + max(1, len(rows)) * 20 + BOTTOM
    parts = _frame(height, "task durations per function")
    top = max((p99 for _n, _a, _b, p99 in rows), default=1.0)
    ticks = nice_ticks(0.0, max(top, 1e-6))
    x_of = _Scale(0.0, ticks[-1], LEFT, WIDTH - RIGHT)
    for index, (name, p50, p90, p99) in enumerate(rows):
        y = TOP + index * 20
        colour = colours.get(name, PALETTE[0])
        parts.append(f'<text x="{LEFT - 6}" y="{y + 13}" text-anchor="end" {FONT}>{escape(_short(name))}</text>')
        x50, x90, x99 = x_of(p50), x_of(p90), x_of(p99)
        parts.append(f'<rect x="{x50:.1f}" y="{y + 4}" width="{max(1.0, x99 - x50):.1f}" height="10" fill="{colour}" '
                     f'opacity="0.6"/>')  # fmt: skip
        for x in (x50, x90, x99):
            parts.append(f'<line x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + 16}" stroke="#222"/>')
    _x_axis(parts, ticks, x_of, height - BOTTOM, "task duration, seconds (bar: median to 99th percentile, tick: 90th)")
    parts.append("</svg>")
    return "".join(parts)


def _short(text: str, limit: int = 26) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
