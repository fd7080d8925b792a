"""The threads of a processor: how one process runs its tasks one at a time, and goes on serving while a task waits.

Rules (what the agent relies on; scaler/worker/executors/contract.py, items 3 and 4):
1. One task computes at a time, and tasks start in the order received. The agent may send a task while
   another computes (it *stages* tiny tasks ahead): it waits in the processor's *line*. A task computes from
   its start until it ends (its result sent) or parks, and again once it is resumed; when it ends or parks,
   the next of the line starts. The computing turn and the line change together under one lock, so a task
   queued at the instant the computing one ends is never left waiting.
2. A TaskCancel takes effect when it is read, ahead of what waits in the line. A task that has not started
   is removed: it never runs, and is answered CANCELED at once (the agent may count it as computing: it sent it
   when this processor looked free, and frees the slot on that answer; a staged one it has forgotten). A running
   or parked task is stopped (below). A task that already ended is ignored.
3. Before a task that waited starts, the channel is read without blocking (one recv), so that a TaskCancel
   the agent sent while the previous task computed is heard first.
4. ProcessorResume gives a parked task the computing turn back. The agent sends it only when nothing
   computes or waits here, so it takes effect at once; were a task computing, it would wait its turn in the line.

One thread at a time holds the *baton*: it reads the agent's channel (at first, the main thread). A task
that waits on nested futures *parks*: it tells the agent (ProcessorBlocked), hands the baton to another
thread if it held it (an idle one, or a new one), passes the computing turn to the next task of the line
(on another thread) and waits. The holder goes on reading, so the agent may send this processor the next task
(the parent's child, say) while the parent waits: one process serves a whole nested computation, with no
process and no client connection per waiting parent. When the parent's futures are done it asks to run on
(ProcessorResumeRequest) and waits for ProcessorResume; it then finishes on its own thread, sends its result
and becomes idle.

While no task is parked, the holder runs each task itself, and the next of the line after it: plain tasks
cost no thread hand-off. While some are, the holder gives a task that gets the turn to a thread of its own
and keeps reading, so that it hears a TaskCancel at once; that thread runs the line's next tasks as they
get the turn. The agent sends a TaskCancel when it stops (cancels, times out) a task of a processor that
holds parked tasks, instead of killing the processor and them with it: a parked task's nested tasks are
cancelled and its wait raises TaskAbandoned; a computing task gets TaskAbandoned raised in its thread
(between two bytecodes: code stuck in a C call stops when the call returns, or the agent kills the processor
after a grace period). Every abandoned task is reported with a CANCELED result when its thread is done: the
agent frees the slot of one it stopped while computing, and ignores the rest. A parked task stopped this
way unwinds without the computing turn.

When the main thread is idle again, it gets the baton back: tasks run on the main thread except while a
parent waits there (code that needs the main thread, such as `signal.signal`, works in every task that is
not nested).
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.processor.channel import BlockingChannel, ChannelClosed

logger = logging.getLogger(__name__)

#: An idle thread beyond the first ends after waiting this long for work.
IDLE_THREAD_SECONDS = 30.0


class TaskAbandoned(BaseException):
    """Raised in the thread of a task the agent stopped: unwinds the task's code. Not an `Exception`, so that a
    task's `except Exception:` does not swallow it."""


@dataclass(eq=False, slots=True)
class _TaskRecord:
    """A task of this processor, from the read that brought it until it ends (or a TaskCancel removes it)."""

    task: m.Task
    thread: int = 0  #: the thread that runs it, once it started
    depth: int = 0  #: nested waits in progress (the outermost parks)
    #: as the agent sees it: from the outermost wait's start until ProcessorResume gives it the turn back
    parked: bool = False
    abandoned: bool = False
    abandoned_parked: bool = False  #: stopped while parked: its wait raises
    #: True while an injected TaskAbandoned can only land inside this task's execution (guarded by `lock`)
    interruptible: bool = False
    injected: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: set when ProcessorResume gives a parked task the turn back (or it is stopped); made when it first parks
    resume: threading.Event | None = None
    futures: list[weakref.ref[Any]] = field(default_factory=list)  #: nested tasks it submitted
    parked_since_cpu: float = 0.0
    parked_cpu_seconds: float = 0.0  #: the process's CPU time while it was parked: other tasks' work


@dataclass(eq=False)
class _Waiting:
    """An idle thread, until it is handed the baton (task None), a task to run, or both."""

    woken: threading.Event = field(default_factory=threading.Event)
    task: _TaskRecord | None = None


