"""The agent core's records of its processors and of the tasks it holds (pure: no I/O, no clock).

A processor is an execution slot the executor runs (for the zygote executor, a forked process). A held task's
state is its state in the processor protocol (`scaler.protocol.processor_protocol`: QUEUED here, then STAGED,
COMPUTING, PARKED, RESUMING or STOPPING in its processor), as the agent sees it; every move below is one of that
table's. A processor computes at most one task (`task_id`, processor state RUNNING); tasks parked in it do not
count, and its slot serves other tasks meanwhile. With `NestedParents.THREAD` (the default) a processor whose
tasks are all parked is IDLE and takes the next task, in a thread of its own, so one process serves a whole nested
computation; with PROCESS it is PARKED and takes no new task, so every waiting parent keeps a process of its own
(a crash of another task never reaches it). A computing processor may also hold STAGED tasks, which compute there
next, in order.

Every change of a processor's state, and of the tasks parked or staged in it, goes through this table, which
keeps the counts the agent reads on every event (no scan of the processors).

Invariants (a HOSTING processor counts as a RUNNING one for them: its `task_id` is an actor's start task, and it has
nothing staged): a RUNNING processor's `task_id` is a held task in state COMPUTING or STOPPING whose `processor` is it
(and only a RUNNING processor has a `task_id`); every task in a processor's `parked` is a held task in state PARKED
or RESUMING whose `processor` is it; every task in its `staged` is a held task in state STAGED whose `processor` is
it, and only a RUNNING processor has staged tasks; an IDLE, PARKED or WRITING processor computes nothing; a QUEUED
task is in no processor. A processor is WRITING only while its `writing` flag is set.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field

from scaler.config.sections import NestedParents
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import OUTCOMES, ProcessorOutcome, ProcessorTaskEvent, ProcessorTaskState


class ProcessorState(enum.IntEnum):  #: an int: counted in a list, on every event
    STARTING = 0
    IDLE = 1  #: computes nothing and may take a task (it may hold parked tasks in threads)
    RUNNING = 2
    PARKED = 3  #: computes nothing, holds a parked task and takes no new one (PROCESS mode)
    STOPPING = 4  #: being killed; its exit is expected
    #: computes an actor's start task whose actor is built (ActorReady): it serves the actor's calls while the actor
    #: lives, and takes no slot and no other task (agent/core.py, rule 5); IDLE again when the actor ends
    HOSTING = 5
    #: computes nothing but still writes results it announced (ProcessorWriting; agent/core.py rule 8): it takes no
    #: slot, no task and no resume, and is not retired; IDLE (or PARKED) again once its writes are done
    WRITING = 6


#: Members read on every event, as module constants (cheaper than from their enum class).
_QUEUED, _STAGED, _COMPUTING, _PARKED, _RESUMING = (
    ProcessorTaskState.QUEUED,
    ProcessorTaskState.STAGED,
    ProcessorTaskState.COMPUTING,
    ProcessorTaskState.PARKED,
    ProcessorTaskState.RESUMING,
)
_RUNNING, _IDLE, _PARKED_PROCESSOR = ProcessorState.RUNNING, ProcessorState.IDLE, ProcessorState.PARKED
_WRITING = ProcessorState.WRITING
_NOT_SERVING = (ProcessorState.STOPPING, ProcessorState.STARTING)
_PARK, _ASK_RESUME, _END = ProcessorTaskEvent.PARK, ProcessorTaskEvent.ASK_RESUME, ProcessorTaskEvent.END


@dataclass(slots=True)
class ProcessorRecord:
    processor_id: bytes
    state: ProcessorState = ProcessorState.STARTING
    task_id: TaskID | None = None  #: the task it computes (RUNNING only)
    pid: int = 0
    #: tasks parked in it, in the order they parked (a dict used as an ordered set)
    parked: dict[TaskID, None] = field(default_factory=dict)
    #: tasks sent to it ahead of their turn, in the order it runs them (RUNNING only)
    staged: collections.deque[TaskID] = field(default_factory=collections.deque)
    #: staged tasks taken back from it (`unstage`) whose answer it still owes: that answer is not theirs any more
    withdrawn: set[TaskID] = field(default_factory=set)
    #: it still writes results it announced (ProcessorWriting): it computes nothing more (WRITING) until they are done
    writing: bool = False

    @property
    def shown_state(self) -> str:
        """What the monitor shows: a processor that computes nothing but holds waiting parents is "blocked"."""
        if self.state in (ProcessorState.IDLE, ProcessorState.PARKED) and self.parked:
            return "blocked"
        return self.state.name.lower()


@dataclass(slots=True)
class HeldTask:
    task: m.Task
    sequence: int
    processor: bytes | None = None  #: where it is staged, computes or is parked
    started_at: float = 0.0  #: when it started computing
    state: ProcessorTaskState = ProcessorTaskState.QUEUED
    #: STOPPING only: when the agent stopped it (answered for already; its slot stays counted until its processor
    #: reports it stopped, or is killed)
    stopped_at: float = 0.0


class ProcessorTable:
    """Processors and held tasks, and the moves between their states; the agent core decides when."""

    def __init__(self, nested_parents: NestedParents) -> None:
        self.parents_share_processors = nested_parents is NestedParents.THREAD
        self.processors: dict[bytes, ProcessorRecord] = {}  #: read it; change it through add/remove/set_state
        self.tasks: dict[TaskID, HeldTask] = {}
        self._counts = [0] * len(ProcessorState)  #: processors by state
        self._parked = 0
        self._staged = 0
        #: parked tasks whose futures are done, in the order they asked (a dict used as an ordered set)
        self.resuming: dict[TaskID, None] = {}
        #: actors' start tasks whose actor is built: their processor is HOSTING while they compute (agent/core.py)
        self.hosted: set[TaskID] = set()
        #: processors that hosted an actor, ever: a lending worker's scheduler lends them no more (pool.py); a dict used
        #: as an ordered set
        self.former_hosts: dict[bytes, None] = {}

    # ------------------------------------------------------------ counts

    @property
    def running(self) -> int:
        return self._counts[_RUNNING]

    @property
    def parked(self) -> int:
        return self._parked

    @property
    def staged(self) -> int:
        return self._staged

    def count(self, state: ProcessorState) -> int:
        return self._counts[state]

    def host(self, processor: ProcessorRecord, actor_id: TaskID) -> None:
        """The processor's computing task is an actor, now built: it takes no slot while the actor lives (HOSTING),
        nor after a call of the actor parked on nested futures and goes on (`resume`)."""
        if processor.state is _RUNNING and processor.task_id == actor_id and not processor.staged:
            self.hosted.add(actor_id)
            self.former_hosts[processor.processor_id] = None
            self.set_state(processor, ProcessorState.HOSTING)

    def takes_slot(self, task_id: TaskID) -> bool:
        """Whether the task computes in a slot (an actor's built start task does not)."""
        return task_id not in self.hosted

    # ------------------------------------------------------------ processors

    def add(self, processor_id: bytes) -> ProcessorRecord:
        processor = self.processors[processor_id] = ProcessorRecord(processor_id)
        self._counts[processor.state] += 1
        return processor

    def remove(self, processor_id: bytes) -> None:
        processor = self.processors.pop(processor_id, None)
        self.former_hosts.pop(processor_id, None)
        if processor is not None:
            self._counts[processor.state] -= 1
            self._parked -= len(processor.parked)
            self._staged -= len(processor.staged)

    def set_state(self, processor: ProcessorRecord, state: ProcessorState) -> None:
        self._counts[processor.state] -= 1
        self._counts[state] += 1
        processor.state = state

    def idle_processor(self) -> ProcessorRecord | None:
        """A processor that may take a task now: one that holds parked tasks first, so that the parents of a
        nested computation gather in one process and spare processors go unused (and are retired)."""
        chosen = None
        for processor in self.processors.values():
            if processor.state is _IDLE:
                if processor.parked:
                    return processor
                chosen = chosen or processor
        return chosen

    def set_writing(self, processor: ProcessorRecord, writing: bool) -> None:
        """The processor says it still writes results it announced, or is done with them. One that computes nothing is
        WRITING meanwhile (a computing one is once its task ends, `_free`), and rests again once they are done."""
        processor.writing = writing
        if writing and processor.state in (_IDLE, _PARKED_PROCESSOR):
            self.set_state(processor, _WRITING)
        elif not writing and processor.state is _WRITING:
            self._rest(processor)

    # ------------------------------------------------------------ moves

    def start(self, processor: ProcessorRecord, held: HeldTask, now: float) -> None:
        """Send a queued task to a processor that computes nothing: SEND and TURN at once (it computes from `now`)."""
        held.processor, held.started_at, held.state = processor.processor_id, now, _COMPUTING
        processor.task_id = held.task.task_id
        self.set_state(processor, _RUNNING)

    def stage(self, processor: ProcessorRecord, held: HeldTask) -> None:
        """Send a queued task to a computing processor ahead of its turn (SEND)."""
        assert processor.state is _RUNNING, "only a computing processor takes staged tasks"
        held.processor, held.state = processor.processor_id, _STAGED
        processor.staged.append(held.task.task_id)
        self._staged += 1

    def park(self, processor: ProcessorRecord, task_id: TaskID, now: float) -> bool:
        """The processor's computing task waits on nested futures (PARK; its first staged task, if any, computes
        from `now`). False when it is not that processor's computing task, or was stopped (UNWIND: it stays counted
        as computing until it is gone)."""
        held = self.tasks.get(task_id)
        if held is None or processor.task_id != task_id or OUTCOMES[_PARK][held.state] is not ProcessorOutcome.PARK:
            return False
        held.state = _PARKED
        processor.parked[task_id] = None
        processor.task_id = None
        self._parked += 1
        self._free(processor, now)
        return True

    def ask_resume(self, processor: ProcessorRecord, task_id: TaskID) -> None:
        """A parked task's futures are done (ASK_RESUME): it waits for a slot, and for its processor to be free."""
        held = self.tasks.get(task_id)
        if (
            held is not None
            and task_id in processor.parked
            and OUTCOMES[_ASK_RESUME][held.state] is ProcessorOutcome.ASK
        ):
            held.state = _RESUMING
            self.resuming[task_id] = None

    def resumable(self) -> list[tuple[ProcessorRecord, TaskID]]:
        """Parked tasks that may run on now (their processor computes nothing), oldest request first."""
        found = []
        busy: set[bytes] = set()
        for task_id in self.resuming:
            held = self.tasks[task_id]
            assert held.processor is not None
            processor = self.processors[held.processor]
            if processor.state in (_IDLE, _PARKED_PROCESSOR) and held.processor not in busy:
                busy.add(held.processor)
                found.append((processor, task_id))
        return found

    def resume(self, processor: ProcessorRecord, task_id: TaskID) -> None:
        """Give a resuming task the turn back: RESUME and TURN at once (its processor computes nothing)."""
        del self.resuming[task_id]
        del processor.parked[task_id]
        self._parked -= 1
        self.tasks[task_id].state = _COMPUTING
        processor.task_id = task_id
        self.set_state(processor, _RUNNING if task_id not in self.hosted else ProcessorState.HOSTING)

    def finish(self, processor: ProcessorRecord, task_id: TaskID, now: float) -> HeldTask | None:
        """The task's TaskResult came from this processor (END): a task that computed there is held no more (FINISH:
        returned, for its result to go on), and so is a stopped one (UNWOUND: its slot is free; None is returned);
        the processor's first staged task, if any, computes from `now`. None too for a task not held there."""
        held = self.tasks.get(task_id)
        if held is None or held.processor != processor.processor_id:
            return None
        outcome = OUTCOMES[_END][held.state]
        if outcome is ProcessorOutcome.IGNORE:
            return None
        self.drop(task_id, now)
        return held if outcome is ProcessorOutcome.FINISH else None

    def drop(self, task_id: TaskID, now: float) -> HeldTask | None:
        """Forget a held task wherever it is (finished, cancelled, timed out, returned, reported lost). `now`
        matters only when it was computing: its processor's first staged task computes from then."""
        held = self.tasks.pop(task_id, None)
        if held is None:
            return None
        self.resuming.pop(task_id, None)
        self.hosted.discard(task_id)
        processor = self.processors.get(held.processor) if held.processor is not None else None
        if processor is None:
            return held
        if task_id in processor.parked:
            del processor.parked[task_id]
            self._parked -= 1
            if processor.state is _PARKED_PROCESSOR and not processor.parked:
                self.set_state(processor, _IDLE)
        elif processor.task_id == task_id:
            processor.task_id = None
            self._free(processor, now)
        elif processor.staged and task_id in processor.staged:
            processor.staged.remove(task_id)
            self._staged -= 1
        return held

    def unstage(self, processor: ProcessorRecord) -> list[HeldTask]:
        """Take the processor's staged tasks back (the caller withdraws them with a TaskCancel): QUEUED again, in no
        processor (the caller queues them again); the processor's answer for each is awaited in `withdrawn`."""
        staged = [self.tasks[task_id] for task_id in processor.staged]
        self._staged -= len(staged)
        processor.withdrawn.update(processor.staged)
        processor.staged.clear()
        for held in staged:
            held.processor, held.state = None, _QUEUED
        return staged

    def vacate(self, processor: ProcessorRecord) -> tuple[TaskID | None, list[TaskID], list[HeldTask]]:
        """The processor is being stopped or is gone (GONE): its computing task and its parked ones, all dropped, and
        its staged tasks, back in state QUEUED (REQUEUE: the caller queues them again, they never started there)."""
        staged = [self.tasks[task_id] for task_id in processor.staged]
        self._staged -= len(processor.staged)
        processor.staged.clear()
        for held in staged:
            held.processor, held.state = None, _QUEUED
        running = processor.task_id
        parked = list(processor.parked)
        for task_id in (*parked, *([running] if running is not None else [])):
            self.drop(task_id, 0.0)  # nothing is staged any more: no task starts computing
        return running, parked, staged

    def _free(self, processor: ProcessorRecord, now: float) -> None:
        """The processor's computing task ended or parked: the turn passes to its first staged task, which computes
        from `now`; with none staged, it rests (`_rest`)."""
        if processor.state in _NOT_SERVING:
            return
        if processor.staged:
            task_id = processor.staged.popleft()
            self._staged -= 1
            held = self.tasks[task_id]
            held.state, held.started_at = _COMPUTING, now  # TURN: START
            processor.task_id = task_id
            return
        self._rest(processor)

    def _rest(self, processor: ProcessorRecord) -> None:
        """The processor computes nothing: WRITING while it writes results it announced; else it takes new work,
        unless it keeps a parent in "process" mode."""
        if processor.writing:
            self.set_state(processor, _WRITING)
            return
        shares = self.parents_share_processors or not processor.parked
        self.set_state(processor, _IDLE if shares else _PARKED_PROCESSOR)
