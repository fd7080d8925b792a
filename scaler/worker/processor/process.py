"""A processor: the child process of a worker that runs user functions.

It talks only to its agent (a Unix socket pair, see channel.py) and to object storage. It starts by
running the preload function, announces itself with ProcessorReady, learns the object storage address
from a HelloReply, then runs the Tasks it receives as the processor protocol says
(`scaler.protocol.processor_protocol`): one computing at a time, in the order received, parked while they
wait on nested futures, each answered once with a TaskResult. `task_line` decides, `threads` carries it out.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scaler.io.process_profiling import trace_memory_if_asked
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.payload import processor_context
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.handshake import local_python_version
from scaler.worker.computing_mark import ComputingMark
from scaler.worker.preload import run_preload
from scaler.worker.processor import heap, joblib_name
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.outlet import ProcessorOutlet, processor_identity
from scaler.worker.processor.threads import TaskThreads
from scaler.worker.task_execution import TaskExecutor, _rss_bytes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessorSettings:
    scheduler_address: str  #: for clients created inside tasks, and the processor's own link
    worker_id: bytes = b""  #: stamped on results; its link names it
    #: send the results of its tasks to the scheduler on a link of its own (outlet.py), not through the agent
    direct_results: bool = True
    #: its worker lends it to the scheduler: plain tasks come on its link, and go back there (outlet.py)
    lend: bool = False
    #: with `lend`: where it marks the lent task it computes, for its agent (worker/computing_mark.py); "": nowhere
    marks_directory: str = ""
    preload: str | None = None
    garbage_collect_interval_seconds: float = 30.0
    #: how long a request to object storage waits for its answer (the worker's `storage_timeout_seconds`)
    storage_timeout_seconds: float = 60.0
    trim_memory_threshold_bytes: int = 1 << 30
    security: TransportSecurity | None = None  #: the worker's, for object storage and nested clients


class _Storage:
    """Opens the object storage connection on first use, once the agent said where storage is."""

    def __init__(self, sockets: SocketFactory, timeout_seconds: float) -> None:
        self._sockets = sockets
        self._timeout_seconds = timeout_seconds
        self.address = ""
        self._connection: Any = None
        #: called on a writer's thread each time the writes readers follow are all finished (followed_put.py)
        self.on_settled: Callable[[], None] | None = None

    def __call__(self) -> Any:
        if self._connection is None:
            from scaler.object_storage.connection import ObjectStorageConnection

            if not self.address:
                raise RuntimeError("object storage address unknown: the worker has not heard from the scheduler")
            connection = ObjectStorageConnection(
                self.address, role="processor", sockets=self._sockets, timeout_seconds=self._timeout_seconds
            )
            connection.on_followed_settled = self.on_settled
            self._connection = connection
        return self._connection

    def writing(self) -> bool:
        """Whether results this processor began writing while readers follow them are not stored yet."""
        connection = self._connection
        return connection is not None and bool(connection.writing_followed)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


_TASK_ENDS = (m.TaskResult, m.ResultSent)


class _WritingChannel(BlockingChannel):
    """The channel, on which the agent hears that the processor still writes results it announced (a large result is
    announced once its write has begun: object_storage/followed_put.py) before it hears that a task ended, and hears
    again once those writes are done (`settled`, called back by the writer's thread). Meanwhile the agent gives the
    processor no task and never retires it (a SIGKILL) mid-write (agent/core.py rule 8); the result itself leaves at
    once, through the agent or on the processor's own link. Sends are serialised here, since `settled` comes from the
    writer's thread."""

    def __init__(self, sock: socket.socket, writing: Callable[[], bool]) -> None:
        super().__init__(sock)
        self._writing = writing
        self._send_lock = threading.Lock()
        self._told = False  #: the agent was told the processor writes, and not yet that it is done

    def send_all(self, messages: Iterable[m.Message]) -> None:
        messages = tuple(messages)
        with self._send_lock:
            if not self._told and any(isinstance(message, _TASK_ENDS) for message in messages) and self._writing():
                self._told = True
                messages = (m.ProcessorWriting(True), *messages)
            super().send_all(messages)

    def settled(self) -> None:
        """The writes readers follow are all finished (stored, or given up and their readers told)."""
        with self._send_lock:
            if self._told and not self._writing():
                self._told = False
                super().send_all((m.ProcessorWriting(False),))


def run_processor(settings: ProcessorSettings, processor_id: bytes, channel_socket: socket.socket) -> int:
    trace_memory_if_asked("processor")
    if settings.preload:
        try:
            run_preload(settings.preload)
        except Exception as error:
            logger.error(
                "preload %r failed: %s: %s; this processor stops", settings.preload, type(error).__name__, error
            )
            return ExitCode.ERROR
    heap.keep_freed_heap(settings.trim_memory_threshold_bytes)
    joblib_name.install()  # a task's Parallel(backend="scaler") finds the backend without importing scaler.joblib
    sockets = SocketFactory(security=settings.security)
    storage = _Storage(sockets, settings.storage_timeout_seconds)
    channel = _WritingChannel(channel_socket, storage.writing)
    storage.on_settled = channel.settled
    outlet = _outlet(settings, processor_id, channel, sockets)
    mark = ComputingMark(settings.marks_directory, processor_id) if settings.lend and settings.marks_directory else None
    garbage = _GarbageCollection(settings.garbage_collect_interval_seconds, settings.trim_memory_threshold_bytes)

    def configure(address: str) -> None:
        storage.address = address
        outlet.configure()

    def housekeeping() -> None:
        outlet.read_link()
        garbage.maybe_collect()

    threads = TaskThreads(
        channel,
        outlet,
        lambda task: executor.run(task),
        configure,
        housekeeping,
        settings.garbage_collect_interval_seconds,
        settings.worker_id,
        mark,
    )
    executor = TaskExecutor(
        storage,
        outlet.log,
        cpu_seconds=threads.cpu_seconds,
        worker=settings.worker_id.decode(errors="replace"),
        stream_host=threads,
        actor_host=threads,
    )
    processor_context.install(
        processor_context.ProcessorContext(settings.scheduler_address, security=settings.security, threads=threads)
    )
    outlet.report(m.ProcessorReady(os.getpid()))
    try:
        threads.run()
        return 0  # the agent is gone
    finally:
        outlet.close()
        channel.close()
        storage.close()
        sockets.close()


def _outlet(
    settings: ProcessorSettings, processor_id: bytes, channel: BlockingChannel, sockets: SocketFactory
) -> ProcessorOutlet:
    """Where the processor's reports and results go: a link of its own to the scheduler, named after its worker and
    itself, for the results of its tasks with `direct_results` (opened once the agent configures it), and for the
    calls of the actors it builds either way (opened then; outlet.py)."""
    if not settings.worker_id:
        return ProcessorOutlet(channel)
    identity = processor_identity(settings.worker_id, processor_id)
    info = m.ProcessorInfo(processor_id, settings.worker_id, settings.lend)
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
    return ProcessorOutlet(
        channel,
        lambda: sockets.dealer(settings.scheduler_address, identity=identity),
        hello,
        settings.direct_results,
        settings.lend,
        hold_lent=settings.lend and bool(settings.marks_directory),
    )


class _GarbageCollection:
    """A full collection every `interval_seconds`, and the C heap trimmed when the process grew large."""

    def __init__(self, interval_seconds: float, trim_threshold_bytes: int) -> None:
        self._interval = interval_seconds
        self._trim_threshold = trim_threshold_bytes
        self._last = time.monotonic()

    def maybe_collect(self) -> None:
        if time.monotonic() - self._last >= self._interval:
            self._last = time.monotonic()
            _collect_garbage(self._trim_threshold)


def _collect_garbage(trim_threshold_bytes: int) -> None:
    gc.collect()
    if _rss_bytes() > trim_threshold_bytes:
        heap.trim_heap()
