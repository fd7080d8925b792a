"""The Scale page's figure (docs/guide/scale.md): what one scheduler holds at 100, 1,000 and 10,000 workers, drawn
for a reader from one run of the harness: its CPU with nothing to run, its CPU per task, its memory, and what a
queued task adds. Bars with their values written once, plain labels, no run names. No chart library.

    cd benchmarks && ../.venv/bin/python -m scale.figure scale/results/workers-in-turn.json \
        --queue scale/results/queue.json --svg ../docs/images/scale.svg

`scale.plot` draws the harness's lab plot (every run against the targets) for the notes.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The cluster sizes the figure shows.
WORKERS = (100, 1000, 10000)
WIDTH, PANEL_WIDTH, PANEL_TOP, BAR_AREA = 1020, 340, 100, 190
BAR, COLOUR, MUTED = 46, "#1f77b4", "#555555"


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    key: str
    value_text: str  #: how a bar's value is written, from the value (`{value}`) and its row (`{row[...]}`)
    note: str = ""  #: a second line under each bar, from its row


PANELS = (
    Panel("CPU with nothing to run", "% of one core", "idle_cpu_percent", "{value:.1f}%"),
    Panel("CPU per task", "microseconds of its CPU (and tasks a second)", "cpu_per_task_us", "{value:.0f} \u00b5s",
          "{tasks_per_second:,.0f} tasks/s"),
    Panel("Memory, nothing queued", "MB held by the scheduler", "rss_mb_idle", "{value:.0f} MB"),
)  # fmt: skip


def _workers_label(workers: int) -> str:
    return f"{workers:,} workers"


def _panel(panel: Panel, rows: dict[int, dict[str, Any]], left: float) -> list[str]:
    top_value = max(rows[workers][panel.key] for workers in WORKERS) * 1.25
    bottom = PANEL_TOP + BAR_AREA
    slot = (PANEL_WIDTH - 40) / len(WORKERS)
    parts = [
        f'<text x="{left + 20}" y="{PANEL_TOP - 34}" font-size="15" font-weight="bold">{panel.title}</text>',
        f'<text x="{left + 20}" y="{PANEL_TOP - 16}" fill="{MUTED}">{panel.unit}</text>',
        f'<line x1="{left + 20}" y1="{bottom}" x2="{left + PANEL_WIDTH - 20}" y2="{bottom}" stroke="{MUTED}"/>',
    ]
    for index, workers in enumerate(WORKERS):
        row = rows[workers]
        value = row[panel.key]
        height = value / top_value * BAR_AREA
        centre = left + 20 + slot * (index + 0.5)
        parts.append(f'<rect x="{centre - BAR / 2:.1f}" y="{bottom - height:.1f}" width="{BAR}" height="{height:.1f}" '
                     f'fill="{COLOUR}"/>')  # fmt: skip
        text = panel.value_text.format(value=value)
        parts.append(f'<text x="{centre:.1f}" y="{bottom - height - 6:.1f}" text-anchor="middle">{text}</text>')
        parts.append(f'<text x="{centre:.1f}" y="{bottom + 18}" text-anchor="middle">{_workers_label(workers)}</text>')
        if panel.note:
            note = panel.note.format(**row)
            parts.append(f'<text x="{centre:.1f}" y="{bottom + 34}" text-anchor="middle" fill="{MUTED}" '
                         f'font-size="11">{note}</text>')  # fmt: skip
    return parts


def svg(run: dict[str, Any], queue: dict[str, Any]) -> str:
    rows = {row["workers"]: row for row in run["workers"] if row["workers"] in WORKERS}
    missing = [workers for workers in WORKERS if workers not in rows]
    if missing:
        raise SystemExit(f"figure: the run has no row for {missing} workers")
    largest = max(queue["queue"], key=lambda row: row["queued"])
    per_task = largest["bytes_per_queued_task"]
    height = PANEL_TOP + BAR_AREA + 116
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="12" fill="#1d1d1f">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        '<text x="20" y="22" font-size="17" font-weight="bold">What one scheduler holds at 100, 1,000 and 10,000 '
        "workers</text>",
    ]
    for index, panel in enumerate(PANELS):
        parts += _panel(panel, rows, index * PANEL_WIDTH)
    notes = [
        f"A queued task adds about {per_task:,.0f} bytes: {largest['queued']:,} queued tasks hold "
        f"{largest['rss_mb_queued']:,.0f} MB.",
        "Measured on a virtual machine of two cores shared with other work: the scheduler process alone, with fake",
        "workers that heartbeat and answer at once, and one client submitting tasks that do nothing.",
    ]
    for number, note in enumerate(notes):
        parts.append(f'<text x="20" y="{height - 46 + 16 * number}" fill="{MUTED}">{note}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run of `python -m scale` with 100, 1,000 and 10,000 workers")
    parser.add_argument("--queue", type=Path, required=True, help="a run of `python -m scale` with a queue")
    parser.add_argument("--svg", type=Path, required=True)
    arguments = parser.parse_args()
    arguments.svg.write_text(svg(json.loads(arguments.run.read_text()), json.loads(arguments.queue.read_text())))
    print(f"figure: {arguments.svg}")


if __name__ == "__main__":
    main()
