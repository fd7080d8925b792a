"""A results file drawn as one SVG: per workload, how many times better ours is than each other system on the
workload's first metric (the medians of `report.median`; a bar right of 1 means ours is ahead). No chart library:
a few rectangles and labels on a log scale.

    cd benchmarks && python -m harness.plot results/20261124-051141.json [more.json ...] --svg ../docs/images/days.svg
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from harness.report import Run, median
from harness.spec import WORKLOADS

COLOURS = {"ray": "#4c78a8", "dask": "#f58518", "opengris": "#54a24b"}
ROW, LABEL, BAR_AREA, DECADE = 18, 260, 420, 140  # pixels: a bar's height, the label column, the bars, one decade


def advantages(runs: list[Run]) -> list[tuple[str, str, float]]:
    """(workload, other system, how many times better ours is) for each pair both measured, in workload order."""
    found = []
    for workload, spec in WORKLOADS.items():
        metric = spec.metrics[0]
        ours = median(runs, workload, "ours", metric.key)
        for system in spec.systems:
            other = median(runs, workload, system, metric.key) if system != "ours" else None
            if ours and other:
                found.append((workload, system, ours / other if metric.higher_is_better else other / ours))
    return found


def svg(rows: list[tuple[str, str, float]], title: str) -> str:
    height = 40 + ROW * len(rows) + 8 * len({workload for workload, _, _ in rows}) + 30
    centre = LABEL + BAR_AREA // 2  # ratio 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL + BAR_AREA + 80}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="8" y="18" font-size="14">{title}</text>',
    ]
    y, previous = 32, None
    for workload, system, ratio in rows:
        if workload != previous:
            y += 8
            previous = workload
        x = centre + DECADE * math.log10(ratio)
        left, width = min(centre, x), max(abs(x - centre), 1)
        parts.append(f'<text x="8" y="{y + 13}">{workload} vs {system}</text>')
        parts.append(f'<rect x="{left:.1f}" y="{y + 2}" width="{width:.1f}" height="{ROW - 4}" '
                     f'fill="{COLOURS.get(system, "#888")}"/>')  # fmt: skip
        parts.append(f'<text x="{max(x, centre) + 4:.1f}" y="{y + 13}">{ratio:.2f}x</text>')
        y += ROW
    for ratio in (0.5, 1, 2, 5, 10):
        x = centre + DECADE * math.log10(ratio)
        parts.append(f'<line x1="{x:.1f}" y1="30" x2="{x:.1f}" y2="{y + 4}" stroke="#bbb" stroke-dasharray="3,3"/>')
        parts.append(f'<text x="{x - 8:.1f}" y="{y + 18}" fill="#666">{ratio:g}x</text>')
    parts.append(f'<text x="{centre + 4}" y="{y + 32}" fill="#666">right of 1x: ours ahead</text></svg>')
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="results files of benchmarks/run.py")
    parser.add_argument("--svg", type=Path, required=True, help="where to write the drawing")
    parser.add_argument("--title", default="How many times better ours is (first metric of each workload)")
    arguments = parser.parse_args()
    runs = [run for path in arguments.results for run in json.loads(path.read_text())["runs"]]
    rows = advantages(runs)
    if not rows:
        raise SystemExit("no workload measured by ours and another system in these results")
    arguments.svg.write_text(svg(rows, arguments.title))
    for workload, system, ratio in rows:
        print(f"{workload} vs {system}: {ratio:.2f}x")
    print(f"plot: {arguments.svg}")


if __name__ == "__main__":
    main()
