"""`/metrics`: the dashboard's state in the Prometheus text format, through prometheus-client.

Names follow Prometheus conventions: the `scaler_` prefix, units in the name, `_total` for counters, labels for
a bounded set of values (`state`, `manager`, and `worker` for at most `MAX_WORKER_SERIES` workers, the rest summed
under `worker="others"`), never one per task, and no family that repeats another (the succeeded count is
`scaler_tasks_finished_total{state="success"}`, the queue `scaler_tasks{state="queued"}`). Values are read from
the latest status snapshot when Prometheus scrapes (a custom collector), so the dashboard keeps no metric state of
its own besides the duration histogram, which the feed's task transitions fill.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from scaler.monitor.dashboard_state import DURATION_BUCKETS, DashboardState
from scaler.protocol import messages as m
from scaler.protocol.storage_messages import HostTraffic, StorageTraffic

#: workers given series of their own; past it, the rest are summed under worker="others" (a scrape's size and
#: Prometheus's series stay bounded however big the cluster grows)
MAX_WORKER_SERIES = 100


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
        up = GaugeMetricFamily("scaler_up", "1 when a status from the scheduler was received")
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

        finished = CounterMetricFamily("scaler_tasks_finished", "tasks that ended, by how", labels=["state"])
        for state, count in (("success", stats.succeeded), ("failed", stats.failed), ("canceled", stats.canceled),
                             ("worker_died", stats.worker_died)):  # fmt: skip
            finished.add_metric([state], count)
        yield finished

        placed = CounterMetricFamily(
            "scaler_tasks_placed_by_data",
            "tasks naming large inputs: placed on a host that holds them (near), or elsewhere, those hosts busy (away)",
            labels=["where"],
        )
        placed.add_metric(["near"], stats.near_data)
        placed.add_metric(["away"], stats.away_from_data)
        yield placed
        yield from worker_families(snapshot.workers)

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
        yield from storage_families(snapshot.storage)

        target = gauge("scaler_manager_target_workers", "workers the policy asks of each manager", labels=["manager"])
        units = gauge("scaler_manager_units", "units (processes, tasks, instances) of each manager",
                      labels=["manager", "state"])  # fmt: skip
        spend = gauge("scaler_manager_spend_per_hour", "what each manager's units cost now, per hour (units times "
                      "its declared worker_cost_per_hour)", labels=["manager"])  # fmt: skip
        waiting = gauge("scaler_manager_waiting_units", "units of each manager waiting in their provider's queue, by "
                        "the provider's reason (a Slurm job's pending reason, a pod's Unschedulable)",
                        labels=["manager", "reason"])  # fmt: skip
        for manager in snapshot.managers:
            for wait in manager.waits:
                waiting.add_metric([manager.manager_id, wait.reason], wait.units)
            spend.add_metric([manager.manager_id], manager.spend_per_hour)
            target.add_metric([manager.manager_id], manager.target_workers)
            units.add_metric([manager.manager_id, "running"], max(0, manager.units - manager.pending_units))
            units.add_metric([manager.manager_id, "booting"], manager.pending_units)
        yield target
        yield units
        yield waiting
        yield spend


def worker_families(workers: tuple[m.WorkerSummary, ...]) -> Iterator[Any]:
    """Per-worker memory (PSS) and its limit, CPU and tasks; the first MAX_WORKER_SERIES workers by id, the rest
    summed under worker="others"."""
    from prometheus_client.core import GaugeMetricFamily

    memory = GaugeMetricFamily("scaler_worker_memory_bytes", "a worker's agent and processors' PSS", labels=["worker"])
    limit = GaugeMetricFamily(
        "scaler_worker_memory_limit_bytes", "the memory limit a worker runs under (cgroup, else machine)",
        labels=["worker"],
    )  # fmt: skip
    cpu = GaugeMetricFamily("scaler_worker_cpu_ratio", "a worker's agent and processors' CPU (1 = one core)",
                            labels=["worker"])  # fmt: skip
    tasks = GaugeMetricFamily("scaler_worker_tasks", "tasks a worker holds, by state", labels=["worker", "state"])
    named: dict[str, list[float]] = {}
    for worker in sorted(workers, key=lambda w: w.worker_id):
        label = worker.worker_id.decode(errors="replace") if len(named) < MAX_WORKER_SERIES else "others"
        figures = named.setdefault(label, [0.0] * 5)
        status = worker.status
        cpu_percent = worker.cpu_percent + sum(p.cpu_percent for p in status.processors)
        for index, value in enumerate(
            (status.memory_bytes, status.memory_limit_bytes, cpu_percent / 100, status.queued, status.running)
        ):
            figures[index] += value
    for label, (used, limit_bytes, cpu_ratio, queued, running) in named.items():
        memory.add_metric([label], used)
        limit.add_metric([label], limit_bytes)
        cpu.add_metric([label], cpu_ratio)
        tasks.add_metric([label, "queued"], queued)
        tasks.add_metric([label, "running"], running)
    yield from (memory, limit, cpu, tasks)


#: Characters of an object's id (hex) in the `object` label: enough to tell the few objects shown apart.
OBJECT_LABEL_CHARACTERS = 16


def storage_families(storage: StorageTraffic) -> Iterator[Any]:
    """Where objects live and move: the storage server's bytes sent (to host caches apart) and received; each host
    cache the status names (at most traffic.HOST_ROWS) under its `host`, the rest summed under host="others"; the large
    objects the status names (at most traffic.OBJECT_ROWS) under `object`; the transfers under way."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    sent = CounterMetricFamily("scaler_storage_sent_bytes", "payload bytes the object storage server sent to readers",
                               labels=["to"])  # fmt: skip
    sent.add_metric(["host_caches"], storage.bytes_sent_to_caches)
    sent.add_metric(["others"], storage.bytes_sent - storage.bytes_sent_to_caches)
    yield sent
    yield CounterMetricFamily("scaler_storage_received_bytes", "payload bytes of the puts the object storage server "
                              "received", value=storage.bytes_received)  # fmt: skip
    yield GaugeMetricFamily("scaler_host_caches", "host caches reporting to the object storage server",
                            value=storage.host_count)  # fmt: skip
    yield from _host_families(storage)
    yield from _object_families(storage)
    yield GaugeMetricFamily("scaler_transfers", "objects on their way to a host cache", value=storage.transfer_count)
    yield GaugeMetricFamily("scaler_transfer_remaining_bytes", "the bytes the transfers under way have to go",
                            value=storage.transfer_bytes_left)  # fmt: skip


