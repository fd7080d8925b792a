"""Cap'n Proto encoding of the monitor feed's messages (status snapshots, task transitions, scaling decisions).

Part of the codec (`scaler.protocol.codec` registers these in its tables); split out because the feed is large
and only monitors read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.codec_fields import (
    capabilities_of,
    limit_of,
    set_capabilities,
    set_limit,
    set_worker_status,
    worker_status_of,
)
from scaler.protocol.ids import TaskID

_STATS_FIELDS = (
    ("address", "address"),
    ("cpu_percent", "cpuPercent"),
    ("rss_bytes", "rssBytes"),
    ("queued", "queued"),
    ("running", "running"),
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("canceled", "canceled"),
    ("worker_died", "workerDied"),
    ("object_count", "objectCount"),
    ("object_bytes", "objectBytes"),
    ("messages_received", "messagesReceived"),
    ("messages_sent", "messagesSent"),
    ("graphs", "graphs"),
    ("not_found", "notFound"),
)
_COUNT_FIELDS = ("waiting", "queued", "running", "succeeded", "failed", "canceled")


# ---------------------------------------------------------------- encoding


def _set_counts(builder: Any, counts: m.TaskCounts) -> None:
    for name in _COUNT_FIELDS:
        setattr(builder, name, getattr(counts, name))


def _set_target(builder: Any, target: m.ManagerTarget) -> None:
    for item, entry in zip(builder.init("entries", len(target.entries)), target.entries, strict=True):
        set_capabilities(item, "capabilities", entry.capabilities)
        item.workers = entry.workers
    builder.drain = list(target.drain)
    builder.connected = list(target.connected)


def _set_worker(item: Any, worker: m.WorkerSummary) -> None:
    item.workerId = worker.worker_id
    item.managerId = worker.manager_id
    set_capabilities(item, "capabilities", worker.capabilities)
    item.capacity = worker.capacity
    item.assigned = worker.assigned
    set_worker_status(item.init("status"), worker.status)
    item.cpuPercent = worker.cpu_percent
    item.rssBytes = worker.rss_bytes
    item.lastSeenSecondsAgo = worker.last_seen_seconds_ago
    item.hostname = worker.hostname
    item.pid = worker.pid
    item.lagSeconds = worker.lag_seconds
    item.workerType = worker.worker_type
    item.connectedSecondsAgo = worker.connected_seconds_ago


def _set_manager(item: Any, manager: m.ManagerSummary) -> None:
    item.managerId = manager.manager_id
    item.managerType = manager.manager_type
    set_capabilities(item, "capabilities", manager.capabilities)
    set_limit(item.maxWorkers, manager.max_workers)
    item.connectedWorkers = manager.connected_workers
    item.targetWorkers = manager.target_workers
    item.units = manager.units
    item.pendingUnits = manager.pending_units
    if manager.last_target is not None:
        item.hasTarget = True
        _set_target(item.init("lastTarget"), manager.last_target)
    item.secondsSinceHeartbeat = manager.seconds_since_heartbeat
    item.workerCostPerHour = manager.worker_cost_per_hour
    item.bootSeconds = manager.boot_seconds
    item.minWorkers = manager.min_workers
    item.bufferWorkers = manager.buffer_workers


def encode_snapshot(b: Any, msg: m.StatusSnapshot) -> None:
    b.time = msg.time
    b.wallTime = msg.wall_time
    b.feedVersion = msg.feed_version
    stats = b.init("scheduler")
    for python_name, wire_name in _STATS_FIELDS:
        setattr(stats, wire_name, getattr(msg.scheduler, python_name))
    for item, worker in zip(b.init("workers", len(msg.workers)), msg.workers, strict=True):
        _set_worker(item, worker)
    for item, client in zip(b.init("clients", len(msg.clients)), msg.clients, strict=True):
        item.clientId = client.client_id
        item.tasks = client.tasks
        item.name = client.name
        item.hostname = client.hostname
        _set_counts(item.init("counts"), client.counts)
        item.awaySeconds = client.away_seconds
        item.resumeSeconds = client.resume_seconds
    for item, manager in zip(b.init("managers", len(msg.managers)), msg.managers, strict=True):
        _set_manager(item, manager)
    for item, group in zip(b.init("pending", len(msg.pending)), msg.pending, strict=True):
        set_capabilities(item, "capabilities", group.capabilities)
        item.count = group.count
        item.reason = group.reason
        item.running = group.running
        item.oldestQueuedSeconds = group.oldest_queued_seconds
    for item, function in zip(b.init("functions", len(msg.functions)), msg.functions, strict=True):
        item.name = function.name
        _set_counts(item.init("counts"), function.counts)
    for item, count in zip(b.init("messageCounts", len(msg.message_counts)), msg.message_counts, strict=True):
        item.name, item.sent, item.received = count.name, count.sent, count.received
    for item, job in zip(b.init("jobs", len(msg.jobs)), msg.jobs, strict=True):
        item.name, item.state, item.done, item.total = job.name, job.state, job.done, job.total
        item.submitterConnected = job.submitter_connected
        item.failed, item.submitter, item.ownerKey = job.failed, job.submitter, job.owner_key
        item.ageSeconds = job.age_seconds


def encode_transitions(b: Any, msg: m.TaskTransitions) -> None:
    b.feedVersion = msg.feed_version
    b.wallTime = msg.wall_time
    b.dropped = msg.dropped
    for item, transition in zip(b.init("transitions", len(msg.transitions)), msg.transitions, strict=True):
        item.taskId = transition.task_id
        item.state = transition.state
        item.workerId = transition.worker_id
        item.functionName = transition.function_name
        item.wallTime = transition.wall_time
        item.clientId = transition.client_id
        if transition.run_seconds:
            item.runSeconds = transition.run_seconds
            item.peakMemoryBytes = transition.peak_memory_bytes


def encode_decisions(b: Any, msg: m.ScalingDecisions) -> None:
    b.feedVersion = msg.feed_version
    b.wallTime = msg.wall_time
    for item, decision in zip(b.init("decisions", len(msg.decisions)), msg.decisions, strict=True):
        item.managerId = decision.manager_id
        item.fromWorkers = decision.from_workers
        item.toWorkers = decision.to_workers
        item.reason = decision.reason
        item.wallTime = decision.wall_time


# ---------------------------------------------------------------- decoding


def _counts(r: Any) -> m.TaskCounts:
    return m.TaskCounts(*(getattr(r, name) for name in _COUNT_FIELDS))


def _worker(w: Any) -> m.WorkerSummary:
    return m.WorkerSummary(
        w.workerId, w.managerId, capabilities_of(w.capabilities), w.capacity, w.assigned, worker_status_of(w.status),
        w.cpuPercent, w.rssBytes, w.lastSeenSecondsAgo, w.hostname, w.pid, w.lagSeconds, w.workerType,
        w.connectedSecondsAgo,
    )  # fmt: skip


def _manager(g: Any) -> m.ManagerSummary:
    target = None
    if g.hasTarget:
        entries = tuple(m.TargetEntry(capabilities_of(e.capabilities), e.workers) for e in g.lastTarget.entries)
        target = m.ManagerTarget(entries, tuple(g.lastTarget.drain), tuple(g.lastTarget.connected))
    return m.ManagerSummary(
        g.managerId, g.managerType, capabilities_of(g.capabilities), limit_of(g.maxWorkers), g.connectedWorkers,
        g.targetWorkers, g.units, g.pendingUnits, target, g.secondsSinceHeartbeat, g.workerCostPerHour,
        g.bootSeconds, g.minWorkers, g.bufferWorkers,
    )  # fmt: skip


def decode_snapshot(r: Any) -> m.StatusSnapshot:
    stats = m.SchedulerStats(**{python_name: getattr(r.scheduler, wire) for python_name, wire in _STATS_FIELDS})
    return m.StatusSnapshot(
        time=r.time,
        scheduler=stats,
        workers=tuple(_worker(w) for w in r.workers),
        clients=tuple(
            m.ClientSummary(c.clientId, c.tasks, c.name, c.hostname, _counts(c.counts), c.awaySeconds, c.resumeSeconds)
            for c in r.clients
        ),
        managers=tuple(_manager(g) for g in r.managers),
        pending=tuple(
            m.PendingGroup(capabilities_of(p.capabilities), p.count, p.reason, p.running, p.oldestQueuedSeconds)
            for p in r.pending
        ),
        wall_time=r.wallTime,
        feed_version=r.feedVersion,
        functions=tuple(m.FunctionSummary(f.name, _counts(f.counts)) for f in r.functions),
        message_counts=tuple(m.MessageCount(c.name, c.sent, c.received) for c in r.messageCounts),
        jobs=tuple(
            m.JobSummary(
                j.name, j.state, j.done, j.total, j.submitterConnected, j.failed, j.submitter, j.ownerKey, j.ageSeconds
            )
            for j in r.jobs
        ),
    )


def decode_transitions(r: Any) -> m.TaskTransitions:
    transitions = tuple(
        m.TaskTransition(
            TaskID(t.taskId),
            t.state,
            t.workerId,
            t.functionName,
            t.wallTime,
            t.runSeconds,
            t.peakMemoryBytes,
            t.clientId,
        )
        for t in r.transitions
    )
    return m.TaskTransitions(transitions, r.dropped, r.wallTime, r.feedVersion)


def decode_decisions(r: Any) -> m.ScalingDecisions:
    decisions = tuple(
        m.ScalingDecision(d.managerId, d.fromWorkers, d.toWorkers, d.reason, d.wallTime) for d in r.decisions
    )
    return m.ScalingDecisions(decisions, r.wallTime, r.feedVersion)


MONITOR_ENCODERS: dict[type, tuple[str, Callable[[Any, Any], None]]] = {
    m.StatusSnapshot: ("statusSnapshot", encode_snapshot),
    m.TaskTransitions: ("taskTransitions", encode_transitions),
    m.ScalingDecisions: ("scalingDecisions", encode_decisions),
}
MONITOR_DECODERS: dict[str, Callable[[Any], m.Message]] = {
    "statusSnapshot": decode_snapshot,
    "taskTransitions": decode_transitions,
    "scalingDecisions": decode_decisions,
}
