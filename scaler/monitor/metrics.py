"""`/metrics`: the dashboard's state in the Prometheus text format, through prometheus-client.

Names follow Prometheus conventions: the `scaler_` prefix, units in the name, `_total` for counters, labels for
a bounded set of values (`state`, `manager`), never one per task. Values are read from the latest status
snapshot when Prometheus scrapes (a custom collector), so the dashboard keeps no metric state of its own
besides the duration histogram, which the feed's task transitions fill.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from scaler.monitor.dashboard_state import DURATION_BUCKETS, DashboardState


class ScalerCollector:
    """A prometheus-client collector over a DashboardState (read under the caller's lock)."""

    def __init__(self, state: DashboardState, lock: Any) -> None:
        self._state = state
        self._lock = lock

    def describe(self) -> list[Any]:
        return []  # collected on demand: the families depend on the cluster

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        with self._lock:
            snapshot = self._state.snapshot
            durations = self._state.durations
            buckets = list(durations.counts)
            total_seconds, observations = durations.total_seconds, durations.observations
        up = GaugeMetricFamily("scaler_up", "1 when the dashboard has a status from the scheduler")
        up.add_metric([], 0.0 if snapshot is None else 1.0)
        yield up
        if snapshot is None:
            return
        stats = snapshot.scheduler
        gauge: Callable[..., GaugeMetricFamily] = GaugeMetricFamily

        workers = gauge("scaler_workers", "connected workers, by the manager that started them", labels=["manager"])
        by_manager: dict[str, int] = {}
        for worker in snapshot.workers:
            by_manager[worker.manager_id] = by_manager.get(worker.manager_id, 0) + 1
        for manager_id, count in sorted(by_manager.items()):
            workers.add_metric([manager_id], count)
        yield workers

        tasks = gauge("scaler_tasks", "live tasks by state", labels=["state"])
        tasks.add_metric(["queued"], stats.queued)
        tasks.add_metric(["running"], stats.running)
        yield tasks
        yield gauge("scaler_queue_length", "tasks waiting for a worker", value=stats.queued)

        finished = CounterMetricFamily("scaler_tasks_finished", "tasks that ended, by how", labels=["state"])
        for state, count in (("success", stats.succeeded), ("failed", stats.failed), ("canceled", stats.canceled),
                             ("worker_died", stats.worker_died)):  # fmt: skip
            finished.add_metric([state], count)
        yield finished
        yield CounterMetricFamily("scaler_tasks_completed", "tasks that succeeded", value=stats.succeeded)
        yield CounterMetricFamily("scaler_tasks_failed", "tasks that failed", value=stats.failed)

        histogram = HistogramMetricFamily(
            "scaler_task_duration_seconds", "task run time, sampled from the monitor feed's task transitions"
        )
        cumulative, running_total = [], 0
        for bound, count in zip(DURATION_BUCKETS, buckets, strict=True):
            running_total += count
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running_total))
        histogram.add_metric([], cumulative, sum_value=total_seconds)
        yield histogram
        assert observations == running_total

        yield gauge("scaler_scheduler_cpu_ratio", "the scheduler process's CPU use (1 = one core)",
                    value=stats.cpu_percent / 100)  # fmt: skip
        yield gauge("scaler_scheduler_resident_memory_bytes", "the scheduler process's RSS", value=stats.rss_bytes)
        yield gauge("scaler_storage_objects", "objects in the object storage server", value=stats.object_count)
        yield gauge("scaler_storage_bytes", "bytes of the objects in storage", value=stats.object_bytes)

        target = gauge("scaler_manager_target_workers", "workers the policy asks of each manager", labels=["manager"])
        units = gauge("scaler_manager_units", "units (processes, tasks, instances) of each manager",
                      labels=["manager", "state"])  # fmt: skip
        spend = gauge("scaler_manager_spend_per_hour", "what each manager's units cost now, per hour (units times "
                      "its declared worker_cost_per_hour)", labels=["manager"])  # fmt: skip
        for manager in snapshot.managers:
            spend.add_metric([manager.manager_id], manager.spend_per_hour)
            target.add_metric([manager.manager_id], manager.target_workers)
            units.add_metric([manager.manager_id, "running"], max(0, manager.units - manager.pending_units))
            units.add_metric([manager.manager_id, "booting"], manager.pending_units)
        yield target
        yield units
        yield spend


def metrics_text(state: DashboardState, lock: Any) -> bytes:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScalerCollector(state, lock))
    return bytes(generate_latest(registry))
