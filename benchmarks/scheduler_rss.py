"""A real scheduler's memory against its queue length, and after the queue drains (#18).

    .venv/bin/python benchmarks/scheduler_rss.py [--queue 10000,50000,200000,500000,1000000]
        [--settle 30] [--save run.json] [--compare before.json] [--svg docs/images/scheduler_memory.svg]
    .venv/bin/python benchmarks/scheduler_rss.py --load docs/images/scheduler_memory.json \
        --compare docs/images/scheduler_memory_before.json --svg docs/images/scheduler_memory.svg  # redraw

One scheduler process (`SchedulerClusterCombo`, no worker at first). Tasks of a no-op function are submitted in
steps up to each queue length; after each step, once the monitor feed shows them all queued, the scheduler's RSS
and the bytes per queued task ((RSS - RSS at start) / queued). Then 2 workers run them all: the RSS 5 s after the
last result ("after they ran") and `--settle` seconds later. Prints a table. `--save` keeps the figures as
JSON (`--load` reads them back instead of measuring); `--svg` draws them (RSS and bytes per task against the
queue length, log scale), with the figures of an earlier `--save` (`--compare`, e.g. the code before a change)
in grey.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import psutil

from scaler import Client, SchedulerClusterCombo
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

MB = 2**20
KIB = 1024
BLUE, GREY, RED = "#1f77b4", "#999999", "#d62728"


def noop(x: int) -> int:
    return x


@dataclass
class Point:
    queued: int
    rss_mb: float
    bytes_per_task: float


@dataclass
class Run:
    start_mb: float
    points: list[Point]
    drained_mb: float  #: 5 s after the last result
    settled_mb: float  #: `settle_seconds` later
    settle_seconds: float
    ran_seconds: float

    @staticmethod
    def load(path: Path) -> Run:
        fields = json.loads(path.read_text())
        return Run(**{**fields, "points": [Point(**point) for point in fields["points"]]})


def wait_for_status(feed: FeedReader, done: Callable[[m.StatusSnapshot], bool], timeout: float) -> m.StatusSnapshot:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = feed.receive(1.0)
        if isinstance(message, m.StatusSnapshot) and done(message):
            return message
    raise TimeoutError(f"the scheduler did not reach the expected state within {timeout:g} s")


def queued_at_least(status: m.StatusSnapshot, size: int) -> bool:
    return status.scheduler.queued >= size


def measure(queue: list[int], settle: float) -> Run:
    """RSS figures of one scheduler as its queue grows through `queue` and then drains."""
    points: list[Point] = []
    with (
        SchedulerClusterCombo(n_workers=0) as cluster,
        Client(cluster.get_address()) as client,
        FeedReader(cluster.monitor_address, topics=(STATUS_TOPIC,)) as feed,
    ):
        scheduler = psutil.Process(cluster.scheduler_pid)
        wait_for_status(feed, lambda status: True, 60)
        time.sleep(1)
        start = scheduler.memory_info().rss
        futures: list[Future[int]] = []
        for size in queue:
            futures.extend(client.submit(noop, x) for x in range(len(futures), size))
            wait_for_status(feed, partial(queued_at_least, size=size), 600)
            rss = scheduler.memory_info().rss
            points.append(Point(size, rss / MB, (rss - start) / size))
            print(f"  {size:>9,} queued: RSS {rss / MB:5.0f} MB, {(rss - start) / size:5.0f} bytes per queued task",
                  flush=True)  # fmt: skip
        command = [str(Path(sys.executable).parent / "scaler_cluster"), "-n", "2", cluster.get_address()]
        workers = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            began = time.monotonic()
            for future in futures:
                future.result(timeout=1800)
            ran_seconds = time.monotonic() - began
            time.sleep(5)  # the status interval after the last result: the drained scheduler gives memory back
            drained = scheduler.memory_info().rss
            time.sleep(settle)
            settled = scheduler.memory_info().rss
        finally:
            workers.send_signal(signal.SIGTERM)
            workers.wait(60)
    return Run(start / MB, points, drained / MB, settled / MB, settle, ran_seconds)


def svg(now: Run, before: Run | None) -> str:
    """Two log-x line charts side by side: RSS (MB) and bytes per queued task against the queue length; `before`
    in grey, its values not written (its curve is mostly the same)."""
    width, height, pad = 380, 280, 52
    runs = [(run, colour, label) for run, colour, label in ((before, GREY, "before"), (now, BLUE, "now")) if run]
    queued = sorted({point.queued for run, _colour, _label in runs for point in run.points})
    low = math.log10(queued[0])
    high = math.log10(queued[-1]) if len(queued) > 1 else low + 1
    panels: list[tuple[str, Callable[[Point], float], list[float]]] = [
        ("scheduler RSS, MB", lambda point: point.rss_mb, [run.drained_mb for run, *_ in runs]),
        ("bytes per queued task", lambda point: point.bytes_per_task, [KIB]),
    ]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">']  # fmt: skip
    for index, (title, value, extra) in enumerate(panels):
        left = index * width
        top = max([value(point) for run, *_ in runs for point in run.points] + extra) * 1.1

        def x(count: float, left: int = left) -> float:
            return left + pad + (math.log10(count) - low) / (high - low) * (width - 2 * pad)

        def y(amount: float, top: float = top) -> float:
            return height - pad - amount / top * (height - 2 * pad)

        def level(amount: float, colour: str, dash: str, left: int = left) -> str:
            return (f'<line x1="{left + pad}" y1="{y(amount):.1f}" x2="{left + width - pad}" y2="{y(amount):.1f}" '
                    f'stroke="{colour}" stroke-dasharray="{dash}"/>')  # fmt: skip

        parts.append(f'<line x1="{left + pad}" y1="{height - pad}" x2="{left + width - pad}" y2="{height - pad}" '
                     f'stroke="black"/><line x1="{left + pad}" y1="{pad}" x2="{left + pad}" y2="{height - pad}" '
                     f'stroke="black"/>')  # fmt: skip
        parts.append(f'<text x="{left + pad}" y="{pad - 14}" font-weight="bold">{title}</text>')
        parts.append(f'<text x="{left + width / 2}" y="{height - 12}" text-anchor="middle">tasks queued</text>')
        for tick in (top / 4, top / 2, 3 * top / 4):
            parts.append(f'<text x="{left + pad - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" fill="{GREY}">'
                         f"{tick:.0f}</text>")  # fmt: skip
        for count in queued:
            label = f"{count // 1000}k" if count < 1_000_000 else f"{count / 1e6:g}M"
            parts.append(f'<text x="{x(count):.1f}" y="{height - pad + 15}" text-anchor="middle">{label}</text>')
        legend: list[tuple[str, str, str]] = []  #: (colour, dash, text)
        if index == 0:
            parts.append(level(now.start_mb, "black", "1,3"))
            for run, colour, label in runs:
                parts.append(level(run.drained_mb, colour, "6,3"))
                legend += [(colour, "", f"{label}: with the tasks queued"),
                           (colour, "6,3", f"{label}: {run.drained_mb:.0f} MB after they ran")]  # fmt: skip
            legend.append(("black", "1,3", f"{now.start_mb:.0f} MB at start"))
        else:
            parts.append(level(KIB, RED, "4,3"))
            legend += [(colour, "", label) for _run, colour, label in runs] + [(RED, "4,3", "the 1 KiB target")]
        for run, colour, _label in runs:
            points = [(x(point.queued), y(value(point)), value(point)) for point in run.points]
            parts += _curve(points, colour, labelled=run is now)
        first_row = pad + 10 if index == 0 else height - pad - 10 - 15 * (len(legend) - 1)  # where no curve runs
        for row, (colour, dash, text) in enumerate(legend):
            ly = first_row + 15 * row
            parts.append(f'<line x1="{left + pad + 10}" y1="{ly - 4}" x2="{left + pad + 34}" y2="{ly - 4}" '
                         f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>'
                         f'<text x="{left + pad + 40}" y="{ly}">{text}</text>')  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _curve(points: list[tuple[float, float, float]], colour: str, labelled: bool) -> list[str]:
    """A polyline through (x, y) with a dot at each point, and each point's value written above it if `labelled`."""
    line = " ".join(f"{px:.1f},{py:.1f}" for px, py, _value in points)
    parts = [f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>']
    for number, (px, py, value) in enumerate(points):
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>')
        if labelled:
            anchor = "start" if number == 0 else "end" if number == len(points) - 1 else "middle"
            shift = {"start": 5, "end": -5, "middle": 0}[anchor]
            parts.append(f'<text x="{px + shift:.1f}" y="{py - 7:.1f}" text-anchor="{anchor}" fill="{colour}">'
                         f"{value:.0f}</text>")  # fmt: skip
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queue", default="10000,50000,200000,500000,1000000", help="queue lengths, ascending")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds, after which RSS is read again")
    parser.add_argument("--save", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--compare", type=Path, help="figures of an earlier --save, drawn in grey")
    parser.add_argument("--load", type=Path, help="figures of an earlier --save, instead of measuring")
    parser.add_argument("--svg", type=Path, help="draw the figures into this SVG file")
    arguments = parser.parse_args()
    queue = [int(text) for text in arguments.queue.split(",")]
    if queue != sorted(queue) or queue[0] <= 0:
        parser.error(f"--queue must be positive lengths in ascending order, got {arguments.queue}")
    if arguments.load:
        result = Run.load(arguments.load)
        for point in result.points:
            print(f"  {point.queued:>9,} queued: RSS {point.rss_mb:5.0f} MB, {point.bytes_per_task:5.0f} bytes per "
                  "queued task")  # fmt: skip
    else:
        print(f"scheduler RSS against queue length ({', '.join(f'{n:,}' for n in queue)} tasks queued, then run)")
        result = measure(queue, arguments.settle)
    print(f"  RSS {result.start_mb:.0f} MB at start, {result.drained_mb:.0f} MB 5 s after they ran "
          f"({result.ran_seconds:.0f} s), {result.settled_mb:.0f} MB {result.settle_seconds:g} s later")  # fmt: skip
    if arguments.save:
        arguments.save.write_text(json.dumps(asdict(result), indent=1) + "\n")
    if arguments.svg:
        before = Run.load(arguments.compare) if arguments.compare else None
        arguments.svg.write_text(svg(result, before))
        print(f"  plot: {arguments.svg}")


if __name__ == "__main__":
    main()
