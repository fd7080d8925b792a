"""Medians per system, ours-vs-anchor ratios phrased so that "better" is obvious, PASS/MISS per target."""

import statistics
from typing import Any

from harness.spec import TARGETS, WORKLOADS, Metric, Target

NOISY_FOREIGN_CPU = 0.10  # runs where other processes used more than this share of the machine are flagged

Run = dict[str, Any]


def fmt(value: float) -> str:
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def median(runs: list[Run], workload: str, system: str, metric: str) -> float | None:
    values = [
        r["metrics"][metric]
        for r in runs
        if r["workload"] == workload and r["system"] == system and r["status"] == "ok" and metric in r["metrics"]
    ]
    return statistics.median(values) if values else None


def compare(metric: Metric, ours: float, other: float, other_name: str) -> str:
    """'ours is 12.3x faster than opengris', whatever the metric's direction."""
    if ours <= 0 or other <= 0:
        return f"ours {fmt(ours)} vs {other_name} {fmt(other)}"
    gain = ours / other if metric.higher_is_better else other / ours
    if gain >= 1:
        return f"ours is {gain:.1f}x {metric.better} than {other_name}"
    return f"ours is {1 / gain:.1f}x {metric.worse} than {other_name}"


def verdict(target: Target, medians: dict[str, float | None]) -> tuple[str, float | None]:
    """('PASS' | 'MISS' | 'n/a', the compared quantity: ours/baseline, or ours alone without a baseline)."""
    metric = next(m for m in WORKLOADS[target.workload].metrics if m.key == target.metric)
    ours = medians.get("ours")
    base = medians.get(target.baseline) if target.baseline else 1.0
    if ours is None or base is None or base == 0:
        return "n/a", None
    quantity = ours / base
    passed = quantity >= target.factor if metric.higher_is_better else quantity <= target.factor
    return ("PASS" if passed else "MISS"), quantity


def summarize(runs: list[Run], systems: list[str], workloads: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for workload in workloads:
        spec = WORKLOADS[workload]
        entry: dict[str, Any] = {"title": spec.title, "systems": {}, "targets": []}
        for system in (s for s in systems if s in spec.systems):
            mine = [r for r in runs if r["workload"] == workload and r["system"] == system]
            foreign = [r["foreign_cpu_fraction"] for r in mine if r.get("foreign_cpu_fraction") is not None]
            entry["systems"][system] = {
                "runs": len(mine),
                "ok": sum(r["status"] == "ok" for r in mine),
                "problems": sorted({r["status"] for r in mine if r["status"] != "ok"}),
                "max_foreign_cpu_fraction": max(foreign, default=None),
                "medians": {m.key: median(runs, workload, system, m.key) for m in spec.metrics},
            }
        for target in (t for t in TARGETS if t.workload == workload):
            medians = {s: v["medians"][target.metric] for s, v in entry["systems"].items()}
            outcome, quantity = verdict(target, medians)
            entry["targets"].append(
                {
                    "target": target.text,
                    "baseline": target.baseline,
                    "verdict": outcome,
                    "quantity": quantity,
                    "values": medians,
                }
            )
        summary[workload] = entry
    return summary


def _system_cell(system: str, data: dict[str, Any], metric: str) -> str:
    value = data["medians"][metric]
    if data["runs"] == 0:
        return f"{system}: not run"
    cell = f"{system}: {fmt(value)}" if value is not None else f"{system}: {'/'.join(data['problems']) or 'n/a'}"
    if data["ok"] < data["runs"]:
        cell += f" ({data['ok']}/{data['runs']} ok)"
    return cell


def _target_detail(target: dict[str, Any]) -> str:
    if target["quantity"] is not None:
        ratio = f"ours/{target['baseline']}" if target["baseline"] else "ours"
        return f" ({ratio} = {fmt(target['quantity'])})"
    if target["baseline"] is None:  # an absolute target: show what the others reach, for reference
        others = [f"{s} {fmt(v)}" for s, v in target["values"].items() if s != "ours" and v is not None]
        return f" (for reference: {', '.join(others)})" if others else ""
    return ""


def format_summary(summary: dict[str, Any]) -> str:
    lines: list[str] = []
    for workload, entry in summary.items():
        lines.append(f"{workload}  {entry['title']}")
        systems = entry["systems"]
        for metric in WORKLOADS[workload].metrics:
            direction = "higher is better" if metric.higher_is_better else "lower is better"
            unit = f" {metric.unit}" if metric.unit else ""
            cells = "   ".join(_system_cell(s, d, metric.key) for s, d in systems.items())
            lines.append(f"  {metric.key}{unit} ({direction}, median)   {cells}")
            ours = systems.get("ours", {}).get("medians", {}).get(metric.key)
            for other, data in systems.items():
                value = data["medians"][metric.key]
                if other != "ours" and ours is not None and value is not None:
                    lines.append(f"    {compare(metric, ours, value, other)}")
        for target in entry["targets"]:
            lines.append(f"  target {target['target']}: {target['verdict']}{_target_detail(target)}")
        noisy = [
            f"{s} {100 * d['max_foreign_cpu_fraction']:.0f}%"
            for s, d in systems.items()
            if (d["max_foreign_cpu_fraction"] or 0) > NOISY_FOREIGN_CPU
        ]
        if noisy:
            lines.append(f"  noisy: other processes used up to {', '.join(noisy)} of the machine's CPU")
        lines.append("")
    return "\n".join(lines)
