"""Builds the `SchedulerView` (scaler.protocol.feed): the one frozen view of the core that the scaling
policy, the monitor feed's status, scaler_top, the dashboard and the metrics read.

The core builds it at most once per event, and only when someone needs it (a status publication, a
manager's target). Cost: one pass over the queue's capability groups, the workers (with their assigned
task ids), the managers, the clients and the functions; never a walk over all tasks (counts by state
are kept as tasks move, `task_tally.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.protocol.feed import ClientEntry, ManagerEntry, SchedulerStats, SchedulerView, TaskGroupEntry, WorkerEntry
from scaler.protocol.ids import ClientID
from scaler.protocol.messages import Capabilities
from scaler.scheduler.core.peers import ManagerRecord, WorkerRecord

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore


def build_view(core: SchedulerCore) -> SchedulerView:
    now, shell = core.now, core.shell_stats
    stats = SchedulerStats(
        address=core.settings.scheduler_address,
        cpu_percent=shell.cpu_percent,
        rss_bytes=shell.rss_bytes,
        object_count=shell.object_count,
        object_bytes=shell.object_bytes,
        messages_sent=shell.sent_by_type,
        messages_received=shell.received_by_type,
        graphs=len(core.graphs),
    )
    tally = core.tasks.tally
    connected: dict[str, int] = {}  #: manager id -> its connected workers
    for worker in core.workers.values():
        connected[worker.manager_id] = connected.get(worker.manager_id, 0) + 1
    return SchedulerView(
        now=now,
        wall_time=core.wall_time,
        scheduler=stats,
        tasks=tally.totals(),
        groups=task_groups(core),
        workers=tuple(_worker_entry(worker, now) for worker in core.workers.values()),
        managers=tuple(_manager_entry(manager, connected, now) for manager in core.managers.values()),
        clients=tuple(
            ClientEntry(peer, client.name, client.hostname, client.pid, tally.of_client(ClientID(peer)))
            for peer, client in core.clients.items()
        ),
        functions=tally.functions(),
        decisions=tuple(core.feed.decisions),
        manager_timeout_seconds=core.settings.manager_timeout_seconds,
    )


def task_groups(core: SchedulerCore) -> tuple[TaskGroupEntry, ...]:
    """Live tasks by the dispatch queue's key: their capabilities, or one wildcard group under `even_load`
    (which ignores capabilities, so scaling does too). Running counts come from the workers' assigned
    task ids; graph nodes waiting for their dependencies are not counted. Queued groups first."""
    queue, records, now = core.tasks.queue, core.tasks.records, core.now
    queued: dict[Capabilities, int] = dict(queue.groups())
    running: dict[Capabilities, int] = {}
    for worker in core.workers.values():
        for task_id in worker.assigned:
            record = records.get(task_id)
            if record is not None:
                key = queue.key(record)
                running[key] = running.get(key, 0) + 1
    groups = []
    for capabilities in dict.fromkeys([*queued, *running]):
        waiting = queued.get(capabilities, 0)
        oldest, reason = 0.0, ""
        if waiting:
            head = queue.peek(capabilities, records)  # the next task to dispatch: highest priority, then oldest
            if head is not None:
                oldest = max(0.0, now - records[head[2]].submitted_at)
            reason = why_waiting(core, capabilities)
        groups.append(TaskGroupEntry(capabilities, waiting, running.get(capabilities, 0), oldest, reason))
    return tuple(groups)


def why_waiting(core: SchedulerCore, capabilities: Capabilities) -> str:
    """Why queued tasks of this capability set have no worker, and whether workers are on their way."""
    names = frozenset(name for name, _ in capabilities)
    able = [worker for worker in core.workers.values() if worker.can_run(names)]
    if not core.workers:
        reason = "no worker is connected"
    elif not able:
        reason = f"no connected worker has the capabilities {', '.join(sorted(names))}"
    else:
        reason = f"all {len(able)} worker(s) that can run them are busy"
    booting = [
        f"{manager.manager_id} ({manager.pending_units})"
        for manager in core.managers.values()
        if manager.pending_units and names <= frozenset(name for name, _ in manager.capabilities)
    ]
    if booting:
        reason += f"; manager(s) booting workers: {', '.join(booting)}"
    return reason


def _worker_entry(worker: WorkerRecord, now: float) -> WorkerEntry:
    return WorkerEntry(
        worker_id=worker.peer,
        hostname=worker.hostname,
        pid=worker.pid,
        manager_id=worker.manager_id,
        capabilities=worker.capabilities,
        capacity=worker.capacity,
        assigned=len(worker.assigned),
        status=worker.status,
        cpu_percent=worker.cpu_percent,
        rss_bytes=worker.rss_bytes,
        lag_seconds=worker.round_trip_seconds,
        last_seen_seconds=max(0.0, now - worker.last_seen),
        connected_seconds=max(0.0, now - worker.connected_at),
    )


def _manager_entry(manager: ManagerRecord, connected: dict[str, int], now: float) -> ManagerEntry:
    target = manager.last_target.entries if manager.last_target is not None else None
    return ManagerEntry(
        manager_id=manager.manager_id,
        manager_type=manager.manager_type,
        capabilities=manager.capabilities,
        max_workers=manager.max_workers,
        target=target,
        units=manager.units,
        pending_units=manager.pending_units,
        connected_workers=connected.get(manager.manager_id, 0),
        seconds_since_heartbeat=max(0.0, now - manager.last_seen),
    )
