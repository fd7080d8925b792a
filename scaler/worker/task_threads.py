"""The threads of a processor: how one process runs a task, and goes on serving while that task waits.

One thread at a time holds the *baton*: it reads the agent's channel (at first, the main thread). A task
that waits on nested futures *parks*: it hands the baton to another thread (an idle one, or a new one),
tells the agent (ProcessorBlocked) and waits. The new holder goes on reading, so the agent may send this
processor the next task (the parent's child, say) while the parent waits: one process serves a whole nested
computation, with no process and no client connection per waiting parent. When the parent's futures are
done it asks to run on (ProcessorResumeRequest) and waits for ProcessorResume, which the holder hands to
it; it then finishes on its own thread, sends its result and becomes idle. The agent lets one task compute
at a time, so task code never runs on two threads at once.

While no task is parked, the holder runs each task itself (no thread hand-off for plain tasks). While some
are, it gives each task to a thread of its own and keeps reading, so that it hears a TaskCancel at once.
The agent sends one when it stops (cancels, times out) a task of a processor that holds parked tasks,
instead of killing the processor and them with it: a parked task's nested tasks are cancelled and its wait
raises TaskAbandoned; a computing task gets TaskAbandoned raised in its thread (between two bytecodes:
code stuck in a C call stops when the call returns, or the agent kills the processor after a grace period).
Every abandoned task is reported with a CANCELED result when its thread is done: the agent frees the slot of
one it stopped while computing, and ignores the rest.

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
from scaler.worker.processor_channel import BlockingChannel, ChannelClosed

logger = logging.getLogger(__name__)

#: An idle thread beyond the first ends after waiting this long for work.
IDLE_THREAD_SECONDS = 30.0


class TaskAbandoned(BaseException):
    """Raised in the thread of a task the agent stopped: unwinds the task's code. Not an `Exception`, so that a
    task's `except Exception:` does not swallow it."""


@dataclass(eq=False)
class _RunningTask:
    task: m.Task
    thread: int = 0  #: the thread that runs it, once it started
    depth: int = 0  #: nested waits in progress (the outermost parks)
    #: as the agent sees it: from the outermost wait's start until the channel brings ProcessorResume
    parked: bool = False
    abandoned: bool = False
    abandoned_parked: bool = False  #: stopped while parked: its wait raises
    #: True while an injected TaskAbandoned can only land inside this task's execution (guarded by `lock`)
    interruptible: bool = False
    injected: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    resume: threading.Event = field(default_factory=threading.Event)
    futures: list[weakref.ref[Any]] = field(default_factory=list)  #: nested tasks it submitted
    parked_since_cpu: float = 0.0
    parked_cpu_seconds: float = 0.0  #: the process's CPU time while it was parked: other tasks' work


@dataclass(eq=False)
class _Waiting:
    """An idle thread, until it is handed the baton (task None) or a task to run."""

    woken: threading.Event = field(default_factory=threading.Event)
    task: _RunningTask | None = None


