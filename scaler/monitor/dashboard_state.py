"""What the web dashboard and `/metrics` show, kept from the monitor feed: a pure model fed with feed messages
and the time they arrived, answering `view()` (a JSON-able dict for the page) and the metric values.

Task spans (for the timeline and the duration histogram) come from the feed's task transitions: a task's
`dispatched` transition (handed to a worker) starts a span, its final state ends it. The feed bounds the rate
of transitions, so under a flood some spans are missed: the timeline and the histogram are samples, the task
counts (from the status snapshots) are exact.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from scaler.monitor.top_screen import client_state, worker_label
from scaler.protocol import messages as m
from scaler.protocol.storage_messages import HostTraffic, StorageTraffic

#: A task's span starts when the scheduler hands it to a worker (its time in the worker's own queue included).
STARTED_STATES = frozenset({"dispatched", "running"})
FINAL_STATES = frozenset(
    {"success", "failed", "canceled", "workerDied", "noWorker", "timedOut", "processorDied", "outOfMemory"}
)
#: Upper bounds (seconds) of the task duration histogram's buckets.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, float("inf"))
#: Throughput points kept (one per status snapshot: two minutes at the default interval).
THROUGHPUT_POINTS = 120
#: Running tasks remembered for their spans; beyond it the oldest are forgotten.
RUNNING_TRACKED = 100_000


@dataclass(frozen=True)
class TaskSpan:
    worker: str
    function: str
    started: float  #: wall-clock seconds
    ended: float
    state: str


@dataclass
class DurationHistogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    total_seconds: float = 0.0
    observations: int = 0

    def observe(self, seconds: float) -> None:
        self.observations += 1
        self.total_seconds += seconds
        for index, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.counts[index] += 1
                return


class DashboardState:
    def __init__(self, spans_kept: int = 500, decisions_kept: int = 20) -> None:
        self.snapshot: m.StatusSnapshot | None = None
        self.received_at: float | None = None  #: when the latest snapshot arrived (the reader's clock)
        self.spans: collections.deque[TaskSpan] = collections.deque(maxlen=spans_kept)
        self.decisions: collections.deque[m.ScalingDecision] = collections.deque(maxlen=decisions_kept)
        self.throughput: collections.deque[tuple[float, float]] = collections.deque(maxlen=THROUGHPUT_POINTS)
        #: (wall time, the workers' memory summed, their limits summed), one point per status snapshot
        self.memory: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=THROUGHPUT_POINTS)
        #: (wall time, bytes/s the object storage server sent, of which to host caches), one point per status snapshot
        self.egress: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=THROUGHPUT_POINTS)
        self.durations = DurationHistogram()
        self._running: collections.OrderedDict[bytes, tuple[float, bytes, str]] = collections.OrderedDict()

    # ------------------------------------------------------------ input

    def on_message(self, message: object, now: float) -> None:
        if isinstance(message, m.StatusSnapshot):
            self._on_status(message, now)
        elif isinstance(message, m.TaskTransitions):
            for transition in message.transitions:
                self._on_transition(transition)
        elif isinstance(message, m.ScalingDecisions):
            self.decisions.extend(message.decisions)

    def _on_status(self, snapshot: m.StatusSnapshot, now: float) -> None:
        previous = self.snapshot
        if previous is not None and snapshot.wall_time > previous.wall_time:
            finished = _finished(snapshot) - _finished(previous)
            rate = max(0, finished) / (snapshot.wall_time - previous.wall_time)
            self.throughput.append((snapshot.wall_time, rate))
            self.egress.append((snapshot.wall_time, *_egress(previous.storage, snapshot.storage,
                                                              snapshot.wall_time - previous.wall_time)))  # fmt: skip
        self.snapshot = snapshot
        self.received_at = now
        used = sum(worker.status.memory_bytes for worker in snapshot.workers)
        limit = sum(_limits(snapshot.workers).values())
        self.memory.append((snapshot.wall_time, used, limit))

    def _on_transition(self, transition: m.TaskTransition) -> None:
        if transition.state in STARTED_STATES:
            self._running[transition.task_id] = (transition.wall_time, transition.worker_id, transition.function_name)
            if len(self._running) > RUNNING_TRACKED:
                self._running.popitem(last=False)
            return
        if transition.state not in FINAL_STATES:
            return
        started = self._running.pop(transition.task_id, None)
        if started is None:
            return
        began, worker_id, function = started
        ended = max(began, transition.wall_time)
        self.durations.observe(ended - began)
        worker = worker_id.decode(errors="replace")
        self.spans.append(TaskSpan(worker, function or transition.function_name, began, ended, transition.state))

    # ------------------------------------------------------------ output

    def stale_seconds(self, now: float) -> float | None:
        return None if self.received_at is None else now - self.received_at

    def jobs(self) -> list[dict[str, Any]]:
        """The named jobs the scheduler keeps (`/api/jobs` and the page's jobs table)."""
        return [] if self.snapshot is None else [job_view(job) for job in self.snapshot.jobs]

    def actors(self) -> list[dict[str, Any]]:
        """The live actors (`/api/actors` and the page's actors table)."""
        return [] if self.snapshot is None else [actor_view(actor) for actor in self.snapshot.actors]

    def view(self, now: float) -> dict[str, Any]:
        """Everything the page draws, as plain JSON-able values."""
        snapshot = self.snapshot
        if snapshot is None:
            return {"connected": False}
        stats = snapshot.scheduler
        return {
            "connected": True,
            "stale_seconds": self.stale_seconds(now),
            "wall_time": snapshot.wall_time,
            "scheduler": {"cpu_percent": stats.cpu_percent, "rss_bytes": stats.rss_bytes, "address": stats.address},
            "tasks": {
                "queued": stats.queued,
                "running": stats.running,
                "success": stats.succeeded,
                "failed": stats.failed,
                "canceled": stats.canceled,
                "worker_died": stats.worker_died,
            },
            "objects": {"count": stats.object_count, "bytes": stats.object_bytes},
            "storage": storage_view(snapshot.storage),
            "placement": {"near_data": stats.near_data, "away_from_data": stats.away_from_data},
            "egress": [[time, sent, to_caches] for time, sent, to_caches in self.egress],
            "throughput": [[time, rate] for time, rate in self.throughput],
            "memory": [[time, used, limit] for time, used, limit in self.memory],
            "workers": [_worker_view(worker) for worker in snapshot.workers],
            "managers": [_manager_view(manager) for manager in snapshot.managers],
            "pending": [
                {
                    "capabilities": ",".join(
                        name if value < 0 else f"{name}={value}" for name, value in group.capabilities
                    )
                    or "-",
                    "queued": group.count,
                    "running": group.running,
                    "why": group.reason,
                    "oldest_seconds": group.oldest_queued_seconds,
                }
                for group in snapshot.pending
                if group.count
            ],
            "decisions": [
                {
                    "manager": d.manager_id,
                    "from": d.from_workers,
                    "to": d.to_workers,
                    "reason": d.reason,
                    "wall_time": d.wall_time,
                }
                for d in self.decisions
            ],
            "clients": [
                {
                    "client": client.name or client.client_id.decode(errors="replace"),
                    "id": client.client_id.decode(errors="replace"),  #: as the task log names it
                    "live": client.counts.live,
                    "success": client.counts.succeeded,
                    "failed": client.counts.failed,
                    "state": client_state(client),  #: "connected", or "away 3m of 30m"
                }
                for client in snapshot.clients
            ],
            "jobs": self.jobs(),
            "actors": self.actors(),
            "timeline": [
                {
                    "worker": span.worker,
                    "function": span.function,
                    "start": span.started,
                    "end": span.ended,
                    "state": span.state,
                }
                for span in self.spans
            ],
        }


def storage_view(storage: StorageTraffic) -> dict[str, Any]:
    """Where objects live and move (the page's "Bytes" section): the storage server's counts, each host cache's row
    (and the rest summed), the large objects and their copies, the transfers under way."""
    return {
        "sent": storage.bytes_sent,
        "sent_to_caches": storage.bytes_sent_to_caches,
        "received": storage.bytes_received,
        "host_count": storage.host_count,
        "hosts": [_host_view(row) for row in storage.hosts],
        "other_hosts": _host_view(storage.other_hosts),
        "objects": [
            {
                "object": copies.object_id.hex(),
                "name": copies.name,
                "bytes": copies.total_bytes,
                "copies_sent": copies.copies_sent,
                "hosts": copies.hosts,
                "fetching": copies.fetching,
            }
            for copies in storage.objects
        ],
        "transfers": [
            {
                "object": each.object_id.hex(),
                "to": each.to,
                "from": each.source or "storage",
                "done": each.done_bytes,
                "total": each.total_bytes,
                "seconds": each.seconds,
            }
            for each in storage.transfers
        ],
        "transfer_count": storage.transfer_count,
        "transfer_bytes_left": storage.transfer_bytes_left,
    }


def _host_view(row: HostTraffic) -> dict[str, Any]:
    return {
        "host": row.host,
        "address": row.address,
        "from_storage": row.bytes_from_storage,
        "from_hosts": row.bytes_from_hosts,
        "to_hosts": row.bytes_to_hosts,
        "uploaded": row.bytes_uploaded,
        "held_objects": row.held_objects,
        "held_bytes": row.held_bytes,
        "transfers": row.transfers,
    }


def _egress(before: StorageTraffic, now: StorageTraffic, seconds: float) -> tuple[float, float]:
    """The storage server's send rate between two statuses, and to host caches (0 after a restart of its counts)."""
    sent = now.bytes_sent - before.bytes_sent
    to_caches = now.bytes_sent_to_caches - before.bytes_sent_to_caches
    return max(0, sent) / seconds, max(0, to_caches) / seconds


def job_view(job: m.JobSummary) -> dict[str, Any]:
    return {
        "name": job.name,
        "state": job.state,
        "total": job.total,
        "done": job.done,
        "failed": job.failed,
        "submitter": job.submitter,
        "submitter_connected": job.submitter_connected,
        "owner_key": job.owner_key,
        "age_seconds": job.age_seconds,
    }


def actor_view(actor: m.ActorSummary) -> dict[str, Any]:
    return {
        "actor": actor.actor_id.hex(),
        "class": actor.class_name,
        "name": actor.name,
        "client": actor.client_id.decode(errors="replace"),
        "worker": actor.worker_id.decode(errors="replace"),
        "state": actor.state,
        "restarts": actor.restarts,
        "calls": actor.calls,
        "calls_done": actor.calls_done,
        "age_seconds": actor.age_seconds,
    }


def _finished(snapshot: m.StatusSnapshot) -> int:
    stats = snapshot.scheduler
    return stats.succeeded + stats.failed + stats.canceled


def _limits(workers: tuple[m.WorkerSummary, ...]) -> dict[object, int]:
    """Each limit once: workers on one machine without a cgroup limit share that machine's memory."""
    limits: dict[object, int] = {}
    for worker in workers:
        status = worker.status
        key = (worker.hostname, "machine") if status.memory_limit_source == "machine" else worker.worker_id
        limits[key] = status.memory_limit_bytes
    return limits


def _worker_view(worker: m.WorkerSummary) -> dict[str, Any]:
    return {
        "id": worker.worker_id.decode(errors="replace"),
        "label": worker_label(worker),
        "host": worker.hostname,
        "pid": worker.pid,
        "manager": worker.manager_id,
        "cpu_percent": worker.cpu_percent + sum(p.cpu_percent for p in worker.status.processors),
        "memory_bytes": worker.status.memory_bytes,  #: PSS of the agent and its processors
        "memory_limit_bytes": worker.status.memory_limit_bytes,
        "memory_limit_source": worker.status.memory_limit_source,
        "capacity": worker.capacity,
        "assigned": worker.assigned,
        "queued": worker.status.queued,
        "lag_ms": worker.lag_seconds * 1000,
    }


def _manager_view(manager: m.ManagerSummary) -> dict[str, Any]:
    return {
        "id": manager.manager_id,
        "type": manager.manager_type,
        "max_workers": manager.max_workers,
        "connected_workers": manager.connected_workers,
        "target_workers": manager.target_workers,
        "units": manager.units,
        "pending_units": manager.pending_units,
        "cost_per_hour": manager.worker_cost_per_hour,
        "spend_per_hour": manager.spend_per_hour,
        "min_workers": manager.min_workers,
        "buffer_workers": manager.buffer_workers,
        "warm_spend_per_hour": manager.warm_spend_per_hour,
        #: its units waiting in their provider's queue, by reason (Slurm's, Kubernetes'), and why launches are held
        "waits": [{"reason": wait.reason, "units": wait.units, "message": wait.message} for wait in manager.waits],
        "held": manager.held,
    }
