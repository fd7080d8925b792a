"""A processor: the child process of a worker that runs user functions, one task at a time.

It talks only to its agent (a Unix socket pair, see processor_channel) and to object storage. It
starts by running the preload function, announces itself with ProcessorReady, learns the object
storage address from a HelloReply, then executes each Task it receives and answers with a
TaskResult. A task waiting on nested futures tells the agent (ProcessorBlocked) and, when its futures
are done, asks to run on (ProcessorResumeRequest) and waits for ProcessorResume.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Any

from scaler.client import processor_context
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.ids import TaskID
from scaler.worker.preload import run_preload
from scaler.worker.processor_channel import BlockingChannel, ChannelClosed
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


class _NestedWaits:
    """Block/unblock hooks given to clients created in tasks (see processor_context)."""

    def __init__(self, channel: BlockingChannel) -> None:
        self._channel = channel
        self.task_id: TaskID | None = None
        self._depth = 0

    def on_block(self) -> None:
        self._depth += 1
        if self._depth == 1 and self.task_id is not None:
            self._channel.send(m.ProcessorBlocked(self.task_id))

    def on_unblock(self) -> None:
        self._depth -= 1
        if self._depth != 0 or self.task_id is None:
            return
        self._channel.send(m.ProcessorResumeRequest(self.task_id))
        while True:  # wait for the agent to hand the slot back
            for message in self._channel.receive(None):
                if isinstance(message, m.ProcessorResume) and message.task_id == self.task_id:
                    return


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
    if settings.preload:
        try:
            run_preload(settings.preload)
        except Exception as error:
            logger.error(
                "preload %r failed: %s: %s; this processor stops", settings.preload, type(error).__name__, error
            )
            return ExitCode.ERROR
    sockets = SocketFactory(security=settings.security)
    channel = BlockingChannel(channel_socket)
    waits = _NestedWaits(channel)
    processor_context.install(
        processor_context.ProcessorContext(
            settings.scheduler_address, 0, waits.on_block, waits.on_unblock, security=settings.security
        )
    )
    storage = _Storage(sockets)
    executor = TaskExecutor(storage, channel.send)
    channel.send(m.ProcessorReady(os.getpid()))
    last_collect = time.monotonic()
    try:
        while True:
            try:
                messages = channel.receive(settings.garbage_collect_interval_seconds)
            except ChannelClosed:
                return 0  # the agent is gone
            for message in messages:
                if isinstance(message, m.HelloReply):
                    storage.address = message.object_storage_address
                elif isinstance(message, m.Task):
                    _run_one(message, executor, waits, channel, settings.worker_id)
            if time.monotonic() - last_collect >= settings.garbage_collect_interval_seconds:
                last_collect = time.monotonic()
                _collect_garbage(settings.trim_memory_threshold_bytes)
    finally:
        channel.close()
        storage.close()
        sockets.close()


def _run_one(
    task: m.Task, executor: TaskExecutor, waits: _NestedWaits, channel: BlockingChannel, worker_id: bytes
) -> None:
    context = processor_context.current()
    if context is not None:
        context.task_priority = task.priority
    waits.task_id = task.task_id
    try:
        result = executor.run(task)
    finally:
        waits.task_id = None
    channel.send(replace(result, worker_id=worker_id))


def _collect_garbage(trim_threshold_bytes: int) -> None:
    gc.collect()
    if _rss_bytes() > trim_threshold_bytes:
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