class TaskThreads:
    """Runs the processor's tasks on its threads; the hooks of `processor_context.TaskThreads`.

    `execute(task)` runs one task and returns its result; `on_hello(address)` takes the object storage
    address; `housekeeping()` is called after every read of the channel, and at least every
    `housekeeping_seconds` (garbage collection)."""

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
        self._tasks: dict[TaskID, _RunningTask] = {}
        self._inbox: collections.deque[m.Message] = collections.deque()
        self._lock = threading.Lock()  #: guards the baton and the idle threads
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
        running: _RunningTask | None = getattr(self._local, "running", None)
        return time.process_time() - (running.parked_cpu_seconds if running is not None else 0.0)

    def _work(self, task: _RunningTask | None) -> None:
        """A thread's life: run the task it was given (if any), then take the baton or wait to be handed work."""
        me = threading.get_ident()
        while True:
            if task is not None:
                self._run(task)
            with self._lock:
                if self._holder is None:
                    self._holder = me
                    waiting = None
                else:
                    waiting = self._waiting[me] = _Waiting()
            if waiting is not None:
                while not waiting.woken.wait(IDLE_THREAD_SECONDS):
                    with self._lock:
                        if not waiting.woken.is_set() and me != self._main and len(self._waiting) > 1:
                            del self._waiting[me]
                            return
            task = waiting.task if waiting is not None else None
            if task is None:
                self._serve_while_holding()

    def _serve_while_holding(self) -> None:
        me = threading.get_ident()
        while self._holder == me:
            if me != self._main and self._main in self._waiting:
                self._hand_on()  # the baton goes back to the main thread, which is free again
                return
            if not self._inbox:
                self._inbox.extend(self._channel.receive(self._housekeeping_seconds))
                self._housekeeping()
                continue
            self._dispatch(self._inbox.popleft())

    def _dispatch(self, message: m.Message) -> None:
        if isinstance(message, m.Task):
            parked = any(running.parked for running in list(self._tasks.values()))
            running = self._tasks[message.task_id] = _RunningTask(message)  # known from now on, to a TaskCancel
            if parked:
                self._hand_on(running)  # keep reading: a TaskCancel for it must be heard while it runs
            else:
                self._run(running)
        elif isinstance(message, m.ProcessorResume):
            resumed = self._tasks.get(message.task_id)
            if resumed is not None:
                resumed.parked = False
                resumed.resume.set()
        elif isinstance(message, m.TaskCancel):
            for task_id in message.task_ids:
                self._abandon(task_id)
        elif isinstance(message, m.HelloReply):
            self._on_hello(message.object_storage_address)

    def _run(self, running: _RunningTask) -> None:
        task = running.task
        running.thread = threading.get_ident()
        self._local.running = running
        self._last_priority = task.priority
        try:
            result = self._execute_stoppably(running, task)
        finally:
            self._local.running = None
            del self._tasks[task.task_id]
        if running.abandoned:  # the agent answered for it; it frees the slot when it hears it stopped
            result = m.TaskResult(task.task_id, m.ResultStatus.CANCELED)
        if result is not None:
            self.send(replace(result, worker_id=self._worker_id))

    def _execute_stoppably(self, running: _RunningTask, task: m.Task) -> m.TaskResult | None:
        """The task's result; None when it was stopped. A TaskAbandoned raised into this thread by `_abandon`
        lands inside this function, never in the thread's own loop."""
        try:
            with running.lock:
                if running.abandoned:
                    return None  # stopped before it started
                running.interruptible = True
            try:
                return self._execute(task)
            finally:
                with running.lock:
                    running.interruptible = False
                if running.injected:
                    for _ in range(1000):  # a pending asynchronous exception is raised at a loop's backward jump
                        pass
        except TaskAbandoned:
            return None

    def _hand_on(self, task: _RunningTask | None = None) -> None:
        """Give the baton (task None) or a task to an idle thread: the main thread if it is idle, else the one
        idle the shortest time, else a new one."""
        with self._lock:
            target = self._main if self._main in self._waiting else next(reversed(self._waiting), None)
            if task is None:
                self._holder = target
            if target is not None:
                waiting = self._waiting.pop(target)
                waiting.task = task
                waiting.woken.set()
                return
        threading.Thread(target=self._helper, args=(task,), name="scaler-task", daemon=True).start()

    def _helper(self, task: _RunningTask | None) -> None:
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
        running: _RunningTask | None = getattr(self._local, "running", None)
        return running.task.priority if running is not None else self._last_priority

    def on_submitted(self, future: Any) -> None:
        running: _RunningTask | None = getattr(self._local, "running", None)
        if running is None:
            return
        futures = running.futures
        if len(futures) >= 64 and len(futures) & (len(futures) - 1) == 0:  # now and then, forget finished ones
            futures[:] = [ref for ref in futures if (f := ref()) is not None and not f.done()]
        futures.append(weakref.ref(future))

    def on_block(self) -> bool:
        running: _RunningTask | None = getattr(self._local, "running", None)
        if running is None:
            return False  # not a task's own thread: it keeps its slot
        running.depth += 1
        if running.depth == 1:
            running.parked = True
            running.parked_since_cpu = time.process_time()
            if self._holder == threading.get_ident():
                self._hand_on()
            self.send(m.ProcessorBlocked(running.task.task_id))
        return True

    def on_unblock(self) -> None:
        running: _RunningTask = self._local.running
        running.depth -= 1
        if running.depth:
            return
        if not running.abandoned:
            self.send(m.ProcessorResumeRequest(running.task.task_id))
            running.resume.wait()
        running.resume.clear()
        running.parked_cpu_seconds += time.process_time() - running.parked_since_cpu
        if running.abandoned_parked:
            raise TaskAbandoned(f"task {running.task.task_id.hex()} was stopped by its worker (cancelled or timed out)")

    def _abandon(self, task_id: TaskID) -> None:
        """Stop a task (the agent has answered for it): cancel what it submitted, wake it if it is parked, raise
        in its thread if it computes."""
        running = self._tasks.get(task_id)
        if running is None or running.abandoned:
            return
        running.abandoned = True
        running.abandoned_parked = running.parked
        for ref in list(running.futures):
            future = ref()
            if future is not None:
                future._abandon()
        if running.abandoned_parked:
            running.resume.set()
            return
        with running.lock:
            if running.interruptible:
                running.injected = True
                set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
                set_async_exc(ctypes.c_ulong(running.thread), ctypes.py_object(TaskAbandoned))
