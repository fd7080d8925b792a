"""Where a task that ran out of memory may run again, and how that is said (task_state rule 4).

A task whose processor ran out of memory on a worker of L bytes (`WorkerRecord.memory_bytes`: its declared
`memory` capability, else the limit its heartbeats report) runs again only where more than L is offered: a
connected worker, or the workers a connected manager declares (`--per-worker-capabilities memory=16GiB`), which
the capability-aware scaling policies then ask for. The lifecycle carries the outcome out; this module only
looks and words.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.config.byte_size import format_byte_size
from scaler.policy.capability import covers, memory_needed
from scaler.protocol.ids import short
from scaler.protocol.messages import Capabilities
from scaler.scheduler.core.peers import ManagerRecord, WorkerRecord


def bigger_place(workers: Iterable[WorkerRecord], managers: Iterable[ManagerRecord], key: Capabilities) -> str:
    """Where a task queued under `key` (which requires more memory) could run, in words; "" when nowhere: a
    connected worker that is not draining, else a manager whose declared workers cover `key`."""
    for worker in workers:
        if worker.draining_until is None and worker.can_run(key):
            return f"worker {short(worker.peer)} has {format_byte_size(worker.memory_bytes)}"
    for manager in managers:
        if covers(manager.capabilities, key):
            declared = format_byte_size(memory_needed(manager.capabilities))
            return f"worker manager {manager.manager_id} declares workers of {declared}"
    return ""


def not_retried(outgrown_bytes: int) -> str:
    """Why a task that ran out of memory on a worker of `outgrown_bytes` (0: unknown) is not run again."""
    if outgrown_bytes <= 0:
        return "not retried: the memory of the worker it ran on is not known yet, so no bigger worker could be chosen"
    return (
        f"not retried: no worker with more than {format_byte_size(outgrown_bytes)} of memory is connected and no "
        "worker manager declares one (a `memory` capability)"
    )


def retried(worker: bytes, outgrown_bytes: int, place: str) -> str:
    """The story's cause of the retry."""
    return (
        f"out of memory on worker {short(worker)} ({format_byte_size(outgrown_bytes)}): retried on a worker with "
        f"more memory ({place}; no retry spent)"
    )
