"""The scale harness's runs as one markdown table, a column per run, a row per figure the issue's targets name.

cd benchmarks && ../.venv/bin/python -m scale.table scale/results/before.json scale/results/workers.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Figure = Callable[[dict[str, Any]], str]


def _row(axis: str, key: str, match: str, value: Any, field: str, text: str) -> Figure:
    def figure(run: dict[str, Any]) -> str:
        rows = [row for row in run.get(axis, []) if row.get(key) == value]
        if not rows:
            return "-"
        row = rows[0]
        if row.get("falling_behind") and field not in row:
            return f"falls behind ({row['idle_cpu_percent']:.0f}% of a core)"
        if field not in row:
            return "-"
        return text.format(row[field]) + (" (falls behind)" if row.get("falling_behind") else "")

    return figure


def _ratio(axis: str, key: str, low: int, high: int) -> Figure:
    def figure(run: dict[str, Any]) -> str:
        found = {row[key]: row.get("cpu_per_task_us") for row in run.get(axis, [])}
        if not found.get(low) or not found.get(high):
            return "-"
        return f"{found[high] / found[low]:.2f}x"

    return figure


def _soak(run: dict[str, Any]) -> str:
    soak = run.get("soak")
    if not soak:
        return "-"
    after = ", ".join(f"{value:.0f}" for value in soak["rss_mb_after_rounds"])
    slope = soak.get("mb_per_round_second_half")  # absent from runs before it was kept
    settled = "" if slope is None else f"; {slope:+.2f} MB a round over the second half"
    return f"{after} MB ({'flat' if soak['flat'] else 'grows'}{settled})"


def _pending(tasks: int) -> Figure:
    def figure(run: dict[str, Any]) -> str:
        rows = [row for row in run.get("client", {}).get("pending", []) if row["tasks"] == tasks]
        return f"{rows[0]['bytes_per_pending_future']:,.0f} B" if rows else "-"

    return figure


def _map(run: dict[str, Any]) -> str:
    found = run.get("client", {}).get("map")
    if not found:
        return "-"
    return (f"{found['items']:,} items in {found['seconds']:.0f} s; client RSS {found['rss_mb_before']:.0f} -> "
            f"{found['rss_mb_peak']:.0f} MB (its result list {found['result_list_mb']:.0f} MB)")  # fmt: skip


def _checks(run: dict[str, Any]) -> str:
    rows = [row for axis in ("workers", "clients", "queue") for row in run.get(axis, []) if "checks" in row]
    soak = run.get("soak", {})
    good = all(row["checks"]["ok"] for row in rows) and soak.get("checks_ok", True)
    return f"{'all ok' if good else 'FAILED'} ({len(rows) + (1 if soak else 0)} runs)"


def rows() -> list[tuple[str, Figure]]:
    found: list[tuple[str, Figure]] = []
    for workers in (100, 1000, 5000, 10000):
        found.append((f"idle CPU, {workers:,} workers (% of a core)",
                      _row("workers", "workers", "", workers, "idle_cpu_percent", "{:.1f}%")))  # fmt: skip
    for workers in (100, 1000, 5000, 10000):
        found.append((f"CPU per task, {workers:,} workers",
                      _row("workers", "workers", "", workers, "cpu_per_task_us", "{:.0f} µs")))  # fmt: skip
    found.append(("5,000 / 100 workers", _ratio("workers", "workers", 100, 5000)))
    found.append(("10,000 / 100 workers", _ratio("workers", "workers", 100, 10000)))
    for clients in (1, 10, 100):
        found.append((f"CPU per task, {clients} client(s), 100 workers",
                      _row("clients", "clients", "", clients, "cpu_per_task_us", "{:.0f} µs")))  # fmt: skip
    found.append(("100 / 1 clients", _ratio("clients", "clients", 1, 100)))
    found.append(("fair shares, 100 clients (least / most served)",
                  _row("clients", "clients", "", 100, "fairness_min_over_max", "{:.2f}")))  # fmt: skip
    for queued in (100_000, 1_000_000):
        found.append((f"bytes per queued task, {queued:,} queued",
                      _row("queue", "queued", "", queued, "bytes_per_queued_task", "{:,.0f} B")))  # fmt: skip
        found.append((f"growth kept after {queued:,} drained, client gone",
                      _row("queue", "queued", "", queued, "growth_kept", "{:.0%}")))  # fmt: skip
    found.append(("soak: RSS after each round of 200,000", _soak))
    found.append(("client: bytes per pending future (1,000,000)", _pending(1_000_000)))
    found.append(("client: Client.map of small items", _map))
    found.append(("nothing lost or duplicated", _checks))
    return found


def table(runs: list[dict[str, Any]]) -> str:
    lines = ["| | " + " | ".join(run.get("label", "") for run in runs) + " |", "|---|" + "---|" * len(runs)]
    for name, figure in rows():
        lines.append(f"| {name} | " + " | ".join(figure(run) for run in runs) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    arguments = parser.parse_args()
    print(table([json.loads(path.read_text()) for path in arguments.runs]))


if __name__ == "__main__":
    main()
