"""A processor whose tasks act out their `function_name`, for the task-threads tests; run as a child process:

    python -m tests.unit.worker.scripted_processor CHANNEL_FD FOLDER

It serves a real `TaskThreads` on the socket inherited as CHANNEL_FD, which stands for both its agent's channel and
its link to the scheduler (`ChannelOutlet`: its tasks come there and everything about them leaves there), with an
`execute` that plays the task named by the task's body (utf-8) according to its `function_name`:
- "quick": nothing;
- "sleep", "nap": sleeps 20 ms, 1 ms (with the GIL released: a second task computing meanwhile would be seen);
- "hold": waits until the file FOLDER/release-NAME exists;
- "park": waits the same way, as a nested wait does (`on_block()` before, `on_unblock()` after, like
  `processor_context.BlockingWait`), or until the processor cancels its nested task (a stopped parent's
  wait ends that way); then it asks to resume and goes on once the turn is its own;
- "signal": installs a SIGUSR1 handler, which only works on the main thread;
- a task with `actor` set is an actor: its calls return their body (`serve_actor`).

With `--quiet-link` its link is also a folder: each file FOLDER/link-N holds one encoded message, read only by a
`take_work` and never signalled on the descriptor the holder's select watches, as a link whose edge another thread's
read consumed. Only the processor's watch finds what comes there; the holder must still hear of it, and the
housekeeping wait is an hour, so nothing else wakes the holder.

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

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker.actors import serve_actor
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
            elif task.actor is not None:
                serve_actor(task, None, self.threads, _echo_call)
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


def _echo_call(call: m.Task, _instance: object) -> m.TaskResult:
    return m.TaskResult(call.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, call.body)


class ChannelOutlet(ProcessorOutlet):
    """A processor's link that is its channel: its tasks come on the channel, and what it says goes back there."""

    def __init__(self, channel: BlockingChannel) -> None:
        super().__init__(lambda: None, m.Hello(m.PROTOCOL_VERSION, "", 0, "", m.ProcessorInfo(b"p", b"w")))
        self._channel = channel

    def configure(self) -> None:
        pass

    def send(self, message: m.Message) -> None:
        self._channel.send(message)

    def result(self, result: m.TaskResult, more: bool = False) -> None:
        self._channel.send(result)

    def wait_fds(self) -> tuple[int, ...]:
        return ()

    def take_work(self) -> list[m.Message]:
        return []


class QuietLinkOutlet(ChannelOutlet):
    """A processor's link whose messages from the scheduler are the folder's link-N files (module docstring)."""

    def __init__(self, channel: BlockingChannel, folder: str) -> None:
        super().__init__(channel)
        self._folder = folder
        self._quiet = os.pipe()  #: the link's descriptor: never readable

    def wait_fds(self) -> tuple[int, ...]:
        return (self._quiet[0],)

    def has_work(self) -> bool:
        return False

    def take_work(self) -> list[m.Message]:
        names = sorted((n for n in os.listdir(self._folder) if n.startswith("link-")), key=lambda n: int(n[5:]))
        work = []
        for name in names:
            path = os.path.join(self._folder, name)
            with open(path, "rb") as file:
                work.append(codec.decode(file.read()))
            os.unlink(path)
        return work


def main(channel_fd: int, folder: str, quiet_link: bool) -> None:
    channel = BlockingChannel(socket.socket(fileno=channel_fd))
    tasks = ScriptedTasks(folder)
    outlet = QuietLinkOutlet(channel, folder) if quiet_link else ChannelOutlet(channel)
    housekeeping_seconds = 3600.0 if quiet_link else 0.2
    tasks.threads = TaskThreads(channel, outlet, tasks.execute, lambda _, __: None, lambda: None, housekeeping_seconds)
    tasks.threads.run()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], "--quiet-link" in sys.argv[3:])
