"""The run report's pure core: percentiles from logarithmic buckets, the bounded sample of task bars, the timeline's
lanes, and `RunRecord` fed with feed messages (counts, durations, cost, decisions), then the page it renders."""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest

from scaler.monitor.performance_report import default_monitor_address, performance_report
from scaler.monitor.report_page import render_report
from scaler.monitor.run_record import RecordLimits, RunRecord
from scaler.monitor.run_stats import RELATIVE_ERROR, Bar, LogHistogram, StrideSample, lay_out_lanes, timeline
from scaler.monitor.svg_chart import nice_ticks
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

T0 = 1_700_000_000.0


def exact_percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_from_buckets_are_within_half_a_bucket_of_the_exact_ones(seed: int) -> None:
    """Checked against a histogram with one bucket for everything: its percentiles miss by far more."""
    rng = random.Random(seed)
    values = [rng.lognormvariate(-3, 1.5) for _ in range(5000)] + [0.0, 1e-9]
    histogram = LogHistogram()
    for value in values:
        histogram.add(value)
    assert histogram.count == len(values) and histogram.minimum == 0.0 and histogram.maximum == max(values)
    assert histogram.mean == pytest.approx(sum(values) / len(values))
    for fraction in (0.5, 0.9, 0.99):
        exact = exact_percentile(values, fraction)
        assert abs(histogram.percentile(fraction) - exact) <= exact * RELATIVE_ERROR * 1.0001
    assert histogram.percentile(0.0) == 0.0 and histogram.percentile(1.0) == max(values)


def test_an_empty_histogram_reads_zero() -> None:
    assert LogHistogram().percentile(0.5) == 0.0 and LogHistogram().mean == 0.0


def test_a_stride_sample_stays_bounded_and_covers_the_whole_stream() -> None:
    sample: StrideSample[int] = StrideSample(100)
    for number in range(100_000):
        sample.offer(number)
    kept = sample.items
    assert len(kept) <= 100 and sample.dropped == 100_000 - len(kept)
    assert kept[0] == 0 and kept[-1] > 90_000  # the end of the run is there, not only its beginning
    gaps = {b - a for a, b in itertools.pairwise(kept)}
    assert gaps == {sample.stride}  # evenly spaced


def test_a_stride_sample_keeps_everything_under_its_capacity() -> None:
    sample: StrideSample[str] = StrideSample(5)
    for letter in "abcde":
        sample.offer(letter)
    assert sample.items == list("abcde") and sample.dropped == 0


def bar(start: float, end: float, worker: str = "w1") -> Bar:
    return Bar(worker, "f", start, end)


def test_overlapping_bars_of_one_worker_go_into_separate_lanes_and_reuse_freed_ones() -> None:
    bars = [bar(0, 2), bar(1, 3), bar(2, 4), bar(3.5, 5), bar(0.5, 1)]
    lanes = lay_out_lanes(bars)
    assert lanes == [0, 1, 0, 1, 1]  # (0.5, 1) takes lane 1 first, (1, 3) reuses it
    for lane in set(lanes):
        spans = sorted((b.start, b.end) for b, n in zip(bars, lanes, strict=True) if n == lane)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_the_timeline_gives_each_worker_its_rows_in_name_order() -> None:
    layout = timeline([bar(0, 2, "w2"), bar(1, 3, "w2"), bar(0, 1, "w1")])
    assert layout.rows == ("w1", "w2", "")
    assert sorted((p.bar.worker, p.row) for p in layout.placed) == [("w1", 0), ("w2", 1), ("w2", 2)]
    assert (layout.start, layout.end) == (0, 3)


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 9.3) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0, 0.27) == [0, 0.1, 0.2, 0.3]
    assert nice_ticks(3, 3) == [3]


def status(
    at: float,
    functions: dict[str, tuple[int, int]],
    units: int = 0,
    workers: tuple[m.WorkerSummary, ...] = (),
) -> m.StatusSnapshot:
    manager = m.ManagerSummary("ecs", "aws_ecs", units=units, worker_cost_per_hour=0.5, boot_seconds=42.0)
    summaries = tuple(
        m.FunctionSummary(name, m.TaskCounts(succeeded=ok, failed=bad)) for name, (ok, bad) in functions.items()
    )
    return m.StatusSnapshot(at, m.SchedulerStats(), workers, (), (manager,), wall_time=T0 + at, functions=summaries)


def ended(number: int, function: str, at: float, seconds: float, state: str = "success") -> m.TaskTransition:
    return m.TaskTransition(TaskID(number.to_bytes(16, "big")), state, b"W|a", function, T0 + at, seconds)


