"""The only module that knows the monitor feed's wire format: `FeedMessage` <-> [topic, payload] frames.

`encode(message) -> [topic, payload]`; `decode(frames) -> FeedMessage`. A payload whose version is not
`FEED_VERSION` raises `FeedVersionError` before anything else is read (the version is field @0 of the
root, which never moves); any other unreadable message raises `FeedDecodeError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import capnp

from scaler.protocol import feed as f
from scaler.protocol.messages import Capabilities, ProcessorStatus, TargetEntry, WorkerStatus

capnp.remove_import_hook()
_schema = capnp.load(os.path.join(os.path.dirname(__file__), "monitor.capnp"))

#: Views of large clusters exceed the reader's default traversal limit (64 MiB).
_TRAVERSAL_LIMIT = 1 << 40

_TOPICS = {topic.value.encode(): topic for topic in f.FeedTopic}
#: TaskStatus <-> the schema's enumerants, which are in the same order
_STATUS_NAMES = {
    status: "workerDied" if status is f.TaskStatus.WORKER_DIED else status.value for status in f.TaskStatus
}
_STATUS_OF_RAW = dict(enumerate(f.TaskStatus))


class FeedDecodeError(ValueError):
    """Frames that are not a feed message."""


class FeedVersionError(FeedDecodeError):
    """A feed message of another feed version than this reader's."""

    def __init__(self, version: int, reader: str = "this reader") -> None:
        super().__init__(
            f"monitor feed version {version}, {reader} reads version {f.FEED_VERSION}: install the same scaler "
            f"version as the scheduler"
        )
        self.version = version


# ---------------------------------------------------------------- encoding


def encode(message: f.FeedMessage) -> list[bytes]:
    root = _schema.FeedMessage.new_message()
    root.version = message.version
    root.wallTime = message.wall_time
    body = message.body
    if isinstance(body, f.SchedulerView):
        _set_view(root.init("status"), body)
    elif isinstance(body, f.TransitionBatch):
        _set_transitions(root.init("transitions"), body)
    else:
        _set_decision(root.init("decision"), body)
    return [message.topic.value.encode(), bytes(root.to_bytes())]


def _set_capabilities(builder: Any, name: str, capabilities: Capabilities) -> None:
    if capabilities:
        for item, (cap_name, value) in zip(builder.init(name, len(capabilities)), capabilities, strict=True):
            item.name = cap_name
            item.value = value


def _set_counts(b: Any, counts: f.TaskCounts) -> None:
    b.waiting, b.queued, b.running, b.canceling = counts.waiting, counts.queued, counts.running, counts.canceling
    b.success, b.failed, b.canceled = counts.success, counts.failed, counts.canceled
    b.workerDied, b.notFound = counts.worker_died, counts.not_found


def _set_message_counts(builder: Any, name: str, counts: tuple[tuple[str, int], ...]) -> None:
    for item, (kind, count) in zip(builder.init(name, len(counts)), counts, strict=True):
        item.type = kind
        item.count = count


def _set_view(b: Any, view: f.SchedulerView) -> None:
    b.now = view.now
    b.wallTime = view.wall_time
    b.managerTimeoutSeconds = view.manager_timeout_seconds
    s, stats = b.init("scheduler"), view.scheduler
    s.address, s.cpuPercent, s.rssBytes = stats.address, stats.cpu_percent, stats.rss_bytes
    s.objectCount, s.objectBytes, s.graphs = stats.object_count, stats.object_bytes, stats.graphs
    _set_message_counts(s, "messagesSent", stats.messages_sent)
    _set_message_counts(s, "messagesReceived", stats.messages_received)
    _set_counts(b.init("tasks"), view.tasks)
    for item, group in zip(b.init("groups", len(view.groups)), view.groups, strict=True):
        _set_capabilities(item, "capabilities", group.capabilities)
        item.queued, item.running = group.queued, group.running
        item.oldestQueuedSeconds, item.reason = group.oldest_queued_seconds, group.reason
    for item, worker in zip(b.init("workers", len(view.workers)), view.workers, strict=True):
        _set_worker(item, worker)
    for item, manager in zip(b.init("managers", len(view.managers)), view.managers, strict=True):
        _set_manager(item, manager)
    for item, client in zip(b.init("clients", len(view.clients)), view.clients, strict=True):
        item.clientId, item.name, item.hostname, item.pid = client.client_id, client.name, client.hostname, client.pid
        _set_counts(item.init("tasks"), client.tasks)
    for item, function in zip(b.init("functions", len(view.functions)), view.functions, strict=True):
        item.functionName = function.function_name
        _set_counts(item.init("tasks"), function.tasks)
    for item, decision in zip(b.init("decisions", len(view.decisions)), view.decisions, strict=True):
        _set_decision(item, decision)