class TaskThreads:
    """Runs the processor's tasks on its threads; the hooks of `processor_context.TaskThreads`.

    `execute(task)` runs one task and returns its result; `on_hello(address)` takes the object storage
    address (called under the lock: it must not call back); `housekeeping()` is called after every read of the
    channel by the baton's holder, after every task, and at least every `housekeeping_seconds` (garbage
    collection)."""

    def __init__(
        self,
        channel: BlockingChannel,
        execute: Callable[[m.Task], m.TaskResult],
        on_hello: Callable[[str], None],
        housekeeping: Callable[[], None],
        housekeeping_seconds: float,
        worker_id: bytes = b"",
    ) -> None:
        self._channel = channel
        self._execute = execute
        self._on_hello = on_hello
        self._housekeeping = housekeeping
        self._housekeeping_seconds = housekeeping_seconds
        self._worker_id = worker_id
        self._send_lock = threading.Lock()
        self._local = threading.local()
        #: guards the baton, the idle threads, the tasks, the line, the computing turn, and reads of the channel
        self._lock = threading.Lock()
        #: every task received and not ended: in the line, computing or parked
        self._tasks: dict[TaskID, _TaskRecord] = {}
        #: what waits for the computing turn, in the order received: tasks not started (and a parked task the
        #: agent resumed while another computed); not empty only while some task has the turn
        self._line: collections.deque[_TaskRecord] = collections.deque()
        #: the task that has the computing turn: started (or about to), not parked, not ended
        self._computing: _TaskRecord | None = None
        self._parked: set[_TaskRecord] = set()  #: the tasks whose `parked` is set
        self._holder: int | None = None  #: the thread that reads the channel; None while a new thread starts
        self._waiting: dict[int, _Waiting] = {}  #: idle threads by id
        self._main = threading.main_thread().ident
        self._last_priority = 0

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """The main thread's part: take the baton and serve; returns when the agent closed the channel."""
        try:
            self._work(None)
        except ChannelClosed:
            return

    def send(self, message: m.Message) -> None:
        with self._send_lock:
            self._channel.send(message)

    def cpu_seconds(self) -> float:
        """The process's CPU time, less what other tasks used while the calling thread's task was parked."""
        running: _TaskRecord | None = getattr(self._local, "running", None)
        return time.process_time() - (running.parked_cpu_seconds if running is not None else 0.0)

    def _work(self, task: _TaskRecord | None) -> None:
        """A thread's life: run the task it was given and those the line gives it next, then take the baton or
        wait to be handed work."""
        me = threading.get_ident()
        while True:
            waiting = None
            while task is not None:
                task, waiting = self._run(task)
                if task is not None and self._handed_on(me, task):
                    task = None
            if waiting is None:
                with self._lock:
                    if self._holder is None:
                        self._holder = me
                    if self._holder != me:
                        waiting = self._waiting[me] = _Waiting()
            if waiting is None:
                task = self._serve_while_holding()
                continue
            while not waiting.woken.wait(IDLE_THREAD_SECONDS):
                with self._lock:
                    if not waiting.woken.is_set() and me != self._main and len(self._waiting) > 1:
                        del self._waiting[me]
                        return
            task = waiting.task  # None: this thread was handed the baton

    def _handed_on(self, me: int, task: _TaskRecord) -> bool:
        """Whether the task the line gave this thread goes to another: the holder keeps reading while tasks are
        parked; while none is, the main thread runs it if it is idle (with the baton, if this thread held it)."""
        holding = self._holder == me
        if self._parked:
            if not holding:
                return False
            self._hand_on(task)
            return True
        if me == self._main or self._main not in self._waiting:
            return False
        self._hand_on(task, baton=holding)
        return True

    def _serve_while_holding(self) -> _TaskRecord | None:
        """Read the channel while this thread holds the baton; a task this thread is to run itself, or None once
        it no longer holds the baton."""
        me = threading.get_ident()
        while self._holder == me:
            if me != self._main and self._main in self._waiting:
                self._hand_on(baton=True)  # the main thread is free again
                return None
            task = self._read()
            if task is None:
                continue
            if self._parked:
                self._hand_on(task)  # keep reading: a TaskCancel for it must be heard while it computes
            elif me != self._main and self._main in self._waiting:
                self._hand_on(task, baton=True)
                return None
            else:
                return task  # plain tasks run on the holder: no thread hand-off
        return None

    def _read(self) -> _TaskRecord | None:
        """Wait for the channel (at most `housekeeping_seconds`) and take in what it holds; the task that got the
        computing turn, if it was free, for the caller to start."""
        task = None
        if self._channel.wait(self._housekeeping_seconds):
            with self._lock:
                abandoned = self._take_in(self._channel.poll())
                if self._computing is None:
                    task = self._start_next_locked()
            _cancel_nested(abandoned)
        self._housekeeping()
        return task

    def _take_in(self, messages: list[m.Message]) -> list[Any]:
        """What the channel brought, under the lock: tasks and resumes join the line, a TaskCancel takes effect
        at once (rule 2). Returns the nested futures of the stopped tasks, to cancel once the lock is released."""
        abandoned: list[Any] = []
        for message in messages:
            if isinstance(message, m.Task):
                record = self._tasks[message.task_id] = _TaskRecord(message)  # known from now on, to a TaskCancel
                self._line.append(record)
            elif isinstance(message, m.TaskCancel):
                for task_id in message.task_ids:
                    abandoned += self._abandon_locked(task_id)
            elif isinstance(message, m.ProcessorResume):
                resumed = self._tasks.get(message.task_id)
                if resumed is not None and resumed.parked and not resumed.abandoned and resumed not in self._line:
                    self._line.append(resumed)
            elif isinstance(message, m.HelloReply):
                self._on_hello(message.object_storage_address)
        return abandoned

    def _start_next_locked(self) -> _TaskRecord | None:
        """Give the computing turn (free) to the head of the line: a task for the caller to start, or None (the
        line is empty, or its head was a resumed task, which goes on in its own thread)."""
        if not self._line:
            return None
        task = self._computing = self._line.popleft()
        if task.parked:
            task.parked = False
            self._parked.discard(task)
            _wake(task)
            return None
        return task

    def _pass_turn_locked(self, task: _TaskRecord, me: int) -> tuple[_TaskRecord | None, list[Any]]:
        """`task` stops computing (it ended or parked): the next of the line gets the turn, once the channel was
        read without blocking (rule 3). Returns the task thread `me` is to start (or hand on), and the nested
        futures of tasks stopped by what was read."""
        if self._computing is not task:
            return None, []  # a parked task that was stopped: it unwound without the turn
        self._computing = None
        if not self._line:
            return None, []
        try:
            messages = self._channel.poll()
        except ChannelClosed:
            if self._holder == me:
                raise
            messages = []  # the holder hears it too (the closed channel stays readable) and ends the processor
        abandoned = self._take_in(messages)
        return self._start_next_locked(), abandoned

    def _run(self, record: _TaskRecord) -> tuple[_TaskRecord | None, _Waiting | None]:
        """Run a task that has the computing turn and send its result. Returns the task this thread runs next,
        when the line gave it the turn; else, unless this thread holds the baton (or nobody does), its entry among
        the idle threads: it is idle from the moment the task ended, so that work read meanwhile (the main
        thread's, after a parent) comes to it."""
        task = record.task
        me = threading.get_ident()
        record.thread = me
        self._local.running = record
        self._last_priority = task.priority
        try:
            result = self._execute_stoppably(record, task)
        finally:
            self._local.running = None
        waiting = None
        with self._lock:
            if self._tasks.get(task.task_id) is record:  # not if the agent sent the task id again meanwhile
                del self._tasks[task.task_id]
            if record.parked:
                self._parked.discard(record)
            following, abandoned = self._pass_turn_locked(record, me)
            if following is None and self._holder is not None and self._holder != me:
                waiting = self._waiting[me] = _Waiting()
        if record.abandoned:  # the agent answered for it; it frees the slot when it hears it stopped
            result = m.TaskResult(task.task_id, m.ResultStatus.CANCELED)
        if result is not None:
            self.send(replace(result, worker_id=self._worker_id))
        _cancel_nested(abandoned)
        self._housekeeping()
        return following, waiting

    def _execute_stoppably(self, record: _TaskRecord, task: m.Task) -> m.TaskResult | None:
        """The task's result; None when it was stopped. A TaskAbandoned raised into this thread by `_abandon_locked`
        lands inside this function, never in the thread's own loop."""
        try:
            with record.lock:
                if record.abandoned:
                    return None  # stopped before it started
                record.interruptible = True
            try:
                return self._execute(task)
            finally:
                _stop_interruptions(record)
        except TaskAbandoned:
            return None

    def _hand_on(self, task: _TaskRecord | None = None, baton: bool = False) -> None:
        """Give an idle thread a task to run, the baton, or both (it runs the task first)."""
        with self._lock:
            needs_thread = self._hand_on_locked(task, baton)
        if needs_thread:
            self._start_thread(task)

    def _hand_on_locked(self, task: _TaskRecord | None, baton: bool = False) -> bool:
        """The main thread if it is idle, else the one idle the shortest time, gets the task and/or the baton;
        True when no thread is idle: the caller starts one for them once it released the lock."""
        target = self._main if self._main in self._waiting else next(reversed(self._waiting), None)
        if baton:
            self._holder = target
        if target is None:
            return True
        waiting = self._waiting.pop(target)
        waiting.task = task
        waiting.woken.set()
        return False

    def _start_thread(self, task: _TaskRecord | None) -> None:
        threading.Thread(target=self._helper, args=(task,), name="scaler-task", daemon=True).start()

    def _helper(self, task: _TaskRecord | None) -> None:
        """A thread started for the baton or a task. The processor ends when the channel closes or this fails."""
        try:
            self._work(task)
        except ChannelClosed:
            os._exit(0)
        except BaseException:
            logger.exception("a processor thread failed; the processor stops")
            os._exit(1)

    # ------------------------------------------------------------ the hooks a task's waits call

    def priority(self) -> int:
        running: _TaskRecord | None = getattr(self._local, "running", None)
        return running.task.priority if running is not None else self._last_priority

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
        if not running.abandoned:
            try:
                self.send(m.ProcessorResumeRequest(running.task.task_id))
            except ChannelClosed:
                pass  # the holder hears it too and ends the processor
            resume.wait()
        resume.clear()
        running.parked_cpu_seconds += time.process_time() - running.parked_since_cpu
        if running.abandoned_parked:
            raise TaskAbandoned(f"task {running.task.task_id.hex()} was stopped by its worker (cancelled or timed out)")

    def _park(self, record: _TaskRecord) -> None:
        """The task's outermost wait begins: tell the agent, then hand on the baton (if this thread holds it) and
        the computing turn, all under the lock; no TaskAbandoned is injected meanwhile."""
        _stop_interruptions(record)  # one injected already is raised here, before anything changed
        me = threading.get_ident()
        with self._lock:
            if record.abandoned:  # stopped while it could not be interrupted
                raise TaskAbandoned(f"task {record.task.task_id.hex()} was stopped by its worker")
            if record.resume is None:
                record.resume = threading.Event()
            record.parked = True
            self._parked.add(record)
            record.parked_since_cpu = time.process_time()
            try:
                self.send(m.ProcessorBlocked(record.task.task_id))  # before the next task's result can overtake it
            except ChannelClosed:
                pass  # the holder hears it too and ends the processor
            baton_needs_thread = self._holder == me and self._hand_on_locked(None, baton=True)
            following, abandoned = self._pass_turn_locked(record, me)
            task_needs_thread = following is not None and self._hand_on_locked(following)
        if baton_needs_thread:
            self._start_thread(None)
        if task_needs_thread:
            self._start_thread(following)
        _cancel_nested(abandoned)
        with record.lock:
            record.interruptible = True

    def _abandon_locked(self, task_id: TaskID) -> list[Any]:
        """Stop a task (the agent has answered for it), under the lock: one not started leaves the line; a parked
        one is woken to raise; TaskAbandoned is raised in the thread of a computing one. Returns the nested
        futures it submitted, to cancel once the lock is released."""
        record = self._tasks.get(task_id)
        if record is None or record.abandoned:
            return []
        if not record.parked and record in self._line:  # not started: it never will
            self._line.remove(record)
            del self._tasks[task_id]
            self.send(m.TaskResult(task_id, m.ResultStatus.CANCELED, worker_id=self._worker_id))
            return []
        record.abandoned_parked = record.parked  # set before `abandoned`: `on_unblock` reads them without the lock
        record.abandoned = True
        if record.parked:
            if record in self._line:
                self._line.remove(record)
            _wake(record)
        else:
            with record.lock:
                if record.interruptible:
                    record.injected = True
                    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
                    set_async_exc(ctypes.c_ulong(record.thread), ctypes.py_object(TaskAbandoned))
        return [future for ref in list(record.futures) if (future := ref()) is not None]


def _stop_interruptions(record: _TaskRecord) -> None:
    """No TaskAbandoned is injected into the task's thread from now on; one injected before is raised here."""
    with record.lock:
        record.interruptible = False
    if record.injected:
        for _ in range(1000):  # a pending asynchronous exception is raised at a loop's backward jump
            pass


def _wake(record: _TaskRecord) -> None:
    """Wake a parked task (it was given the turn back, or stopped)."""
    if record.resume is not None:  # made when it parked
        record.resume.set()


def _cancel_nested(futures: list[Any]) -> None:
    """Cancel the nested tasks of stopped tasks (outside the lock: it wakes their waiters, runs callbacks)."""
    for future in futures:
        future._abandon()
