"""A processor's pure core: the tasks it holds and which of them computes (the processor protocol, one processor's
side), which of its threads runs what, and which thread reads its link. Events in: what a read of the
link brought, a task's thread is done, a task parks or asks to go on, a thread has nothing to run. Instructions
out: run a task on that thread (or on a new one), raise TaskAbandoned in a computing task's thread, wake a parked
task's thread, answer a withdrawn task CANCELED, cancel a stopped task's nested tasks, wake a streaming task's thread
that waits for its client's credit (a StreamCredit read raised it), hand an actor's calls to the thread that serves it
(they never wait for the turn: the actor's start task holds it while the actor lives, `scaler.worker.actors`), refuse
a call for an actor this processor does not hold. No threads, no I/O, no clock:
`threads.TaskThreads` calls it under one lock and carries its instructions out.

The task states, the events that move them and the rules (order, the computing turn, staging, parking, cancels,
answers) are `scaler.protocol.processor_protocol`'s; this module adds the threads:

1. One thread at a time holds the *baton*: it reads the link (at first, the main thread). While no task
   is parked, the holder runs each task that gets the turn itself, and the next one after it: plain tasks cost no
   thread hand-off. While some are, the holder hands such a task to another thread and keeps reading, so that it
   hears a TaskCancel for it at once.
2. A task that parks hands the baton on if its thread holds it, and the task that gets the turn after it goes to
   another thread: its own thread waits. A thread is handed work in this order: the main thread if it is idle,
   else the one idle the shortest time, else a new one.
3. A thread with nothing to run takes the baton if nobody holds it, else it is idle: from the moment its task
   ended, so that work read meanwhile (the main thread's, after a parent) comes to it. The main thread gets the
   baton back once it is idle: tasks run on the main thread except while a parent waits there (code that needs the
   main thread, such as `signal.signal`, works in every task that is not nested). An idle thread other than the
   main one retires when it has waited long, unless it is the only one idle.

The shell reads `holder` and calls `runs_here` and `returns_baton` without the lock, on the path of every task, as
a first look: they only read, and whatever they lead to is done under the lock, where `place` and `hand_on` look
at the state again (which thread gets the work is chosen then).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import OUTCOMES, ProcessorOutcome, ProcessorTaskEvent, ProcessorTaskState

#: Members as module constants: reading one from its enum class costs several times more, on the path of every task.
_TURN, _PARK, _ASK, _RESUME, _END, _CANCEL, _RETURN = (
    ProcessorTaskEvent.TURN,
    ProcessorTaskEvent.PARK,
    ProcessorTaskEvent.ASK_RESUME,
    ProcessorTaskEvent.RESUME,
    ProcessorTaskEvent.END,
    ProcessorTaskEvent.CANCEL,
    ProcessorTaskEvent.RETURN,
)
_STAGED, _COMPUTING, _STOPPING_PARKED, _GO_ON = (
    ProcessorTaskState.STAGED,
    ProcessorTaskState.COMPUTING,
    ProcessorTaskState.STOPPING_PARKED,
    ProcessorOutcome.GO_ON,
)


@dataclass(eq=False, slots=True)
class LineTask:
    """A task of this processor, from the read that brought it until its thread is done (or a TaskCancel withdraws
    it). The shell's record subclasses it with what its threads need."""

    task: m.Task
    state: ProcessorTaskState = ProcessorTaskState.STAGED  #: received: (QUEUED, SEND) leads to STAGED
    #: a streaming task: the values it may yield, the indexes below this (Task.streamCredit, then StreamCredit)
    credit: int = 0
    #: an actor's start task: the calls read for it and not served yet, in the order they came (None: stop once the
    #: calls before it are served); None for any other task
    calls: collections.deque[m.Task | None] | None = None


R = TypeVar("R", bound=LineTask)


# ---------------------------------------------------------------- instructions


