"""How many processors the agent keeps, and their names (pure).

One processor is kept ready (idle or starting) per slot that could start a task now, and at least one while a
slot is free; idle processors beyond that, with one of slack, retire (not one that holds parked tasks, nor one that
still writes results it announced: it is WRITING, agent/core.py rule 8, and one is started beside it when a slot is
free; nor one the agent keeps until the scheduler has read what it sent on its own link, agent/core.py rule 5). A
worker that lends its processors keeps one started per free slot, and replaces each processor that hosted an actor:
its scheduler lends it no more (its link may not take plain tasks while an actor holds its computing turn), so once
idle it is not counted ready (a new one starts) and it retires, unless the agent keeps it (as above). Kept idle
among the ready ones, such processors left the scheduler no lent processor to send that worker's tasks to: after
enough actors, a lending worker got no task again. Forking from the zygote takes milliseconds, so no spare is kept
while every slot computes. A worker whose processors keep failing to start gives up: after
MAX_START_FAILURES in a row (or one, with a preload: the preload is to blame).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

from scaler.worker.agent.processor_table import ProcessorState, ProcessorTable

#: Processor start failures in a row after which the worker gives up.
MAX_START_FAILURES = 3

_IDLE, _STARTING = ProcessorState.IDLE, ProcessorState.STARTING  #: as module constants: read on every event
_NONE: tuple[bytes, ...] = ()


class ProcessorPool:
    """The processors to start and retire, their ids, and the start failures in a row."""

    def __init__(self, slots: int, prefix: bytes, keep_all: bool = False) -> None:
        self._slots = slots
        #: one processor per slot is kept started, whatever the queue: the worker lends them (their tasks come on their
        #: own links, never through the queue)
        self._keep_all = keep_all
        self._prefix = prefix
        self._ids = itertools.count()
        self.start_failures = 0  #: in a row: reset by a processor that starts

    def new_id(self) -> bytes:
        """A name for a new processor, unique within the worker."""
        return self._prefix + b"-" + str(next(self._ids)).encode()

    def to_start(self, table: ProcessorTable, queued: int) -> int:
        """How many processors to start now, with `queued` tasks waiting in the agent."""
        return max(0, self._wanted(table, queued) - self._ready(table))

    def to_retire(self, table: ProcessorTable, queued: int, kept: Collection[bytes] = ()) -> tuple[bytes, ...]:
        """The idle processors to retire now; none of `kept` (the module docstring)."""
        replaced = self._replaced(table, kept) if self._keep_all and table.former_hosts else _NONE
        surplus = self._ready(table) - (self._wanted(table, queued) + 1)
        if surplus <= 0:
            return replaced
        retired: list[bytes] = []
        for processor in table.processors.values():
            if len(retired) == surplus:
                break
            if processor.state is _IDLE and not processor.parked and processor.processor_id not in kept:
                if processor.processor_id not in table.former_hosts or not self._keep_all:
                    retired.append(processor.processor_id)
        return replaced + tuple(retired)

    def started(self) -> None:
        self.start_failures = 0

    def failed_to_start(self) -> int:
        """A processor failed while starting: the failures in a row (the worker gives up at MAX_START_FAILURES)."""
        self.start_failures += 1
        return self.start_failures

    def _wanted(self, table: ProcessorTable, queued: int) -> int:
        free_slots = max(0, self._slots - table.running)
        return free_slots if self._keep_all else min(free_slots, max(1, queued))

    def _ready(self, table: ProcessorTable) -> int:
        ready = table.count(_IDLE) + table.count(_STARTING)
        if self._keep_all and table.former_hosts:  # lent no more: not ready for lent tasks (the module docstring)
            ready -= sum(1 for p in table.former_hosts if table.processors[p].state is _IDLE)
        return ready

    @staticmethod
    def _replaced(table: ProcessorTable, kept: Collection[bytes]) -> tuple[bytes, ...]:
        """A lending worker's idle processors that hosted an actor, to retire now (the module docstring)."""
        processors = table.processors
        return tuple(
            p for p in table.former_hosts if processors[p].state is _IDLE and not processors[p].parked and p not in kept
        )
