"""The threads of a processor: they carry out what its task line (`task_line.TaskLine`, the pure core) decides.

Every decision (which task computes, which thread runs it, who reads the link, what a TaskCancel does) is the
task line's, under the processor protocol (`scaler.protocol.processor_protocol`); this module only has the
mechanisms: one lock around every call into the core (and the reads those calls need: the link, and the agent's
channel, whose closing ends the processor), a wake-up per thread, the task's own hooks around its waits on nested
futures, and the injection of TaskAbandoned into a thread.

A thread's life (`_work`): it runs the task it was given, and the next ones the turn gives it; then it reads the
link while it holds the baton, or waits until it is handed a task or the baton. A task that waits on nested
futures parks: `on_block` reports ProcessorBlocked and passes the turn and the baton on; `on_unblock` asks to go on
(ProcessorResumeRequest) and waits until the task line wakes it (ProcessorResume, or a stop).

Stopping a computing task raises TaskAbandoned in its thread, between two bytecodes: code stuck in a C call stops
when the call returns, or the scheduler has the processor killed after a grace period. So that the exception can
only land inside the task's execution, a record is *interruptible* only while that runs (guarded by its own lock),
and a pending injection is drawn out before the thread goes on (`_stop_interruptions`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.processor_protocol import ProcessorOutcome, ProcessorTaskState
from scaler.worker.computing_mark import ComputingMark
from scaler.worker.processor.channel import BlockingChannel, ChannelClosed
from scaler.worker.processor.outlet import ProcessorOutlet
from scaler.worker.processor.task_line import (
    Answer,
    CancelNested,
    Configure,
    Credited,
    GiveBack,
    Interrupt,
    LineTask,
    Refuse,
    Run,
    TaskLine,
    Wake,
)
from scaler.worker.processor.wake_pipe import WakePipe

logger = logging.getLogger(__name__)

#: Members read on the path of every task, as module constants (cheaper than from their enum class).
_STOPPING, _UNWOUND = ProcessorTaskState.STOPPING, ProcessorOutcome.UNWOUND
#: What `_report_end` copies of a result, by position (a field added to TaskResult must be added there too).
assert [f.name for f in fields(m.TaskResult) if f.init] == [
    "task_id", "status", "payload_kind", "payload", "error_message", "profile", "worker_id", "ran", "stored_bytes",
    "streamed",
], "TaskResult's fields changed: TaskThreads._report_end copies them by position"  # fmt: skip
#: An idle thread beyond the first ends after waiting this long for work.
IDLE_THREAD_SECONDS = 30.0
#: How often a thread of the processor's own looks whether a task has computed that long, and then reads the link for it
#: (a cancel), since the task's thread holds the baton and reads nothing until it ends (`_watch`).
WATCH_SECONDS = 0.05


class TaskAbandoned(BaseException):
    """Raised in the thread of a task the scheduler stopped: unwinds the task's code. Not an `Exception`, so that a
    task's `except Exception:` does not swallow it."""


@dataclass(eq=False, slots=True)
class _TaskRecord(LineTask):
    """A task of the task line, with what its thread needs."""

    thread: int = 0  #: the thread that runs it, once it started
    depth: int = 0  #: nested waits in progress (the outermost parks)
    #: True while an injected TaskAbandoned can only land inside this task's execution (guarded by `lock`)
    interruptible: bool = False
    injected: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: set when the task line wakes the parked task (the turn given back, or a stop); made when it first parks
    resume: threading.Event | None = None
    futures: list[weakref.ref[Any]] = field(default_factory=list)  #: nested tasks it submitted
    parked_since_cpu: float = 0.0
    parked_cpu_seconds: float = 0.0  #: the process's CPU time while it was parked: other tasks' work
    received_at: float = field(default_factory=time.time)  #: read from the link (wall clock, for its story)
    #: a streaming task waiting for its client's credit on a thread that does not read the channel: set when the
    #: reader hears more credit (made when it first waits)
    credited: threading.Event | None = None


@dataclass(eq=False)
class _Slot:
    """How a thread is woken: the task line's Run instructions for it leave their task here."""

    woken: threading.Event = field(default_factory=threading.Event)
    task: _TaskRecord | None = None