def test_a_record_counts_what_ended_during_the_run_and_times_what_ran() -> None:
    """Counts are the difference of the scheduler's counts, so tasks that ended before the report do not count."""
    record = RunRecord()
    record.on_message(m.TaskTransitions((ended(0, "early", 0.0, 1.0),)))  # before the first status: ignored
    record.on_message(status(0.0, {"square": (100, 0)}, units=2))
    runs = [ended(n, "square", 1.0 + n, 0.5) for n in range(3)]
    record.on_message(m.TaskTransitions((*runs, ended(9, "boom", 2.0, 0.25, "failed")), dropped=4))
    record.on_message(m.ScalingDecisions((m.ScalingDecision("ecs", 2, 4, "12 tasks queued", T0 + 1),)))
    worker = m.WorkerSummary(b"W|a", "ecs", connected_seconds_ago=1.0, rss_bytes=7 << 20, capacity=2)
    record.on_message(status(3600.0, {"square": (103, 0), "boom": (0, 1)}, units=4, workers=(worker,)))
    counts = record.function_counts()
    assert (counts["square"].succeeded, counts["square"].failed) == (3, 0)
    assert (counts["boom"].succeeded, counts["boom"].failed) == (0, 1)
    assert record.functions["square"].durations.count == 3 and record.functions["boom"].failed_durations == 1
    assert record.transitions_dropped == 4 and len(record.decisions) == 1
    # two units for one hour at 0.5 an hour
    assert record.managers["ecs"].cost == pytest.approx(1.0) and record.managers["ecs"].unit_hours == pytest.approx(2)
    assert record.workers[b"W|a"].connected_at == T0 + 3599.0 and not record.workers[b"W|a"].seen_at_start
    page = render_report(record, "a run", "now")
    assert re.search(r'data-function="square">.*?data-name="succeeded">3<', page)
    assert re.search(r'data-function="boom">.*?data-name="failed">1<', page)
    assert (
        "12 tasks queued" in page
        and "<script" not in page
        and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )


def test_a_record_of_a_long_run_stays_bounded_and_says_what_it_left_out() -> None:
    """100,000 tasks over 50 functions: the record keeps at most its limits."""
    limits = RecordLimits(bars=300, points=50, decisions=10, workers=20, functions=10)
    record = RunRecord(limits)
    record.on_message(status(0.0, {}))
    for batch in range(100):
        record.on_message(m.TaskTransitions(tuple(ended(batch * 1000 + n, f"f{n % 50}", batch + n / 1000, 0.01)
                                                  for n in range(1000))))  # fmt: skip
        record.on_message(m.ScalingDecisions((m.ScalingDecision("ecs", batch, batch + 1, "more", T0 + batch),)))
        workers = tuple(m.WorkerSummary(f"W|{batch}|{k}".encode(), "ecs") for k in range(2))
        record.on_message(status(float(batch + 1), {}, workers=workers))
    assert len(record.bars.items) <= 300 and record.bars.dropped == 100_000 - len(record.bars.items)
    assert len(record.functions) == 11  # ten of their own and the rest together
    assert sum(f.durations.count for f in record.functions.values()) == 100_000
    assert len(record.points.items) <= 50 and len(record.decisions) == 10 and record.decisions_dropped == 90
    assert len(record.workers) == 20 and record.workers_dropped == 180
    page = render_report(record, "long", "now")
    assert f"{record.bars.dropped} left out" in page


def test_the_monitor_address_is_the_schedulers_port_plus_two_unless_named() -> None:
    assert default_monitor_address("tcp://127.0.0.1:8516") == ("tcp://127.0.0.1:8518", None)
    assert (
        performance_report("run.html", monitor_address="tcp://10.0.0.1:9000").monitor_address == "tcp://10.0.0.1:9000"
    )


def test_without_a_client_or_an_address_the_report_says_what_to_pass() -> None:
    """No client, cluster or task in this process names a scheduler (the unit tier starts none)."""
    with pytest.raises(ValueError, match="pass its address"):
        performance_report("run.html")


def test_the_memory_a_record_holds_does_not_grow_with_the_number_of_tasks() -> None:
    """11,000 tasks take no more memory than 1,000 once the bar sample is full (checked with an unbounded bar
    sample: it grew by megabytes)."""
    import gc
    import tracemalloc

    def feed(record: RunRecord, first: int, count: int) -> None:
        for start in range(first, first + count, 1000):
            batch = tuple(ended(n, f"f{n % 20}", n / 1000, 0.01) for n in range(start, start + 1000))
            record.on_message(m.TaskTransitions(batch))

    tracemalloc.start()
    try:
        record = RunRecord(RecordLimits(bars=500))
        record.on_message(status(0.0, {}))
        feed(record, 0, 1_000)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        feed(record, 1_000, 10_000)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert sum(f.durations.count for f in record.functions.values()) == 11_000
    assert after - before < 100_000, (before, after)


def test_an_empty_record_renders_and_lists_what_went_wrong() -> None:
    page = render_report(RunRecord(), "nothing", "now", ("the feed went away",))
    assert "No task ran while the report was open" in page and "the feed went away" in page