def _host_families(storage: StorageTraffic) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    received = CounterMetricFamily("scaler_host_received_bytes", "bytes a host's cache fetched, by where from",
                                   labels=["host", "source"])  # fmt: skip
    sent = CounterMetricFamily("scaler_host_sent_bytes", "bytes a host's cache sent, by where to (hosts: other hosts' "
                               "caches; storage: its processors' results)", labels=["host", "to"])  # fmt: skip
    held = GaugeMetricFamily("scaler_host_cache_bytes", "bytes a host's cache holds", labels=["host"])
    fetching = GaugeMetricFamily("scaler_host_transfers", "a host cache's fetches under way", labels=["host"])
    rows: list[tuple[str, HostTraffic]] = [(row.host or row.address, row) for row in storage.hosts]
    if storage.host_count > len(storage.hosts):
        rows.append(("others", storage.other_hosts))
    for host, row in rows:
        received.add_metric([host, "storage"], row.bytes_from_storage)
        received.add_metric([host, "hosts"], row.bytes_from_hosts)
        sent.add_metric([host, "hosts"], row.bytes_to_hosts)
        sent.add_metric([host, "storage"], row.bytes_uploaded)
        held.add_metric([host], row.held_bytes)
        fetching.add_metric([host], row.transfers)
    yield from (received, sent, held, fetching)


def _object_families(storage: StorageTraffic) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    size = GaugeMetricFamily("scaler_object_size_bytes", "a large object's size", labels=["object", "name"])
    copies = CounterMetricFamily("scaler_object_copies_sent", "whole copies of a large object the object storage "
                                 "server sent (a broadcast that goes host to host: about one)",
                                 labels=["object"])  # fmt: skip
    hosts = GaugeMetricFamily("scaler_object_hosts", "host caches holding a large object whole, or fetching it",
                              labels=["object", "state"])  # fmt: skip
    for each in storage.objects:
        label = each.object_id.hex()[:OBJECT_LABEL_CHARACTERS]
        size.add_metric([label, each.name], each.total_bytes)
        copies.add_metric([label], each.copies_sent)
        hosts.add_metric([label, "held"], each.hosts)
        hosts.add_metric([label, "fetching"], each.fetching)
    yield from (size, copies, hosts)


def metrics_text(state: DashboardState, lock: Any) -> bytes:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScalerCollector(state, lock))
    return bytes(generate_latest(registry))
