"""A processor: the child process of a worker that runs user functions.

It talks to its agent (a Unix socket pair, see channel.py), to the scheduler on a link of its own (outlet.py) and to
object storage. It starts by running the preload function, announces itself to its agent with ProcessorReady, learns
the object storage address from its agent's HelloReply and then says hello on its link, where its tasks come; it runs
them as the processor protocol says (`scaler.protocol.processor_protocol`): one computing at a time, in priority
order, parked while they wait on nested futures, each answered once on the link. `task_line` decides, `threads`
carries it out.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.io.process_profiling import trace_memory_if_asked
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.payload import processor_context
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.handshake import local_python_version
from scaler.security.curve import CurveSecurity
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
    #: where it marks the task it computes, for its agent (worker/computing_mark.py); "": nowhere
    marks_directory: str = ""
    max_staged_tasks: int = 0  #: how many tasks it may hold beyond the one it computes (its link's hello says so)
    preload: str | None = None
    garbage_collect_interval_seconds: float = 30.0
    #: how long a request to object storage waits for its answer (the worker's `storage_timeout_seconds`)
    storage_timeout_seconds: float = 60.0
    trim_memory_threshold_bytes: int = 1 << 30
    security: TransportSecurity | None = None  #: the worker's, for object storage and nested clients


class _Storage:
    """The object storage connection, once the agent said where storage is: the storage server, or the host's cache of
    it (host_cache/), whose CURVE key the agent names too. Opened as soon as the processor knows where (`open_early`,
    on a thread of its own), so that a fresh processor's first task does not import, build and connect it; else, or
    if that failed, on first use."""

    def __init__(self, sockets: SocketFactory, timeout_seconds: float) -> None:
        self._sockets = sockets
        self._timeout_seconds = timeout_seconds
        self.address = ""
        self.server_key = ""  #: the CURVE public key of the server at `address` when not the servers' own
        self._connection: Any = None
        self._making = threading.Lock()  #: one connection, whether `open_early` or a task makes it first
        self._own_sockets: SocketFactory | None = None  #: secured with `server_key`, made for the cache
        #: called on a writer's thread each time the writes readers follow are all finished (followed_put.py)
        self.on_settled: Callable[[], None] | None = None

    def __call__(self) -> Any:
        with self._making:
            return self._connection if self._connection is not None else self._make()

    def _make(self) -> Any:
        from scaler.object_storage.connection import ObjectStorageConnection

        if not self.address:
            raise RuntimeError("object storage address unknown: the worker has not heard from the scheduler")
        sockets, timeout = self._sockets_for_server(), self._timeout_seconds
        connection = ObjectStorageConnection(self.address, role="processor", sockets=sockets, timeout_seconds=timeout)
        connection.on_followed_settled = self.on_settled
        self._connection = connection
        return connection

    def open_early(self) -> None:
        """Make the connection and open its socket now: the import, the socket and its handshake (CURVE) are done
        before a task asks. A failure is left to the first request, which reports it to its task."""
        try:
            self().open()  # the one already made, if a task or an earlier configure made it
        except Exception as error:  # the address is wrong, or storage moved meanwhile: a task's request will say
            logger.debug("object storage connection not opened ahead of tasks: %s: %s", type(error).__name__, error)

    def _sockets_for_server(self) -> SocketFactory:
        security = self._sockets.security
        if not self.server_key or not isinstance(security, CurveSecurity):
            return self._sockets
        own = CurveSecurity(security.public, security.secret, self.server_key.encode())
        self._own_sockets = SocketFactory(security=own)
        return self._own_sockets

    def configure(self, address: str, server_key: str) -> bool:
        """Where storage is; the connection there is opened now, before a task asks (`open_early`). True when it was
        known and is another place now (the host's cache was replaced): the connection there is closed."""
        moved = bool(self.address) and (address, server_key) != (self.address, self.server_key)
        self.address, self.server_key = address, server_key
        if moved:  # closed on a thread: a task may hold the old connection's lock until its request fails
            with self._making:
                connection, sockets = self._connection, self._own_sockets
                self._connection = self._own_sockets = None
            threading.Thread(target=_close_all, args=(connection, sockets), daemon=True).start()
        # on a thread: this is called under the processor's threads' lock, and the first import takes a while
        threading.Thread(target=self.open_early, name="storage-open", daemon=True).start()
        return moved

    def writing(self) -> bool:
        """Whether results this processor began writing while readers follow them are not stored yet."""
        connection = self._connection
        return connection is not None and bool(connection.writing_followed)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._own_sockets is not None:
            self._own_sockets.close()


def _close_all(connection: Any, sockets: SocketFactory | None) -> None:
    if connection is not None:
        connection.close()
    if sockets is not None:
        sockets.close()


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
    channel = BlockingChannel(channel_socket)
    mark = ComputingMark(settings.marks_directory, processor_id) if settings.marks_directory else None
    outlet = _outlet(settings, processor_id, sockets, storage.writing, hold=mark is not None)
    storage.on_settled = outlet.settled
    garbage = _GarbageCollection(settings.garbage_collect_interval_seconds, settings.trim_memory_threshold_bytes)
    context = processor_context.ProcessorContext(settings.scheduler_address, security=settings.security)

    def configure(address: str, server_key: str) -> None:
        context.object_storage_address = address
        if storage.configure(address, server_key):
            return  # the route to storage changed (the host's cache was replaced): the link stays as it is
        outlet.configure()

    def housekeeping() -> None:
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
        outlet.send,
        cpu_seconds=threads.cpu_seconds,
        worker=settings.worker_id.decode(errors="replace"),
        stream_host=threads,
        actor_host=threads,
    )
    context.threads = threads
    processor_context.install(context)
    channel.send(m.ProcessorReady(os.getpid()))
    try:
        threads.run()
        return 0  # the agent is gone
    finally:
        outlet.close()
        channel.close()
        storage.close()
        sockets.close()


def _outlet(
    settings: ProcessorSettings,
    processor_id: bytes,
    sockets: SocketFactory,
    writing: Callable[[], bool],
    hold: bool,
) -> ProcessorOutlet:
    """The processor's link to the scheduler, named after its worker and itself (outlet.py)."""
    identity = processor_identity(settings.worker_id, processor_id)
    info = m.ProcessorInfo(processor_id, settings.worker_id, max_staged_tasks=settings.max_staged_tasks)
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
    return ProcessorOutlet(lambda: sockets.dealer(settings.scheduler_address, identity=identity), hello, hold, writing)


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
