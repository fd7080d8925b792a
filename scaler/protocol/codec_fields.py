"""Cap'n Proto pieces several messages share (capabilities, worker limits, worker status): part of the codec."""

from __future__ import annotations

from typing import Any

from scaler.protocol import messages as m


def set_capabilities(builder: Any, name: str, capabilities: m.Capabilities) -> None:
    if not capabilities:
        return
    items = builder.init(name, len(capabilities))
    for item, (cap_name, value) in zip(items, capabilities, strict=True):
        item.name = cap_name
        item.value = value


def capabilities_of(reader: Any) -> m.Capabilities:
    return tuple(sorted((c.name, c.value) for c in reader))


def set_limit(builder: Any, limit: m.WorkerLimit) -> None:
    if limit is None:
        builder.unlimited = None
    else:
        builder.limit = limit


def limit_of(reader: Any) -> m.WorkerLimit:
    return None if reader.which() == "unlimited" else int(reader.limit)


def set_worker_status(builder: Any, status: m.WorkerStatus) -> None:
    builder.queued = status.queued
    builder.running = status.running
    builder.blocked = status.blocked
    builder.freeMemoryBytes = status.free_memory_bytes
    builder.memoryBytes = status.memory_bytes
    builder.memoryLimitBytes = status.memory_limit_bytes
    builder.memoryLimitSource = status.memory_limit_source
    if status.processors:
        items = builder.init("processors", len(status.processors))
        for item, processor in zip(items, status.processors, strict=True):
            item.pid = processor.pid
            item.cpuPercent = processor.cpu_percent
            item.rssBytes = processor.rss_bytes
            item.state = processor.state
            item.memoryBytes = processor.memory_bytes


def worker_status_of(reader: Any) -> m.WorkerStatus:
    return m.WorkerStatus(
        queued=reader.queued,
        running=reader.running,
        blocked=reader.blocked,
        free_memory_bytes=reader.freeMemoryBytes,
        processors=tuple(
            m.ProcessorStatus(p.pid, p.cpuPercent, p.rssBytes, p.state, p.memoryBytes) for p in reader.processors
        ),
        memory_bytes=reader.memoryBytes,
        memory_limit_bytes=reader.memoryLimitBytes,
        memory_limit_source=reader.memoryLimitSource,
    )