@dataclass(frozen=True, slots=True)
class Run(Generic[R]):
    """Hand idle thread `thread` a task to run (`task`), the baton (`holder` was set to it), or both (it runs the task
    first); `thread` None: start a new thread for them, once the lock is released."""

    thread: int | None
    task: R | None


@dataclass(frozen=True, slots=True)
class Answer:
    """Send TaskResult CANCELED for a withdrawn task, now (it never ran)."""

    task_id: TaskID


@dataclass(frozen=True, slots=True)
class Interrupt(Generic[R]):
    """Raise TaskAbandoned in the thread that computes the task, if its execution has begun."""

    record: R


@dataclass(frozen=True, slots=True)
class Wake(Generic[R]):
    """Wake the parked task's waiting thread: it got the turn back, or was stopped."""

    record: R


@dataclass(frozen=True, slots=True)
class CancelNested(Generic[R]):
    """Cancel the nested tasks the stopped task submitted (once the lock is released: that wakes their waiters)."""

    record: R


@dataclass(frozen=True, slots=True)
class Credited(Generic[R]):
    """The streaming task's client granted it more values (its `credit` grew): wake its thread if it waits for it."""

    record: R


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer an actor's call ACTOR_DIED now: the actor it is for is not in this processor (it ended)."""

    task_id: TaskID


@dataclass(frozen=True, slots=True)
class GiveBack:
    """Give these tasks back to the scheduler (TaskReturn on the link): it asked, and they had not started."""

    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class Configure:
    """The agent says where object storage is (HelloReply): its address, and the CURVE public key of the server there
    when it is not the servers' own (the host's cache: host_cache/place.py)."""

    object_storage_address: str
    object_storage_server_key: str = ""


Instruction = Run[R] | Answer | Refuse | Interrupt[R] | Wake[R] | CancelNested[R] | Credited[R] | GiveBack | Configure


# ---------------------------------------------------------------- the core