def _set_worker(b: Any, worker: f.WorkerEntry) -> None:
    b.workerId, b.hostname, b.pid, b.managerId = worker.worker_id, worker.hostname, worker.pid, worker.manager_id
    _set_capabilities(b, "capabilities", worker.capabilities)
    b.capacity, b.assigned = worker.capacity, worker.assigned
    status = worker.status
    b.queued, b.running, b.blocked, b.freeMemoryBytes = (
        status.queued, status.running, status.blocked, status.free_memory_bytes
    )  # fmt: skip
    for item, processor in zip(b.init("processors", len(status.processors)), status.processors, strict=True):
        item.pid, item.cpuPercent, item.rssBytes, item.state = (
            processor.pid, processor.cpu_percent, processor.rss_bytes, processor.state
        )  # fmt: skip
    b.cpuPercent, b.rssBytes = worker.cpu_percent, worker.rss_bytes
    b.lagSeconds, b.lastSeenSeconds, b.connectedSeconds = (
        worker.lag_seconds, worker.last_seen_seconds, worker.connected_seconds
    )  # fmt: skip


def _set_manager(b: Any, manager: f.ManagerEntry) -> None:
    b.managerId, b.managerType = manager.manager_id, manager.manager_type
    _set_capabilities(b, "capabilities", manager.capabilities)
    if manager.max_workers is None:
        b.unlimited = None
    else:
        b.maxWorkers = manager.max_workers
    b.hasTarget = manager.target is not None
    target = manager.target or ()
    for item, entry in zip(b.init("target", len(target)), target, strict=True):
        _set_capabilities(item, "capabilities", entry.capabilities)
        item.workers = entry.workers
    b.units, b.pendingUnits, b.connectedWorkers = manager.units, manager.pending_units, manager.connected_workers
    b.secondsSinceHeartbeat = manager.seconds_since_heartbeat


def _set_decision(b: Any, decision: f.ScalingDecision) -> None:
    b.wallTime, b.managerId, b.policy = decision.wall_time, decision.manager_id, decision.policy
    b.workersBefore, b.workersAfter, b.reason = decision.workers_before, decision.workers_after, decision.reason


def _set_transitions(b: Any, batch: f.TransitionBatch) -> None:
    transitions = batch.transitions
    # whole lists at once: one call per field instead of one per transition
    b.taskIds = [transition.task_id for transition in transitions]
    b.statuses = [_STATUS_NAMES[transition.status] for transition in transitions]
    b.workerIds = [transition.worker_id for transition in transitions]
    b.wallTimes = [transition.wall_time for transition in transitions]
    b.dropped = batch.dropped


# ---------------------------------------------------------------- decoding


def decode(frames: Sequence[bytes], reader: str = "this reader") -> f.FeedMessage:
    """[topic, payload] -> FeedMessage. `reader` names the program in a version error ("scaler_top")."""
    if len(frames) != 2:
        raise FeedDecodeError(f"a feed message has 2 frames (topic, payload), not {len(frames)}")
    topic = _TOPICS.get(bytes(frames[0]))
    if topic is None:
        raise FeedDecodeError(f"unknown monitor feed topic {bytes(frames[0])[:40]!r}")
    payload = bytes(frames[1])
    try:
        with _schema.FeedMessage.from_bytes(payload, traversal_limit_in_words=_TRAVERSAL_LIMIT) as root:
            version = int(root.version)
            if version != f.FEED_VERSION:
                raise FeedVersionError(version, reader)
            kind = root.which()
            body: f.FeedBody
            if kind == "status":
                body = _view(root.status)
            elif kind == "transitions":
                body = _transitions(root.transitions)
            else:
                body = _decision(root.decision)
            message = f.FeedMessage(version, root.wallTime, body)
    except FeedDecodeError:
        raise
    except Exception as error:
        raise FeedDecodeError(f"not a valid monitor feed message ({len(payload)} bytes): {error}") from None
    if message.topic is not topic:
        raise FeedDecodeError(f"a {message.topic.value} message was published on the {topic.value} topic")
    return message


