"""The worker's processors, how many it keeps, and their names (pure).

A worker keeps one processor started per slot, plus as many as the scheduler wants beyond its slots
(ProcessorsWanted: a processor that hosts an actor, or keeps a waiting parent with nested_parents "process", serves no
slot); it starts a new one for each that ends, and retires none on its own (the scheduler names a processor not needed
any more in ProcessorKill). Forking from the zygote takes milliseconds. A worker whose processors keep failing to
start gives up: after MAX_START_FAILURES in a row (or one, with a preload: the preload is to blame).
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

#: Processor start failures in a row after which the worker gives up.
MAX_START_FAILURES = 3


class ProcessorState(enum.Enum):
    STARTING = "starting"  #: spawned, not ready yet
    READY = "ready"  #: it serves its link
    STOPPING = "stopping"  #: being killed (`reason`); its exit is expected


@dataclass(slots=True)
class ProcessorRecord:
    processor_id: bytes
    state: ProcessorState = ProcessorState.STARTING
    pid: int = 0
    reason: str = ""  #: why it is being killed (STOPPING)


class ProcessorPool:
    """The processors, how many to start, their ids, and the start failures in a row."""

    def __init__(self, slots: int, prefix: bytes) -> None:
        self._slots = slots
        self._prefix = prefix
        self._ids = itertools.count()
        self.processors: dict[bytes, ProcessorRecord] = {}
        self.beyond_slots = 0  #: processors the scheduler wants beyond the slots (ProcessorsWanted)
        self.start_failures = 0  #: in a row: reset by a processor that starts

    def to_start(self) -> int:
        """How many processors to start now."""
        live = sum(1 for p in self.processors.values() if p.state is not ProcessorState.STOPPING)
        return max(0, self._slots + self.beyond_slots - live)

    def add(self) -> bytes:
        """A new processor, starting; its name, unique within the worker."""
        processor_id = self._prefix + b"-" + str(next(self._ids)).encode()
        self.processors[processor_id] = ProcessorRecord(processor_id)
        return processor_id

    def remove(self, processor_id: bytes) -> ProcessorRecord | None:
        return self.processors.pop(processor_id, None)

    def started(self) -> None:
        self.start_failures = 0

    def failed_to_start(self) -> int:
        """A processor failed while starting: the failures in a row (the worker gives up at MAX_START_FAILURES)."""
        self.start_failures += 1
        return self.start_failures
