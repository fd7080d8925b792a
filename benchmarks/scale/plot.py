"""The scale harness's figures as one SVG: four log-x panels (idle CPU and CPU per task against workers, CPU per task
against clients, bytes per queued task against the queue), each run a curve, the targets dashed in red, and the
other systems' figures (`--others`, JSON written by `scale.others`) as labelled levels: the lab plot of the notes.
The Scale page's figure, for a reader, is `scale.figure`'s. No chart library.

    cd benchmarks && ../.venv/bin/python -m scale.plot scale/results/before.json scale/results/workers.json \
        --others scale/results/others.json --svg scale/results/lab.svg
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the first run grey (before), the next ones in colour (none the targets' red, nor the other systems' orange)
COLOURS = ["#999999", "#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#e377c2"]
RED, ORANGE, PURPLE = "#d62728", "#f58518", "#8c564b"
WIDTH, HEIGHT, PAD = 400, 270, 54


@dataclass
class Panel:
    title: str
    axis: str  #: the runs' key holding the rows
    x_key: str
    x_label: str
    y_key: str
    target: Callable[[list[dict[str, Any]]], list[tuple[float, float]]] | None  #: the target's points, from a row set
    target_text: str
    levels: list[tuple[float, str, str]]  #: (value, text, colour) of other systems


def _target_per_1000(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    return [(row["workers"], row["workers"] / 1000) for row in rows]


def _times(key: str, factor: float) -> Callable[[list[dict[str, Any]]], list[tuple[float, float]]]:
    def target(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
        first = rows[0]["cpu_per_task_us"]
        return [(row[key], first * factor) for row in rows]

    return target


def _flat(value: float) -> Callable[[list[dict[str, Any]]], list[tuple[float, float]]]:
    def target(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
        return [(row["queued"], value) for row in rows]

    return target


def panels(others: dict[str, Any]) -> list[Panel]:
    per_task: list[tuple[float, str, str]] = []
    memory: list[tuple[float, str, str]] = []
    for name, figures in others.items():
        colour = ORANGE if "dask" in name.lower() else PURPLE
        if figures.get("cpu_per_task_us"):
            per_task.append((figures["cpu_per_task_us"], f"{name}: {figures['cpu_per_task_us']:.0f} us", colour))
        if figures.get("bytes_per_queued_task"):
            memory.append((figures["bytes_per_queued_task"], f"{name}: {figures['bytes_per_queued_task']:.0f} B",
                           colour))  # fmt: skip
    return [
        Panel("idle CPU, % of a core", "workers", "workers", "heartbeating workers", "idle_cpu_percent",
              _target_per_1000, "target: 1% per 1,000 workers", []),
        Panel("scheduler CPU per task, us", "workers", "workers", "workers (1 client)", "cpu_per_task_us",
              _times("workers", 1.2), "target: 1.2x the 100 workers'", per_task),
        Panel("scheduler CPU per task, us", "clients", "clients", "clients (100 workers)", "cpu_per_task_us",
              _times("clients", 1.25), "target: 1.25x one client's", per_task),
        Panel("scheduler bytes per queued task", "queue", "queued", "tasks queued", "bytes_per_queued_task",
              _flat(700), "target: 700 B", memory),
    ]  # fmt: skip


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1e6:g}M"
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:,.0f}"


def _panel(panel: Panel, runs: list[dict[str, Any]], left: float, top: float) -> list[str]:
    # a row without the figure (a scheduler that fell behind its heartbeats ran no tasks) is left out
    runs = [{**run, panel.axis: [row for row in run.get(panel.axis, []) if panel.y_key in row]} for run in runs]
    series = [(run, COLOURS[index % len(COLOURS)]) for index, run in enumerate(runs) if run.get(panel.axis)]
    if not series:
        return []
    xs = sorted({row[panel.x_key] for run, _ in series for row in run[panel.axis]})
    target = panel.target(series[-1][0][panel.axis]) if panel.target else []
    values = [row[panel.y_key] for run, _ in series for row in run[panel.axis]]
    values += [value for _, value in target] + [value for value, _, _ in panel.levels]
    y_top = max(values) * 1.15
    low = math.log10(xs[0])
    high = math.log10(xs[-1]) if len(xs) > 1 else low + 1

    def x(value: float) -> float:
        return left + PAD + (math.log10(value) - low) / (high - low) * (WIDTH - 2 * PAD)

    def y(value: float) -> float:
        return top + HEIGHT - PAD - value / y_top * (HEIGHT - 2 * PAD)

    bottom, right = top + HEIGHT - PAD, left + WIDTH - PAD
    parts = [
        f'<line x1="{left + PAD}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{left + PAD}" y1="{top + PAD}" x2="{left + PAD}" y2="{bottom}" stroke="black"/>',
        f'<text x="{left + PAD}" y="{top + PAD - 22}" font-weight="bold">{panel.title}</text>',
        f'<text x="{left + WIDTH / 2}" y="{bottom + 30}" text-anchor="middle">{panel.x_label}</text>',
    ]
    for tick in (y_top / 4, y_top / 2, 3 * y_top / 4):
        parts.append(f'<text x="{left + PAD - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" fill="#666">'
                     f"{tick:.3g}</text>")  # fmt: skip
    for value in xs:
        parts.append(f'<text x="{x(value):.1f}" y="{bottom + 14}" text-anchor="middle">{_label(value)}</text>')
    if target:
        line = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in target)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{RED}" stroke-dasharray="5,3"/>')
    for value, text, colour in panel.levels:
        parts.append(f'<line x1="{left + PAD}" y1="{y(value):.1f}" x2="{right}" y2="{y(value):.1f}" stroke="{colour}" '
                     f'stroke-dasharray="2,3"/><text x="{right}" y="{y(value) - 3:.1f}" text-anchor="end" '
                     f'fill="{colour}">{text}</text>')  # fmt: skip
    legend = [(colour, "", run.get("label") or f"run {index + 1}") for index, (run, colour) in enumerate(series)]
    if target:
        legend.append((RED, "5,3", panel.target_text))
    for run, colour in series:
        rows = run[panel.axis]
        line = " ".join(f"{x(row[panel.x_key]):.1f},{y(row[panel.y_key]):.1f}" for row in rows)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for row in rows:
            px, py, value = x(row[panel.x_key]), y(row[panel.y_key]), row[panel.y_key]
            parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>')
            parts.append(f'<text x="{px + 4:.1f}" y="{py - 6:.1f}" fill="{colour}">{value:.3g}</text>')
    for number, (colour, dash, text) in enumerate(legend):
        ly, lx = top + PAD - 8 + 13 * number, left + PAD
        parts.append(f'<line x1="{lx + 8}" y1="{ly - 4}" x2="{lx + 28}" y2="{ly - 4}" stroke="{colour}" '
                     f'stroke-width="2" stroke-dasharray="{dash}"/>')  # fmt: skip
        parts.append(f'<text x="{lx + 32}" y="{ly}">{text}</text>')
    return parts


def svg(runs: list[dict[str, Any]], others: dict[str, Any]) -> str:
    chosen = panels(others)
    rows = (len(chosen) + 1) // 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * WIDTH}" height="{rows * (HEIGHT + 20)}" '
             'font-family="sans-serif" font-size="11">']  # fmt: skip
    for index, panel in enumerate(chosen):
        parts += _panel(panel, runs, (index % 2) * WIDTH, (index // 2) * (HEIGHT + 20) + 20)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="JSON files of `python -m scale`, the earliest first")
    parser.add_argument("--others", type=Path, help="other systems' figures (scale.others)")
    parser.add_argument("--svg", type=Path, required=True)
    arguments = parser.parse_args()
    runs = [json.loads(path.read_text()) for path in arguments.runs]
    others = json.loads(arguments.others.read_text()) if arguments.others else {}
    arguments.svg.write_text(svg(runs, others))
    print(f"plot: {arguments.svg}")


if __name__ == "__main__":
    main()