#: What to do once the lock is released: threads to start (with their task, None for the baton) and nested futures
#: to cancel.
_Later = Sequence[tuple[Run[_TaskRecord] | None, list[Any]]]
_NOTHING: _Later = ()  #: what most calls leave to do


class TaskThreads:
    """Runs the processor's tasks on its threads; the hooks of `processor_context.TaskThreads`.

    `outlet` is the processor's link to the scheduler: its tasks come there and everything about them leaves there
    (outlet.py); `channel` is its agent's: its configuration comes there, and its closing ends the processor;
    `execute(task)` runs one task and returns its result; `on_hello(address, server_key)` takes the object storage
    address (and the CURVE key of the server there, when not the servers') and configures the link (called under the
    lock: it must not call back); `housekeeping()` is called after every read
    by the baton's holder, after every task, and at least every `housekeeping_seconds` (garbage collection)."""

    def __init__(
        self,
        channel: BlockingChannel,
        outlet: ProcessorOutlet,
        execute: Callable[[m.Task], m.TaskResult],
        on_hello: Callable[[str, str], None],
        housekeeping: Callable[[], None],
        housekeeping_seconds: float,
        worker_id: bytes = b"",
        mark: ComputingMark | None = None,
    ) -> None:
        self._channel = channel
        self._outlet = outlet
        self._execute = execute
        self._on_hello = on_hello
        self._housekeeping = housekeeping
        self._housekeeping_seconds = housekeeping_seconds
        self._worker_id = worker_id
        #: the task computing, for its agent should the processor die (computing_mark.py)
        self._mark = mark
        self._local = threading.local()
        #: guards every call into the task line, and the reads of the channel
        self._lock = threading.Lock()
        main = threading.main_thread().ident
        assert main is not None
        self._line: TaskLine[_TaskRecord] = TaskLine(main, _TaskRecord)
        self._slots: dict[int, _Slot] = {}  #: every thread's wake-up, by thread id
        self._last_priority = 0
        #: the pipe the watch writes once it has read something (`_watch`)
        self._watch_wake = WakePipe()

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """The main thread's part: take the baton and serve; returns when the agent closed the channel."""
        threading.Thread(target=self._watch, name="scaler-watch", daemon=True).start()
        try:
            self._work(None)
        except ChannelClosed:
            return

    def _watch(self) -> None:
        """While a task has computed for WATCH_SECONDS, what came on the link and the channel is read for it every
        WATCH_SECONDS, as its own thread would between two values of a stream: a cancel (it is stopped in its thread),
        tasks to give back (an actor holds the turn). Tiny tasks never wake this thread's reads. What it read, the
        baton's holder may be waiting for in its own select (an actor's thread waiting for a call, a stream's for
        credit) whose link descriptor this read left unsignalled: it writes to the pipe that select watches too."""
        seen: _TaskRecord | None = None
        line = self._line
        while True:
            time.sleep(WATCH_SECONDS)
            computing = line.computing
            if computing is None or computing is not seen:
                seen = computing
                continue
            try:
                with self._lock:
                    later = _NOTHING
                    if line.computing is computing:
                        messages = self._poll_inbox()
                        line.take_turn(messages)  # the turn is the task's: messages are only received
                        later = self._carry_out_locked() if line.instructions else _NOTHING
                        if messages:
                            self._wake_holder_locked()
            except ChannelClosed:
                return  # the holder hears it too and ends the processor
            if later:
                self._carry_out_later(later)

    def send(self, message: m.Message) -> None:
        """Anything about a task but its result, on the link (ProcessorBlocked, a StreamItem, ActorReady, ...)."""
        self._outlet.send(message)

    def cpu_seconds(self) -> float:
        """The process's CPU time, less what other tasks used while the calling thread's task was parked."""
        running: _TaskRecord | None = getattr(self._local, "running", None)
        return time.process_time() - (running.parked_cpu_seconds if running is not None else 0.0)

    def _work(self, task: _TaskRecord | None) -> None:
        """A thread's life: run the task it was given and those the turn gives it next, then read the channel while
        it holds the baton, or wait to be handed work."""
        me = threading.get_ident()
        slot = self._slots[me] = _Slot()
        serving = False
        if task is None:
            with self._lock:
                serving = self._line.settles(me)
        while True:
            if task is not None:
                task, serving = self._run(task, me)
            elif serving:
                task = self._serve(me)
                serving = task is None and self._line.holder == me
            elif self._wait(slot, me):
                task, slot.task = slot.task, None
                serving = task is None  # handed the baton
            else:
                return

    def _serve(self, me: int) -> _TaskRecord | None:
        """Read the channel while this thread holds the baton; a task this thread is to run itself, or None once it
        no longer holds the baton (it is idle then)."""
        line = self._line
        while line.holder == me:
            if line.returns_baton(me):
                with self._lock:
                    line.hand_on(None, baton=True)
                    line.settles(me)
                    later = self._carry_out_locked()
                self._carry_out_later(later)
                return None
            task = self._read(me)
            if task is not None:
                return task
        return None

    def _read(self, me: int) -> _TaskRecord | None:
        """Wait for the channel (at most `housekeeping_seconds`) and hand what it holds to the task line; the task
        that got the computing turn, if this thread is to run it."""
        task = None
        if self._wait_inbox(self._housekeeping_seconds):
            line = self._line
            with self._lock:
                task = line.take_turn(self._poll_inbox())
                if task is not None:
                    task = line.place(me, task)
                later = self._carry_out_locked() if line.instructions else _NOTHING
            if later:
                self._carry_out_later(later)
        self._housekeeping()
        return task

    def _wait(self, slot: _Slot, me: int) -> bool:
        """Wait idle until handed work (True; it is in the slot); False when this thread retires instead."""
        while not slot.woken.wait(IDLE_THREAD_SECONDS):
            with self._lock:
                if self._line.retires(me):
                    del self._slots[me]
                    return False
        slot.woken.clear()
        return True

    def _run(self, record: _TaskRecord, me: int) -> tuple[_TaskRecord | None, bool]:
        """Run a task that holds the computing turn and send its result. Returns the task this thread runs next (when
        the turn gave it one), else whether this thread now holds the baton (if not, it is idle: from the moment the
        task ended, so that work read meanwhile, the main thread's after a parent, comes to it)."""
        task = record.task
        record.thread = me
        self._local.running = record
        self._last_priority = task.priority
        mark = self._mark
        if mark is not None:
            mark.computing(task.task_id)
        started = time.time()  #: the processor's own times go on the result, for the task's story
        try:
            result = self._execute_stoppably(record, task)
        finally:
            self._local.running = None
        ran = m.RunStamps(started, time.time(), os.getpid(), record.received_at)
        line = self._line
        serving = False
        woken: list[_TaskRecord] = []
        with self._lock:
            outcome = line.ends(record)
            following = self._pass_turn_locked(record, me)
            if following is None:
                serving = line.settles(me)
            if line.instructions:
                woken = _take_wakes(line.instructions)  # after the result: theirs cannot overtake it
                later = self._carry_out_locked()
            else:
                later = _NOTHING
        self._report_end(task, outcome, result, ran, more=following is not None)
        for parked in woken:
            _wake(parked)
        if mark is not None:  # its result was handed over: a crash from now on is not its
            mark.done(task.task_id)
        if later:
            self._carry_out_later(later)
        self._housekeeping()
        if following is not None and not line.runs_here(me):  # after the result: no later result overtakes it
            with self._lock:
                following = line.place(me, following)
                later = self._carry_out_locked()
            self._carry_out_later(later)
            serving = following is None and line.holder == me
        return following, serving

    def _report_end(
        self, task: m.Task, outcome: ProcessorOutcome, result: m.TaskResult | None, ran: m.RunStamps, more: bool
    ) -> None:
        """A task ended: its result, or its CANCELED answer when it was stopped (after its values, logs and an actor's
        calls' results: all on the one link)."""
        if outcome is _UNWOUND:
            self.send(m.TaskCancelConfirm(task.task_id, m.CancelOutcome.CANCELED))
        elif result is not None:
            # made anew, not with `replace` (which looks the fields up on every call, twice the cost)
            stamped = m.TaskResult(
                result.task_id, result.status, result.payload_kind, result.payload, result.error_message,
                result.profile, self._worker_id, ran, result.stored_bytes, result.streamed,
            )  # fmt: skip
            self._outlet.result(stamped, more=more)

    def _wait_inbox(self, timeout_seconds: float) -> bool:
        """Wait for the channel, the link and the watch's pipe (`_watch`)."""
        watch = self._watch_wake
        if watch.woken or self._outlet.has_work():
            return True
        return self._channel.wait(timeout_seconds, (*self._outlet.wait_fds(), watch.read_fd))

    def _wake_holder_locked(self) -> None:
        """Under the lock, from the watch: the holder's select returns (its loop then sees what was read)."""
        self._watch_wake.wake()

    def _poll_inbox(self) -> list[m.Message]:
        """What the channel holds now, and what was read on the link (under the lock). Tasks read while an actor lives
        here, or comes with this read, are given back: the actor holds the computing turn while it lives."""
        self._watch_wake.drain()
        messages = self._channel.poll()
        work = self._outlet.take_work()
        if not work:
            return messages
        if self._line.hosts_actor(work):
            tasks = [t for t in work if isinstance(t, m.Task) and not t.actor_id and t.actor is None]
            if tasks:
                self.send(m.TaskReturn(tuple(t.task_id for t in tasks)))
                work = [w for w in work if not any(w is t for t in tasks)]
        return messages + work

    def _pass_turn_locked(self, record: _TaskRecord, me: int) -> _TaskRecord | None:
        """The task ended or parked: the turn passes, once the channel was read without blocking (protocol rule 2);
        the task that got it, for the caller to place."""
        if not self._line.passes_turn(record):
            return None
        try:
            messages = self._poll_inbox()
        except ChannelClosed:
            if self._line.holder == me:
                raise
            messages = []  # the holder hears it too (the closed channel stays readable) and ends the processor
        return self._line.take_turn(messages)

    def _execute_stoppably(self, record: _TaskRecord, task: m.Task) -> m.TaskResult | None:
        """The task's result; None when it was stopped. A TaskAbandoned raised into this thread by `_interrupt` lands
        inside this function, never in the thread's own loop."""
        try:
            with record.lock:
                if record.state is _STOPPING:
                    return None  # stopped before it started
                record.interruptible = True
            try:
                return self._execute(task)
            finally:
                _stop_interruptions(record)
        except TaskAbandoned:
            return None

    # ------------------------------------------------------------ carrying out instructions

    def _carry_out_locked(self) -> _Later:
        """Carry out the task line's instructions, under the lock; what must wait until it is released is returned."""
        instructions = self._line.instructions
        later: list[tuple[Run[_TaskRecord] | None, list[Any]]] = []
        for instruction in instructions:
            if isinstance(instruction, Run):
                self._hand(instruction, later)
            elif isinstance(instruction, Answer):
                self.send(m.TaskCancelConfirm(instruction.task_id, m.CancelOutcome.CANCELED))
            elif isinstance(instruction, Refuse):
                reason = "the actor this call is for is not in the processor the call reached: it ended"
                self._outlet.result(m.TaskResult(instruction.task_id, m.ResultStatus.ACTOR_DIED, error_message=reason))
            elif isinstance(instruction, Interrupt):
                self._stop(instruction.record)
            elif isinstance(instruction, Wake):
                _wake(instruction.record)
            elif isinstance(instruction, CancelNested):
                later.append((None, [f for ref in list(instruction.record.futures) if (f := ref()) is not None]))
            elif isinstance(instruction, Credited):
                if instruction.record.credited is not None:
                    instruction.record.credited.set()
            elif isinstance(instruction, GiveBack):
                self.send(m.TaskReturn(instruction.task_ids))
            elif isinstance(instruction, Configure):
                self._on_hello(instruction.object_storage_address, instruction.object_storage_server_key)
        instructions.clear()
        return later

    def _hand(self, run: Run[_TaskRecord], later: list[tuple[Run[_TaskRecord] | None, list[Any]]]) -> None:
        """An idle thread is handed a task or the baton (a new thread is started for it once the lock is released)."""
        if run.thread is None:
            later.append((run, []))
        else:
            slot = self._slots[run.thread]
            slot.task = run.task
            slot.woken.set()

    def _stop(self, record: _TaskRecord) -> None:
        """Stop a computing task: TaskAbandoned in its thread (code stuck in a C call does not see it: the scheduler
        has the processor killed for a task computing alone, and for a stop that does not unwind)."""
        _interrupt(record)

    def _carry_out_later(self, later: _Later) -> None:
        """Start the threads and cancel the nested tasks the instructions asked for (with the lock released)."""
        for run, futures in later:
            if run is not None:
                threading.Thread(target=self._helper, args=(run.task,), name="scaler-task", daemon=True).start()
            for future in futures:
                future.abandon()  # wakes its waiters, runs callbacks

    def _helper(self, task: _TaskRecord | None) -> None:
        """A thread started for the baton or a task. The processor ends when the channel closes or this fails."""
        try:
            self._work(task)
        except ChannelClosed:
            os._exit(0)
        except BaseException:
            logger.exception("a processor thread failed; the processor stops")
            os._exit(1)

    # ------------------------------------------------------------ a streaming task's credit (worker/streaming.py)

    def wait_credit(self, index: int) -> None:
        """The running streaming task is about to compute its value `index`: return once its client's credit allows
        it (at once when it does), having heard what the scheduler sent meanwhile; raise TaskAbandoned when the task was
        stopped (a TaskCancel, read here or by the thread that reads the link). A thread that holds the baton
        reads the link itself, so a slow reader holds the generator here, never a queue of values."""
        record: _TaskRecord = self._local.running
        me = threading.get_ident()
        while True:
            if self._line.holder == me:
                self._hear_link(record, me, wait=index >= record.credit)
            elif index >= record.credit:
                if record.credited is None:
                    with self._lock:
                        if record.credited is None:
                            record.credited = threading.Event()
                    continue  # the credit may have come before the event existed
                record.credited.wait(self._housekeeping_seconds)
                record.credited.clear()
            if record.state is _STOPPING:
                raise TaskAbandoned(
                    f"task {record.task.task_id.hex()} was stopped by its worker (cancelled or timed out)"
                )
            if index < record.credit:
                return

    # ------------------------------------------------------------ an actor's calls (worker/actors.py)

    def wait_call(self) -> m.Task | None:
        """The running actor's next call, in the order they came (at once when one is there), having heard what the
        scheduler sent meanwhile; None when the actor is asked to stop (its calls before that were served); raise
        TaskAbandoned when its start task was stopped. A thread that holds the baton reads the link itself."""
        record: _TaskRecord = self._local.running
        calls = record.calls
        assert calls is not None, "wait_call outside an actor's start task"
        me = threading.get_ident()
        while True:
            if record.state is _STOPPING:
                raise TaskAbandoned(f"actor {record.task.task_id.hex()} was stopped by its worker")
            if calls:
                call = calls.popleft()
                return call
            if self._line.holder == me:
                self._hear_link(record, me, wait=True)
            elif record.credited is None:
                with self._lock:
                    if record.credited is None:
                        record.credited = threading.Event()
            else:  # a call that came before the event existed is seen above
                record.credited.wait(self._housekeeping_seconds)
                record.credited.clear()

    def answer(self, result: m.TaskResult) -> None:
        """An actor's call's result."""
        self._outlet.result(result)

    def _hear_link(self, record: _TaskRecord, me: int, wait: bool) -> None:
        """Read the link (and the channel) from a computing task's own thread (it holds the baton): at most
        `housekeeping_seconds` when `wait`, else only what is there. Nothing is injected into the thread meanwhile:
        a TaskCancel read here is seen by the caller in the task's state."""
        _stop_interruptions(record)
        try:
            if wait and not self._wait_inbox(self._housekeeping_seconds):
                return
            with self._lock:
                self._line.take_turn(self._poll_inbox())  # the turn is this task's: messages are only received
                later = self._carry_out_locked() if self._line.instructions else _NOTHING
            if later:
                self._carry_out_later(later)
        finally:
            with record.lock:
                record.interruptible = record.state is not _STOPPING

    # ------------------------------------------------------------ the hooks a task's waits call

    def priority(self) -> int:
        running: _TaskRecord | None = getattr(self._local, "running", None)
        return running.task.priority if running is not None else self._last_priority

    def task_id(self) -> bytes:
        running: _TaskRecord | None = getattr(self._local, "running", None)
        if running is None:  # a thread a task started (an actor's pool of calls): the task computing now
            running = self._line.computing
        return running.task.task_id if running is not None else b""

    def on_submitted(self, future: Any) -> None:
        running: _TaskRecord | None = getattr(self._local, "running", None)
        if running is None:
            return
        futures = running.futures
        if len(futures) >= 64 and len(futures) & (len(futures) - 1) == 0:  # now and then, forget finished ones
            futures[:] = [ref for ref in futures if (f := ref()) is not None and not f.done()]
        futures.append(weakref.ref(future))

    def on_block(self) -> bool:
        running: _TaskRecord | None = getattr(self._local, "running", None)
        if running is None:
            return False  # not a task's own thread: it keeps its slot
        running.depth += 1
        if running.depth == 1:
            self._park(running)
        return True

    def on_unblock(self) -> None:
        running: _TaskRecord = self._local.running
        running.depth -= 1
        if running.depth:
            return
        resume = running.resume
        assert resume is not None, "on_unblock without on_block"
        with self._lock:
            asks = self._line.asks_resume(running)
        if asks:
            self.send(m.ProcessorResumeRequest(running.task.task_id))
            self._resume(running)
            resume.wait()
        resume.clear()
        if self._mark is not None:
            self._mark.computing(running.task.task_id)  # it computes again
        running.parked_cpu_seconds += time.process_time() - running.parked_since_cpu
        if running.state is ProcessorTaskState.STOPPING_PARKED:
            raise TaskAbandoned(f"task {running.task.task_id.hex()} was stopped by its worker (cancelled or timed out)")

    def _resume(self, record: _TaskRecord) -> None:
        """A parked task's futures are done: the processor gives it the turn back itself (protocol rule 3); it goes on
        when the task computing here, if any, passes the turn."""
        line = self._line
        with self._lock:
            line.receive([m.ProcessorResume(record.task.task_id)])
            if line.computing is None:
                following = line.take_turn([])
                if following is not None:  # not expected: the turn was free, so only this task waited for it
                    line.hand_on(following)
            later = self._carry_out_locked()
        self._carry_out_later(later)

    def _park(self, record: _TaskRecord) -> None:
        """The task's outermost wait begins: report it, then pass the baton (if this thread holds it) and the
        computing turn on, all under the lock; no TaskAbandoned is injected meanwhile."""
        _stop_interruptions(record)  # one injected already is raised here, before anything changed
        if self._mark is not None:
            self._mark.done(record.task.task_id)  # parked: a crash from now on is another task's
        me = threading.get_ident()
        line = self._line
        with self._lock:
            if line.parks(record, me) is ProcessorOutcome.UNWIND:  # stopped while it could not be interrupted
                raise TaskAbandoned(f"task {record.task.task_id.hex()} was stopped by its worker")
            if record.resume is None:
                record.resume = threading.Event()
            record.parked_since_cpu = time.process_time()
            self.send(m.ProcessorBlocked(record.task.task_id))  # before the next task's result can overtake it
            following = self._pass_turn_locked(record, me)
            if following is not None:
                line.hand_on(following)  # this thread waits: the next task runs on another
            later = self._carry_out_locked()
        self._carry_out_later(later)
        with record.lock:
            record.interruptible = True


def _interrupt(record: _TaskRecord) -> None:
    """Raise TaskAbandoned in the thread computing the task, if its execution has begun (under the lock)."""
    with record.lock:
        if record.interruptible:
            record.injected = True
            set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
            set_async_exc(ctypes.c_ulong(record.thread), ctypes.py_object(TaskAbandoned))


def _stop_interruptions(record: _TaskRecord) -> None:
    """No TaskAbandoned is injected into the task's thread from now on; one injected before is raised here."""
    with record.lock:
        record.interruptible = False
    if record.injected:
        for _ in range(1000):  # a pending asynchronous exception is raised at a loop's backward jump
            pass


def _take_wakes(instructions: list[Any]) -> list[_TaskRecord]:
    """The parked tasks the instructions wake (a resumed one given the turn), taken out of them: the caller wakes them
    once the result of the task that passed the turn has left."""
    woken = [instruction.record for instruction in instructions if isinstance(instruction, Wake)]
    if woken:
        instructions[:] = [instruction for instruction in instructions if not isinstance(instruction, Wake)]
    return woken


def _wake(record: _TaskRecord) -> None:
    """Wake a parked task (it was given the turn back, or stopped)."""
    if record.resume is not None:  # made when it parked
        record.resume.set()