def _capabilities(reader: Any) -> Capabilities:
    return tuple(sorted((item.name, item.value) for item in reader))


def _counts(r: Any) -> f.TaskCounts:
    return f.TaskCounts(r.waiting, r.queued, r.running, r.canceling, r.success, r.failed, r.canceled, r.workerDied,
                        r.notFound)  # fmt: skip


def _message_counts(reader: Any) -> tuple[tuple[str, int], ...]:
    return tuple((item.type, item.count) for item in reader)


def _view(r: Any) -> f.SchedulerView:
    s = r.scheduler
    stats = f.SchedulerStats(
        s.address, s.cpuPercent, s.rssBytes, s.objectCount, s.objectBytes, _message_counts(s.messagesSent),
        _message_counts(s.messagesReceived), s.graphs,
    )  # fmt: skip
    return f.SchedulerView(
        now=r.now,
        wall_time=r.wallTime,
        scheduler=stats,
        tasks=_counts(r.tasks),
        groups=tuple(
            f.TaskGroupEntry(_capabilities(g.capabilities), g.queued, g.running, g.oldestQueuedSeconds, g.reason)
            for g in r.groups
        ),
        workers=tuple(_worker(w) for w in r.workers),
        managers=tuple(_manager(g) for g in r.managers),
        clients=tuple(f.ClientEntry(c.clientId, c.name, c.hostname, c.pid, _counts(c.tasks)) for c in r.clients),
        functions=tuple(f.FunctionEntry(fn.functionName, _counts(fn.tasks)) for fn in r.functions),
        decisions=tuple(_decision(d) for d in r.decisions),
        manager_timeout_seconds=r.managerTimeoutSeconds,
    )


def _worker(w: Any) -> f.WorkerEntry:
    processors = tuple(ProcessorStatus(p.pid, p.cpuPercent, p.rssBytes, p.state) for p in w.processors)
    return f.WorkerEntry(
        w.workerId, w.hostname, w.pid, w.managerId, _capabilities(w.capabilities), w.capacity, w.assigned,
        WorkerStatus(w.queued, w.running, w.blocked, w.freeMemoryBytes, processors), w.cpuPercent, w.rssBytes,
        w.lagSeconds, w.lastSeenSeconds, w.connectedSeconds,
    )  # fmt: skip


def _manager(g: Any) -> f.ManagerEntry:
    target = tuple(TargetEntry(_capabilities(e.capabilities), e.workers) for e in g.target) if g.hasTarget else None
    max_workers = None if g.which() == "unlimited" else int(g.maxWorkers)
    return f.ManagerEntry(
        g.managerId, g.managerType, _capabilities(g.capabilities), max_workers, target, g.units, g.pendingUnits,
        g.connectedWorkers, g.secondsSinceHeartbeat,
    )  # fmt: skip


def _decision(d: Any) -> f.ScalingDecision:
    return f.ScalingDecision(d.wallTime, d.managerId, d.policy, d.workersBefore, d.workersAfter, d.reason)


def _transitions(r: Any) -> f.TransitionBatch:
    task_ids, statuses, workers, times = list(r.taskIds), list(r.statuses), list(r.workerIds), list(r.wallTimes)
    if not len(task_ids) == len(statuses) == len(workers) == len(times):
        raise FeedDecodeError("a transition batch whose lists have different lengths")
    transitions = tuple(
        f.TaskTransition(task_id, _STATUS_OF_RAW[status.raw], worker, at)
        for task_id, status, worker, at in zip(task_ids, statuses, workers, times, strict=True)
    )
    return f.TransitionBatch(transitions, r.dropped)
