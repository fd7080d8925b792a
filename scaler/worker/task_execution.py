"""Running one task inside a processor: decode it into a call, call it, package its outcome.

What the bytes of a task and of its result mean is `scaler.payload`'s (`task_decoder`, `result_writer`); this
module runs the call: on the calling thread, with the task's output streamed to its client when it asks, and
with its time, CPU time and memory measured when it is profiled. `TaskExecutor` works in any process or thread
(a processor, a thread executor); `run_bundle` runs an offloaded task's bundle with it on a remote system.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scaler.payload.remote_bundle import open_bundle, seal_outcome
from scaler.payload.result_writer import NO_PROFILE, failed_result, succeeded_result
from scaler.payload.storage import StorageAccess
from scaler.payload.task_decoder import DecodedCall, TaskDecoder
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.actors import ActorHost, serve_actor
from scaler.worker.log_forwarding import LogCapture
from scaler.worker.streaming import StreamHost, run_stream

MEMORY_SAMPLE_SECONDS = 0.05
_NO_INSTANCE: Any = object()  #: `TaskExecutor.run` of a task that is no actor's call


class TaskExecutor:
    def __init__(
        self,
        storage: Callable[[], StorageAccess],
        send_log: Callable[[m.TaskLog], None],
        cpu_seconds: Callable[[], float] = time.process_time,
        worker: str = "",
        stream_host: StreamHost | None = None,
        actor_host: ActorHost | None = None,
    ) -> None:
        """`cpu_seconds`: the clock a profiled task's CPU time is read from (a processor whose tasks park leaves
        out what other tasks used meanwhile). `worker`: the worker id forwarded logging records name.
        `stream_host`: how streaming tasks wait for their client's credit and send their values (a processor's
        threads); without one (a remote bundle), a streaming task fails saying it cannot stream there. `actor_host`: how
        an actor's start task serves its calls (`worker/actors.py`); without one, an actor cannot start here."""
        self._storage = storage
        self._worker = worker
        self._send_log = send_log
        self._cpu_seconds = cpu_seconds
        self._stream_host = stream_host
        self._actor_host = actor_host
        self._decoder = TaskDecoder(storage)

    def run(self, task: m.Task, instance: Any = _NO_INSTANCE) -> m.TaskResult:
        """Run the task; `instance`: the actor whose call the task is (its function is an `ActorMethodFunction`). An
        actor's start task builds the instance, then serves the actor's calls until it is stopped."""
        if task.actor is not None and self._actor_host is None:
            problem = RuntimeError("an actor cannot start where this task ran (an offloading worker manager runs a "
                                   "task as one job); start actors on ordinary workers")  # fmt: skip
            return failed_result(task, problem, "")
        call = self._decoder.decode(task)
        if not isinstance(call, DecodedCall):
            return call  # the task ended before its call
        sampler = _MemorySampler() if call.profiling else None
        # the process's CPU clock is a system call of several microseconds (a tiny task's whole run is a few more):
        # read only for a profiled task, the one that reports it
        started, cpu_started = (time.perf_counter(), self._cpu_seconds()) if sampler is not None else (0.0, 0.0)
        try:
            if call.stream_output or call.log_forwarding is not None:
                with (
                    _OutputCapture(task.task_id, self._send_log, call.stream_output),
                    LogCapture(task.task_id, call.log_forwarding, self._send_log, self._worker),
                ):
                    value = self._call(task, call, instance)
            else:  # nothing to capture: no context to enter and leave (a processor's every task pays for them)
                value = self._call(task, call, instance)
        except SystemExit as exit_request:
            replacement = RuntimeError(f"the task called sys.exit({exit_request.code!r})")
            return failed_result(task, replacement, "".join(traceback.format_exception(exit_request)))
        except (Exception, KeyboardInterrupt) as error:  # a KeyboardInterrupt the task raised is its outcome, as in
            # a thread pool's (processors ignore SIGINT: a Ctrl-C to the worker never reaches a task this way)
            return failed_result(task, error, _user_traceback(error))
        finally:
            profile = NO_PROFILE
            if sampler is not None:  # only profiled tasks carry (and pay for) measurements
                profile = m.Profile(time.perf_counter() - started, self._cpu_seconds() - cpu_started, sampler.stop())
        if task.stream_credit:
            ended: m.TaskResult = value
            return ended if profile is NO_PROFILE else replace(ended, profile=profile)
        if task.actor is not None and self._actor_host is not None:  # built: serve its calls until it is stopped
            serve_actor(task, value, self._actor_host, self.run)
            value = None
        return succeeded_result(task, call.serializer, value, profile, self._storage)

    def _call(self, task: m.Task, call: DecodedCall, instance: Any) -> Any:
        """The call's value (a streaming task's end, its values having gone as they came)."""
        if instance is _NO_INSTANCE:
            value = call.function(*call.args, **call.kwargs)
        else:
            value = call.function(instance, *call.args, **call.kwargs)
        if task.stream_credit:
            return self._stream(task, value, call)
        if inspect.isgenerator(value):
            return list(value)  # a generator cannot travel: its values do (Client.stream streams them)
        return value

    def _stream(self, task: m.Task, values: Any, call: DecodedCall) -> m.TaskResult:
        if self._stream_host is None:
            close = getattr(values, "close", None)
            if close is not None:
                close()
            raise RuntimeError(
                "a streaming task cannot stream its values from where it ran (an offloading worker manager runs a "
                "task as one job); run it on ordinary workers, or submit it to get all its values at once"
            )
        return run_stream(task, values, call.serializer, self._stream_host, self._storage, _user_traceback)


