"""A processor: the child process of a worker that runs user functions.

It talks only to its agent (a Unix socket pair, see channel.py) and to object storage. It starts by
running the preload function, announces itself with ProcessorReady, learns the object storage address
from a HelloReply, then runs the Tasks it receives as the processor protocol says
(`scaler.worker.processor_protocol`): one computing at a time, in the order received, parked while they
wait on nested futures, each answered once with a TaskResult. `task_line` decides, `threads` carries it out.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from scaler.io.process_profiling import trace_memory_if_asked
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.payload import processor_context
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.worker.preload import run_preload
from scaler.worker.processor import joblib_name
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.threads import TaskThreads
from scaler.worker.task_execution import TaskExecutor, _rss_bytes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessorSettings:
    scheduler_address: str  #: for clients created inside tasks
    worker_id: bytes = b""  #: stamped on results
    preload: str | None = None
    garbage_collect_interval_seconds: float = 30.0
    trim_memory_threshold_bytes: int = 1 << 30
    security: TransportSecurity | None = None  #: the worker's, for object storage and nested clients


class _Storage:
    """Opens the object storage connection on first use, once the agent said where storage is."""

    def __init__(self, sockets: SocketFactory) -> None:
        self._sockets = sockets
        self.address = ""
        self._connection: Any = None

    def __call__(self) -> Any:
        if self._connection is None:
            from scaler.object_storage.connection import ObjectStorageConnection

            if not self.address:
                raise RuntimeError("object storage address unknown: the worker has not heard from the scheduler")
            self._connection = ObjectStorageConnection(self.address, role="processor", sockets=self._sockets)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


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
    joblib_name.install()  # a task's Parallel(backend="scaler") finds the backend without importing scaler.joblib
    sockets = SocketFactory(security=settings.security)
    channel = BlockingChannel(channel_socket)
    storage = _Storage(sockets)
    garbage = _GarbageCollection(settings.garbage_collect_interval_seconds, settings.trim_memory_threshold_bytes)
    threads = TaskThreads(
        channel,
        lambda task: executor.run(task),
        lambda address: setattr(storage, "address", address),
        garbage.maybe_collect,
        settings.garbage_collect_interval_seconds,
        settings.worker_id,
    )
    executor = TaskExecutor(
        storage,
        threads.send,
        cpu_seconds=threads.cpu_seconds,
        worker=settings.worker_id.decode(errors="replace"),
        stream_host=threads,
        actor_host=threads,
    )
    processor_context.install(
        processor_context.ProcessorContext(settings.scheduler_address, security=settings.security, threads=threads)
    )
    threads.send(m.ProcessorReady(os.getpid()))
    try:
        threads.run()
        return 0  # the agent is gone
    finally:
        channel.close()
        storage.close()
        sockets.close()


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
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
