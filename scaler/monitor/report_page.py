"""The run report's HTML page, from a `RunRecord` (pure: the record and the labels in, one string out).

The page is self-contained: inline CSS and inline SVG charts, no script, and a Content-Security-Policy that
forbids every fetch, so it opens offline and cannot call anywhere. Its sections carry ids (`summary`,
`functions`, `timeline`, `managers`, `workers`, `scaling`, `memory`, `limits`) and its table cells data
attributes, which the browser test reads.
"""

from __future__ import annotations

from html import escape

from scaler.monitor import svg_chart
from scaler.monitor.run_record import RunRecord, worker_name
from scaler.monitor.run_stats import timeline
from scaler.monitor.svg_chart import Series, format_seconds

#: Rows shown in the workers table.
WORKERS_SHOWN = 200

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
svg { max-width: 100%; height: auto; display: block; }
.note { color: #555; font-size: 0.85em; }
"""


def render_report(record: RunRecord, title: str, generated_at: str, problems: tuple[str, ...] = ()) -> str:
    """The whole page. `generated_at`: when the report was written, as the page shows it; `problems`: what went
    wrong while recording (the page lists them)."""
    sections = [
        _summary(record, generated_at),
        _functions(record),
        _timeline(record),
        _managers(record),
        _workers(record),
        _scaling(record),
        _memory(record),
        _limits(record, problems),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>{''.join(sections)}</body></html>\n"
    )


def _section(section_id: str, heading: str, body: str) -> str:
    return f'<section id="{section_id}"><h2>{escape(heading)}</h2>{body}</section>'


def _table(headings: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headings)
    thead = f"<thead><tr>{head}</tr></thead>" if headings else ""
    return f"<table>{thead}<tbody>{''.join(rows)}</tbody></table>"


def _cell(value: object, name: str = "", text: bool = False) -> str:
    attributes = (f' data-name="{name}"' if name else "") + (' class="text"' if text else "")
    return f"<td{attributes}>{escape(str(value))}</td>"


def _relative(record: RunRecord, wall_time: float) -> str:
    return f"{wall_time - record.started_at:.1f}"


def _summary(record: RunRecord, generated_at: str) -> str:
    counts = record.function_counts()
    ended = sum(c.succeeded + c.failed + c.canceled for c in counts.values())
    failed = sum(c.failed for c in counts.values())
    address = record.last_status.scheduler.address if record.last_status is not None else ""
    rows = [
        ("scheduler", address),
        ("written", generated_at),
        ("duration", format_seconds(max(0.0, record.ended_at - record.started_at))),
        ("tasks ended", str(ended)),
        ("of them failed", str(failed)),
        ("workers seen", str(len(record.workers) + record.workers_dropped)),
        ("managers", str(len(record.managers))),
        ("cost over the run", f"{sum(m.cost for m in record.managers.values()):.4g}"),
    ]
    body = _table([], [f"<tr>{_cell(k, text=True)}{_cell(v, k.replace(' ', '-'), True)}</tr>" for k, v in rows])
    note = ('<p class="note">Everything the scheduler ran while the report was open, for every client '
            "(the report reads the scheduler's monitor feed).</p>")  # fmt: skip
    return _section("summary", "Summary", body + note)


def _functions(record: RunRecord) -> str:
    counts = record.function_counts()
    names = sorted(set(counts) | set(record.functions))
    rows = []
    for name in names:
        count = counts.get(name)
        durations = record.functions[name].durations if name in record.functions else None
        cells = [_cell(name, "function", True)]
        if count is not None:
            cells += [_cell(count.succeeded, "succeeded"), _cell(count.failed, "failed"),
                      _cell(count.canceled, "canceled"), _cell(count.live, "live")]  # fmt: skip
        else:
            cells += [_cell("", n) for n in ("succeeded", "failed", "canceled", "live")]
        if durations is not None and durations.count:
            cells += [_cell(durations.count, "measured")] + [
                _cell(format_seconds(durations.percentile(q)), f"p{round(q * 100)}") for q in (0.5, 0.9, 0.99)
            ]
            cells += [_cell(format_seconds(durations.maximum), "max"), _cell(format_seconds(durations.mean), "mean")]
        else:
            cells += [_cell(0, "measured")] + [_cell("", n) for n in ("p50", "p90", "p99", "max", "mean")]
        rows.append(f'<tr data-function="{escape(name)}">{"".join(cells)}</tr>')
    headings = ["function", "succeeded", "failed", "canceled", "still live", "runs timed", "median", "90th pct",
                "99th pct", "max", "mean"]  # fmt: skip
    ranges = [
        (name, f.durations.percentile(0.5), f.durations.percentile(0.9), f.durations.percentile(0.99))
        for name, f in sorted(record.functions.items())
        if f.durations.count
    ]
    chart = svg_chart.range_svg(ranges, svg_chart.colour_of(names)) if ranges else ""
    note = ('<p class="note">Counts are the scheduler\'s own (exact). Durations: how long each task held its '
            "worker, from the worker's result (the worker's own measure for profiled tasks); percentiles are read "
            "from logarithmic buckets, within 2.2 % of the exact value.</p>")  # fmt: skip
    return _section("functions", "Tasks per function", _table(headings, rows) + chart + note)


def _timeline(record: RunRecord) -> str:
    layout = timeline(record.bars.items)
    if not layout.placed:
        return _section("timeline", "Task timeline per worker", "<p>No task ran while the report was open.</p>")
    colours = svg_chart.colour_of([p.bar.function_name for p in layout.placed])
    legend = (
        " ".join(f'<span style="color:{colour}">■</span> {escape(name)}' for name, colour in sorted(colours.items()))
        + f' <span style="color:{svg_chart.FAILED_COLOUR}">■</span> failed'
    )
    shown, dropped = len(layout.placed), record.bars.dropped
    note = f'<p class="note" id="bars-note">{shown} task bars shown'
    note += f", {dropped} left out to keep the report bounded (an even sample of the run is kept).</p>" if dropped \
        else ", every task that ran.</p>"  # fmt: skip
    chart = svg_chart.timeline_svg(layout, colours, record.started_at)
    return _section("timeline", "Task timeline per worker", f"<p>{legend}</p>{chart}{note}")


def _managers(record: RunRecord) -> str:
    heading = "Worker managers: boot, connect and cost"
    manager_ids = sorted(set(record.managers) | {w.manager_id for w in record.workers.values()})
    if not manager_ids:
        return _section("managers", heading, "<p>No worker connected while the report was open.</p>")
    rows = [_manager_row(record, manager_id) for manager_id in manager_ids]
    headings = ["manager", "type", "boot (s, launch to connected)", "workers at start", "workers joined",
                "first join (s)", "last join (s)", "peak units", "unit-hours", "cost per unit-hour",
                "cost over the run"]  # fmt: skip
    managers = sorted({manager for point in record.points.items for manager, _n in point.workers})
    series = [Series(manager or "(no manager)", _connected_over_time(record, manager)) for manager in managers]
    chart = svg_chart.step_svg(series, "connected workers", "seconds since the report began") if series else ""
    note = (
        '<p class="note">Boot: launch to connected worker, as the manager measured it (or declared it). '
        "Cost: each status interval, the units a manager held (booting ones too) times its declared cost per "
        "unit-hour, summed over the run. Join times are seconds since the report began. Workers of no "
        "connected manager (started by hand or by a cluster) show only their connect times.</p>"
    )
    return _section("managers", heading, _table(headings, rows) + chart + note)


def _manager_row(record: RunRecord, manager_id: str) -> str:
    manager = record.managers.get(manager_id)
    own = [w for w in record.workers.values() if w.manager_id == manager_id]
    joined = sorted(w.connected_at for w in own if not w.seen_at_start)
    boot = f"{manager.boot_seconds:.1f}" if manager is not None and manager.boot_seconds else "not reported"
    cells = [
        _cell(manager_id or "(none)", "manager", True),
        _cell(manager.manager_type if manager is not None else "(no manager connected)", "type", True),
        _cell(boot, "boot"), _cell(sum(w.seen_at_start for w in own), "at-start"), _cell(len(joined), "joined"),
        _cell(_relative(record, joined[0]) if joined else "", "first-join"),
        _cell(_relative(record, joined[-1]) if joined else "", "last-join"),
    ]  # fmt: skip
    if manager is not None:
        cells += [
            _cell(manager.peak_units, "peak-units"), _cell(f"{manager.unit_hours:.4g}", "unit-hours"),
            _cell(f"{manager.worker_cost_per_hour:g}", "cost-per-hour"), _cell(f"{manager.cost:.4g}", "cost"),
        ]  # fmt: skip
    else:
        cells += [_cell("", name) for name in ("peak-units", "unit-hours", "cost-per-hour", "cost")]
    return f'<tr data-manager="{escape(manager_id)}">{"".join(cells)}</tr>'


def _connected_over_time(record: RunRecord, manager: str) -> tuple[tuple[float, float], ...]:
    return tuple(
        (point.wall_time - record.started_at, float(dict(point.workers).get(manager, 0)))
        for point in record.points.items
    )


def _workers(record: RunRecord) -> str:
    items = sorted(record.workers.items(), key=lambda item: item[1].connected_at)
    rows = [
        "<tr>" + _cell(worker_name(worker_id), "worker", True) + _cell(w.manager_id, "manager", True)
        + _cell(w.hostname, "host", True)
        + _cell("before the report" if w.seen_at_start else _relative(record, w.connected_at), "connected")
        + _cell(w.capacity, "capacity") + _cell(_bytes(w.peak_rss_bytes), "peak-rss") + "</tr>"
        for worker_id, w in items[:WORKERS_SHOWN]
    ]  # fmt: skip
    more = len(items) - WORKERS_SHOWN + record.workers_dropped
    note = f'<p class="note">{more} more workers not listed.</p>' if more > 0 else ""
    headings = ["worker", "manager", "host", "connected (s)", "processors", "peak resident memory"]
    return _section("workers", "Workers", _table(headings, rows) + note)


def _scaling(record: RunRecord) -> str:
    if not record.decisions:
        return _section("scaling", "Scaling decisions", "<p>No scaling decision while the report was open.</p>")
    rows = [
        "<tr>" + _cell(_relative(record, d.wall_time), "at") + _cell(d.manager_id, "manager", True)
        + _cell(f"{d.from_workers} → {d.to_workers}", "change") + _cell(d.reason, "reason", True) + "</tr>"
        for d in record.decisions
    ]  # fmt: skip
    note = (
        f'<p class="note">{record.decisions_dropped} later decisions left out.</p>' if record.decisions_dropped else ""
    )
    return _section("scaling", "Scaling decisions", _table(["at (s)", "manager", "workers", "reason"], rows) + note)


def _memory(record: RunRecord) -> str:
    rows = [
        f'<tr data-function="{escape(name)}">' + _cell(name, "function", True)
        + _cell(_bytes(f.peak_memory_bytes) if f.memory_measured else "not measured", "peak")
        + _cell(f.memory_measured, "measured") + _cell(f.durations.count, "runs") + "</tr>"
        for name, f in sorted(record.functions.items())
    ]  # fmt: skip
    note = (
        '<p class="note">Peak memory per task is measured by the worker only for profiled tasks '
        "(<code>Client(profiling=True)</code> or <code>submit(..., profiling=True)</code>): the growth of the "
        "processor's resident memory while the task ran. Workers do not report it for other tasks yet; the "
        "workers table shows each worker's peak resident memory from its heartbeats instead.</p>"
    )
    return _section("memory", "Peak memory per function", _table(["function", "peak", "runs measured", "runs"], rows)
                    + note)  # fmt: skip


def _limits(record: RunRecord, problems: tuple[str, ...]) -> str:
    facts = [f"Recording problem: {problem}" for problem in problems] + [
        f"{record.statuses} status snapshots and {record.transitions_received} task transitions were received.",
        f"The scheduler left {record.transitions_dropped} task transitions out of its feed (it sends at most "
        "1,000 per status interval); the counts per function are exact regardless, the durations and the "
        "timeline miss those tasks." if record.transitions_dropped else
        "The scheduler's feed carried every task transition.",
        f"Timeline: {record.bars.dropped} bars left out of {record.bars.offered}.",
        f"Charts over time: {record.points.dropped} status points left out of {record.points.offered}.",
    ]  # fmt: skip
    items = "".join(f"<li>{escape(fact)}</li>" for fact in facts)
    return _section("limits", "What this report kept and left out", f"<ul>{items}</ul>")


def _bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return ""