class TaskLine(Generic[R]):
    """The tasks of one processor and its threads; every method is an event, and what the shell is to do is appended
    to `instructions` (most tasks need none: the task to run is returned)."""

    def __init__(self, main_thread: int, new_record: Callable[[m.Task], R]) -> None:
        self._new_record = new_record
        #: every task received and not done: waiting for the turn, computing, parked or stopping
        self.tasks: dict[TaskID, R] = {}
        #: what waits for the computing turn, in the order it gets it: STAGED tasks, and a RESUMED one; not empty
        #: only while some task holds the turn
        self.awaiting_turn: collections.deque[R] = collections.deque()
        self.computing: R | None = None  #: the task that holds the computing turn (COMPUTING or STOPPING)
        self.parked = 0  #: tasks in a parked state (PARKED, RESUMING, RESUMED, STOPPING_PARKED)
        self.main = main_thread
        self.holder: int | None = None  #: the thread that reads the channel; None while a new thread starts for it
        self.idle: dict[int, None] = {}  #: idle threads, in the order they became idle (a dict as an ordered set)
        self.instructions: list[Instruction[R]] = []

    # ------------------------------------------------------------ the channel

    def receive(self, messages: list[m.Message]) -> None:
        """What a read of the channel brought: tasks and resumes wait for the turn, a TaskCancel takes effect at once
        (protocol rule 4)."""
        for message in messages:
            if isinstance(message, m.Task):
                if message.actor_id:
                    self._actor_call(message.actor_id, message)
                    continue
                record = self.tasks[message.task_id] = self._new_record(message)  # known from now on, to a cancel
                record.credit = message.stream_credit
                if message.actor is not None:
                    record.calls = collections.deque()
                self._await_turn(record)
            elif isinstance(message, m.ActorStop):
                self._actor_call(message.actor_id, None)
            elif isinstance(message, m.TaskCancel):
                for task_id in message.task_ids:
                    self._cancel(task_id)
            elif isinstance(message, m.TaskReturn):
                self._give_back(message.task_ids)
            elif isinstance(message, m.ProcessorResume):
                self._resume(message.task_id)
            elif isinstance(message, m.StreamCredit):
                self._credit(message.task_id, message.up_to)
            elif isinstance(message, m.HelloReply):
                self.instructions.append(Configure(message.object_storage_address, message.object_storage_server_key))

    def _await_turn(self, record: R) -> None:
        """A task received waits for the turn in priority order: ahead of the staged tasks of a lower priority (the
        scheduler sends them in the order it dispatched them)."""
        waiting = self.awaiting_turn
        priority = record.task.priority
        if not waiting or waiting[-1].task.priority >= priority:
            waiting.append(record)  # the usual case: one comparison
            return
        at = len(waiting)
        while at and waiting[at - 1].state is _STAGED and waiting[at - 1].task.priority < priority:
            at -= 1
        waiting.insert(at, record)

    def _give_back(self, task_ids: tuple[TaskID, ...]) -> None:
        """The scheduler asks tasks back (RETURN): those not started yet leave the line and go back (GiveBack); one that
        started stays (its answer comes as usual)."""
        given: list[TaskID] = []
        for task_id in task_ids:
            record = self.tasks.get(task_id)
            if record is not None and OUTCOMES[_RETURN][record.state] is ProcessorOutcome.HAND_BACK:
                self.awaiting_turn.remove(record)
                del self.tasks[task_id]
                given.append(task_id)
        if given:
            self.instructions.append(GiveBack(tuple(given)))

    def _actor_call(self, actor_id: TaskID, call: m.Task | None) -> None:
        """A call for an actor (or its stop: None): to the calls its serving thread takes in order, waking it."""
        record = self.tasks.get(actor_id)
        if record is None or record.calls is None:
            if call is not None:
                self.instructions.append(Refuse(call.task_id))
            return
        record.calls.append(call)
        self.instructions.append(Credited(record))

    def _credit(self, task_id: TaskID, up_to: int) -> None:
        """A streaming task's client grants values up to `up_to` (cumulative: a smaller credit changes nothing)."""
        record = self.tasks.get(task_id)
        if record is not None and up_to > record.credit:
            record.credit = up_to
            self.instructions.append(Credited(record))

    def _cancel(self, task_id: TaskID) -> None:
        record = self.tasks.get(task_id)
        if record is None:
            return  # done already
        outcome = OUTCOMES[_CANCEL][record.state]
        if outcome is ProcessorOutcome.WITHDRAW:
            self.awaiting_turn.remove(record)
            del self.tasks[task_id]
            self.instructions.append(Answer(task_id))
        elif outcome is ProcessorOutcome.STOP:
            record.state = ProcessorTaskState.STOPPING
            self.instructions += (Interrupt(record), CancelNested(record))
        elif outcome is ProcessorOutcome.STOP_PARKED:
            if record.state is ProcessorTaskState.RESUMED:
                self.awaiting_turn.remove(record)
            record.state = ProcessorTaskState.STOPPING_PARKED
            self.instructions += (Wake(record), CancelNested(record))

    def _resume(self, task_id: TaskID) -> None:
        record = self.tasks.get(task_id)
        if record is not None and OUTCOMES[_RESUME][record.state] is ProcessorOutcome.GIVE_BACK:
            record.state = ProcessorTaskState.RESUMED
            self.awaiting_turn.append(record)

    def hosts_actor(self, incoming: list[m.Message]) -> bool:
        """Whether an actor's start task is held here, or among `incoming`: it holds the computing turn while the
        actor lives, so other tasks would wait behind it (threads.py gives them back)."""
        if any(isinstance(message, m.Task) and message.actor is not None for message in incoming):
            return True
        return any(record.calls is not None for record in self.tasks.values())

    # ------------------------------------------------------------ the computing turn

    def take_turn(self, messages: list[m.Message]) -> R | None:
        """A read of the channel brought `messages` (see `receive`); then, if the turn is free, the first task waiting
        for it takes it: returned when it is to start (the caller places it); a resumed one goes on in its own thread
        (Wake), and None is returned."""
        if messages:
            self.receive(messages)
        if self.computing is not None or not self.awaiting_turn:
            return None
        record = self.computing = self.awaiting_turn.popleft()
        if OUTCOMES[_TURN][record.state] is _GO_ON:
            record.state = _COMPUTING
            self.parked -= 1
            self.instructions.append(Wake(record))
            return None
        record.state = _COMPUTING  # START
        return record

    def ends(self, record: R) -> ProcessorOutcome:
        """The task's thread is done: FINISH (its result goes out) or UNWOUND (it was stopped: CANCELED goes out
        instead). It is held no more; see `passes_turn` for the turn it held."""
        task_id = record.task.task_id
        if self.tasks.get(task_id) is record:  # not if the scheduler sent the task id again meanwhile
            del self.tasks[task_id]
        if record.state is _STOPPING_PARKED:
            self.parked -= 1
        return OUTCOMES[_END][record.state]

    def passes_turn(self, record: R) -> bool:
        """The task ended or parked: if it held the turn, the turn is free. True when tasks wait for it: the caller
        reads the channel without blocking first (protocol rule 2), then calls `take_turn`."""
        if self.computing is not record:
            return False  # a parked task that was stopped: it unwound without the turn
        self.computing = None
        return bool(self.awaiting_turn)

    def parks(self, record: R, me: int) -> ProcessorOutcome:
        """Its thread `me` begins the task's outermost wait on nested futures: PARK (the caller reports it, then the
        turn passes; the baton, if `me` held it, was handed on), or UNWIND (it was stopped while it could not be
        interrupted: the caller raises TaskAbandoned)."""
        outcome = OUTCOMES[_PARK][record.state]
        if outcome is ProcessorOutcome.PARK:
            record.state = ProcessorTaskState.PARKED
            self.parked += 1
            if self.holder == me:
                self.hand_on(None, baton=True)
        return outcome

    def asks_resume(self, record: R) -> bool:
        """The parked task's futures are done: True when it asks to go on (the caller reports it and waits to be
        woken); False when it was stopped meanwhile (it unwinds)."""
        if OUTCOMES[_ASK][record.state] is ProcessorOutcome.ASK:
            record.state = ProcessorTaskState.RESUMING
            return True
        return False

    # ------------------------------------------------------------ threads and the baton

    def runs_here(self, me: int) -> bool:
        """Whether thread `me` runs a task the turn gave it itself (rule 1); a read only."""
        if self.parked:
            return self.holder != me
        return me == self.main or self.main not in self.idle

    def place(self, me: int, task: R) -> R | None:
        """Thread `me` got `task` (the turn passed to it, or its read brought it): the task, when `me` runs it, else
        None: it went to another thread (with the baton, if `me` held it and no task is parked, for the idle main
        thread), and `me`, if it no longer holds the baton, is idle."""
        if self.runs_here(me):
            return task
        holding = self.holder == me
        self.hand_on(task, baton=holding and not self.parked)
        if self.holder != me:
            self.settles(me)
        return None

    def hand_on(self, task: R | None, baton: bool = False) -> None:
        """Give an idle thread a task to run, the baton, or both (rule 2)."""
        target = self.main if self.main in self.idle else next(reversed(self.idle), None)
        if baton:
            self.holder = target
        if target is not None:
            del self.idle[target]
        self.instructions.append(Run(target, task))

    def settles(self, me: int) -> bool:
        """Thread `me` has nothing to run: True when it holds the baton (taking it if nobody does), False when it is
        idle until handed work (rule 3)."""
        if self.holder is None:
            self.holder = me
        if self.holder == me:
            return True
        self.idle[me] = None
        return False

    def returns_baton(self, me: int) -> bool:
        """Whether the holder `me` is to hand the baton back to the main thread, idle again (rule 3); a read only."""
        return me != self.main and self.main in self.idle

    def retires(self, me: int) -> bool:
        """Idle thread `me` has waited long: True when it ends (it is not the main thread, nor the only one idle)."""
        if me in self.idle and me != self.main and len(self.idle) > 1:
            del self.idle[me]
            return True
        return False
