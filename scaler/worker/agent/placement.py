"""Which held task goes to which processor, and when (pure): the agent's queue of tasks not sent to any processor,
and the sends that move them into processors, under the processor protocol (`scaler.protocol.processor_protocol`).

Rules:
1. At most `slots` processors compute at once. Parked tasks that asked to go on are given the turn back first
   (oldest request first, each once its processor computes nothing), so that parents finish; then queued tasks,
   highest priority first, then in the order received, start on idle processors (one that holds parked tasks
   first, so that a nested computation gathers in one process and spare processors retire).
2. Tiny tasks are *staged*: while a processor computes, it is sent the next queued tasks ahead (up to
   `max_staged_tasks`, fewer as tasks get longer: about `estimates.STAGING_HORIZON_SECONDS` of work), so that it
   goes from one to the next without waiting for the agent, and one write and one read carry several tasks. What
   is tiny is learned per function from the tasks that finished here: a function not seen finishing yet, or slower
   than the horizon, is not staged (staging stops at it, so that tasks keep their order), and nothing is staged
   behind a task of such a function: no task waits in a processor, where the scheduler cannot take it back for
   another worker, behind a long task or in front of one. Only a processor that holds no parked task takes staged
   tasks, and only in "thread" mode (in "process" mode a parent's process must not run other tasks).
   A function's run time is a guess from its past calls: a call may be long where the others were tiny (joblib's
   batches, or a function whose time depends on its arguments). So nothing is staged behind a task that has
   computed `STAGED_WAIT_SECONDS` already, and the tasks staged behind it then are withdrawn and queued here again
   (agent/core.py, rule 7), for an idle processor or for the scheduler to take back: a staged task waits at most
   about that long behind a task that proved long.
3. A staged task counts as queued, for the scheduler and the monitor, until the turn passes to it. The staged
   tasks of a processor that is killed or dies come back to this queue (they never started there).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import ProcessorTaskState
from scaler.protocol.staging import STAGED_WAIT_SECONDS
from scaler.worker.agent.events import Effect, ToProcessor
from scaler.worker.agent.processor_table import HeldTask, ProcessorRecord, ProcessorState, ProcessorTable

_QUEUED, _RUNNING = ProcessorTaskState.QUEUED, ProcessorState.RUNNING  #: as module constants: read on every task

#: How long a processor's computing task may have computed for tasks to be staged behind it, and for those staged
#: behind it to stay there (rule 2): a task of a tiny function that computes this long is not tiny. Shared with the
#: scheduler's lent processors (scaler/protocol/staging.py).
__all__ = ["STAGED_WAIT_SECONDS", "Placement"]


class Placement:
    """The queue, and the sends of resumes, tasks to start and tasks to stage; what it sends goes to `effects`."""

    def __init__(self, table: ProcessorTable, slots: int, max_staged_tasks: int, effects: list[Effect]) -> None:
        self._table = table
        self._slots = slots
        self._max_staged_tasks = max_staged_tasks
        self._effects = effects
        #: (-priority, sequence, task) of the held tasks in state QUEUED; an entry whose task left that state is
        #: dropped when met
        self._queue: list[tuple[int, int, TaskID]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        """Queued tasks (entries of tasks cancelled or returned meanwhile included, until met)."""
        return len(self._queue)

    def accept(self, task: m.Task) -> None:
        """A task from the scheduler: held from now on, queued."""
        held = self._table.tasks[task.task_id] = HeldTask(task, next(self._sequence))
        heapq.heappush(self._queue, (-task.priority, held.sequence, task.task_id))

    def queue_again(self, staged: list[HeldTask]) -> None:
        """Tasks staged in a processor that is gone: they had not started there, and wait here again."""
        for held in staged:
            heapq.heappush(self._queue, (-held.task.priority, held.sequence, held.task.task_id))

    def place(self, now: float, staging_depth: Callable[[str, int], int]) -> None:
        """Resume parents, start tasks, stage tiny ones, as far as slots and processors allow (rules 1 and 2);
        `staging_depth(function_name, max_staged_tasks)` is the run-time estimates' word on a function."""
        if self._table.resuming:
            self._resume_parents()
        self._start_tasks(now)
        if self._queue and self._max_staged_tasks and self._table.parents_share_processors:
            self._stage_tasks(now, staging_depth)

    def _resume_parents(self) -> None:
        table = self._table
        for processor, task_id in table.resumable():
            if table.running >= self._slots and table.takes_slot(task_id):
                continue
            table.resume(processor, task_id)
            self._send(processor, m.ProcessorResume(task_id))

    def _start_tasks(self, now: float) -> None:
        table = self._table
        while self._queue and table.running < self._slots:
            idle = table.idle_processor()
            if idle is None:
                break
            held = self._first_queued()
            if held is None:
                return
            heapq.heappop(self._queue)
            table.start(idle, held, now)
            self._send(idle, held.task)

    def _stage_tasks(self, now: float, staging_depth: Callable[[str, int], int]) -> None:
        """Queued tasks go to computing processors ahead of their turn, one each in turn, as deep as the next task's
        function allows (rule 2)."""
        table, most = self._table, self._max_staged_tasks
        takers = [  # not behind an actor: it holds the turn while it lives (agent/core.py, rule 5)
            p
            for p in table.processors.values()
            if p.state is _RUNNING
            and not p.parked
            and not _serves_actor(table, p)
            and not _computed_long(table, p, now)
        ]
        while takers:
            for processor in takers[:]:
                held = self._first_queued()
                if held is None:
                    return
                assert processor.task_id is not None
                computing = table.tasks[processor.task_id].task
                depth = min(staging_depth(held.task.function_name, most), staging_depth(computing.function_name, most))
                if len(processor.staged) >= depth:
                    takers.remove(processor)
                    continue
                heapq.heappop(self._queue)
                table.stage(processor, held)
                self._send(processor, held.task)

    def _first_queued(self) -> HeldTask | None:
        """The queued task to send first, left in the queue; None when none is left."""
        tasks = self._table.tasks
        while self._queue:
            held = tasks.get(self._queue[0][2])
            if held is not None and held.state is _QUEUED:
                return held
            heapq.heappop(self._queue)  # cancelled or returned while queued: its entry is dropped here
        return None

    def _send(self, processor: ProcessorRecord, message: m.Message) -> None:
        self._effects.append(ToProcessor(processor.processor_id, message))


def _computed_long(table: ProcessorTable, processor: ProcessorRecord, now: float) -> bool:
    """Whether the processor's computing task has computed STAGED_WAIT_SECONDS already (rule 2)."""
    held = table.tasks.get(processor.task_id) if processor.task_id is not None else None
    return held is not None and now - held.started_at >= STAGED_WAIT_SECONDS


def _serves_actor(table: ProcessorTable, processor: ProcessorRecord) -> bool:
    """Whether the processor's computing task is an actor's start (it computes while the actor lives)."""
    held = table.tasks.get(processor.task_id) if processor.task_id is not None else None
    return held is not None and held.task.actor is not None