def _user_traceback(error: BaseException) -> str:
    """The traceback from the user's function down, without the processor's own frames."""
    tb = error.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


class _MemorySampler:
    """Samples this process's resident memory while a profiled task runs; reports the peak growth."""

    def __init__(self) -> None:
        self._start = _rss_bytes()
        self._peak = self._start
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="scaler-memory-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stopped.wait(MEMORY_SAMPLE_SECONDS):
            self._peak = max(self._peak, _rss_bytes())

    def stop(self) -> int:
        self._stopped.set()
        self._thread.join()
        self._peak = max(self._peak, _rss_bytes())
        return max(0, self._peak - self._start)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _LogStream:
    """A task's stdout or stderr: complete lines go to the client as TaskLog messages (the rest when
    the task ends)."""

    def __init__(self, task_id: TaskID, stream: m.LogStream, send: Callable[[m.TaskLog], None]):
        self._task_id, self._stream, self._send = task_id, stream, send
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            self._send(m.TaskLog(self._task_id, self._stream, complete + "\n"))
        return len(text)

    def close_task(self) -> None:
        if self._pending:
            self._send(m.TaskLog(self._task_id, self._stream, self._pending))
            self._pending = ""


class _StreamRouter:
    """Stands in for sys.stdout or sys.stderr once a task streams its output: a write from the thread of such
    a task goes to that task's client; any other write (another task's, a thread a task started, the
    processor's own) goes to the original stream."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.by_thread: dict[int, _LogStream] = {}

    def write(self, text: str) -> int:
        stream = self.by_thread.get(threading.get_ident())
        return stream.write(text) if stream is not None else int(self.original.write(text))

    def flush(self) -> None:
        if threading.get_ident() not in self.by_thread:
            self.original.flush()

    def isatty(self) -> bool:
        return threading.get_ident() not in self.by_thread and bool(self.original.isatty())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


def _router(name: str) -> _StreamRouter:
    current = getattr(sys, name)
    if not isinstance(current, _StreamRouter):
        current = _StreamRouter(current)
        setattr(sys, name, current)
    return current


class _OutputCapture:
    """While active, what the task's thread prints goes to its client as TaskLog messages."""

    def __init__(self, task_id: TaskID, send: Callable[[m.TaskLog], None], enabled: bool) -> None:
        self._task_id, self._send, self._enabled = task_id, send, enabled
        self._streams: list[tuple[_StreamRouter, _LogStream]] = []

    def __enter__(self) -> None:
        if self._enabled:
            thread = threading.get_ident()
            for name, kind in (("stdout", m.LogStream.STDOUT), ("stderr", m.LogStream.STDERR)):
                router, stream = _router(name), _LogStream(self._task_id, kind, self._send)
                router.by_thread[thread] = stream
                self._streams.append((router, stream))

    def __exit__(self, *exc: object) -> None:
        thread = threading.get_ident()
        for router, stream in self._streams:
            stream.close_task()
            if router.by_thread.get(thread) is stream:
                del router.by_thread[thread]
        self._streams.clear()


def run_bundle(bundle_bytes: bytes, on_log: Callable[[m.TaskLog], None] | None = None) -> bytes:
    """Run a bundled task (`scaler.payload.remote_bundle`) here, against the objects it carries; its sealed
    outcome. Never raises for the task's own failures (they are in the result); raises BundleError for a bundle
    that cannot be read."""
    task, storage = open_bundle(bundle_bytes)
    logs: list[m.TaskLog] = []

    def keep_log(log: m.TaskLog) -> None:
        logs.append(log)
        if on_log is not None:
            on_log(log)

    result = TaskExecutor(lambda: storage, keep_log).run(task)
    return seal_outcome(result, storage, logs)
