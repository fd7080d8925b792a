"""A processor whose tasks act out their `function_name`, for the task-threads tests; run as a child process:

    python -m tests.unit.worker.scripted_processor CHANNEL_FD FOLDER

It serves a real `TaskThreads` on the socket inherited as CHANNEL_FD, with an `execute` that plays the task
named by the task's body (utf-8) according to its `function_name`:
- "quick": nothing;
- "sleep", "nap": sleeps 20 ms, 1 ms (with the GIL released: a second task computing meanwhile would be seen);
- "hold": waits until the file FOLDER/release-NAME exists;
- "park": waits the same way, as a nested wait does (`on_block()` before, `on_unblock()` after, like
  `processor_context.BlockingWait`), or until the processor cancels its nested task (a stopped parent's
  wait ends that way); then it asks to resume and waits for ProcessorResume;
- "signal": installs a SIGUSR1 handler, which only works on the main thread.

Every task sends a TaskLog "started NAME" when it starts, and its result's payload is a JSON `Trace`: whether
it ran on the main thread, and whether another task was computing whenever it started or resumed computing.
The process exits with code 0 when `run()` returns (the agent closed the channel).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass

from scaler.protocol import messages as m
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.outlet import ProcessorOutlet
from scaler.worker.processor.threads import TaskThreads

#: the behaviours that sleep (with the GIL released: a second task computing meanwhile would be seen)
SLEEP_SECONDS = {"sleep": 0.02, "nap": 0.001}
RELEASE_POLL_SECONDS = 0.002


@dataclass(frozen=True)
class Trace:
    name: str
    on_main_thread: bool
    overlapped: bool  #: another task was computing when this one started or resumed


class NestedTask:
    """The future of a nested task a parked task waits on, as the processor sees it (`on_submitted`): the
    processor abandons it when it stops the parked task, which ends the wait."""

    def __init__(self) -> None:
        self.abandoned = threading.Event()

    def done(self) -> bool:
        return self.abandoned.is_set()

    def abandon(self) -> None:
        self.abandoned.set()


class ScriptedTasks:
    """The `execute` of the scripted processor, and the tasks computing at this instant."""

    def __init__(self, folder: str) -> None:
        self._folder = folder
        self._lock = threading.Lock()
        #: by name; a set, so that a TaskAbandoned raised anywhere in `execute` cannot leave a stale count
        self._computing: set[str] = set()
        self.threads: TaskThreads | None = None

    def execute(self, task: m.Task) -> m.TaskResult:
        assert self.threads is not None
        name = task.body.decode()
        try:
            overlapped = self._start_computing(name)
            self.threads.send(m.TaskLog(task.task_id, m.LogStream.STDOUT, f"started {name}"))
            if task.function_name in SLEEP_SECONDS:
                time.sleep(SLEEP_SECONDS[task.function_name])
            elif task.function_name == "hold":
                self._wait_for_release(name)
            elif task.function_name == "park":
                self._stop_computing(name)
                nested = NestedTask()
                self.threads.on_submitted(nested)
                assert self.threads.on_block()
                try:
                    self._wait_for_release(name, nested.abandoned)
                finally:
                    self.threads.on_unblock()  # raises TaskAbandoned when the task was stopped while parked
                overlapped = self._start_computing(name) or overlapped
            elif task.function_name == "signal":
                try:
                    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
                except ValueError:  # not the main thread: the trace says so
                    pass
        finally:
            self._stop_computing(name)
        trace = Trace(name, threading.current_thread() is threading.main_thread(), overlapped)
        payload = json.dumps(asdict(trace)).encode()
        return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, payload)

    def _wait_for_release(self, name: str, abandoned: threading.Event | None = None) -> None:
        path = os.path.join(self._folder, f"release-{name}")
        while not os.path.exists(path) and not (abandoned is not None and abandoned.is_set()):
            time.sleep(RELEASE_POLL_SECONDS)

    def _start_computing(self, name: str) -> bool:
        with self._lock:
            self._computing.add(name)
            return len(self._computing) > 1

    def _stop_computing(self, name: str) -> None:
        with self._lock:
            self._computing.discard(name)


def main(channel_fd: int, folder: str) -> None:
    channel = BlockingChannel(socket.socket(fileno=channel_fd))
    tasks = ScriptedTasks(folder)
    tasks.threads = TaskThreads(channel, ProcessorOutlet(channel), tasks.execute, lambda _: None, lambda: None, 0.2)
    tasks.threads.run()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
