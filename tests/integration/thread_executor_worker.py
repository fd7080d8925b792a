"""A worker whose processors are threads of the agent process (a second `Executor`, for the seam's test).

    python thread_executor_worker.py SCHEDULER_ADDRESS SLOTS

Each "processor" is a thread running tasks with the same `TaskExecutor` the forked processors use, with its link to the
scheduler opened by the agent's shell (`open_link`); a kill only forgets the thread's task (threads cannot be killed),
which is enough for the contract.
"""

from __future__ import annotations

import asyncio
import sys
import threading

from scaler.config.sections import WorkerConfig
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.protocol import messages as m
from scaler.protocol.ids import new_worker_id
from scaler.security.find import find_keys
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.executors.hosted_link import HostedLink
from scaler.worker.process import run_agent
from scaler.worker.task_execution import TaskExecutor


class ThreadExecutor:
    max_staged_tasks = 0  # each task runs on a thread of its own

    def __init__(self, security: TransportSecurity | None = None) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: ExecutorListener | None = None
        self._storage_address = ""
        self._storage: ObjectStorageConnection | None = None
        self._sockets = SocketFactory(security=security)
        self._alive: set[bytes] = set()
        self._links: dict[bytes, HostedLink] = {}

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop, self._listener = loop, listener

    def spawn(self, processor_id: bytes) -> None:
        self._alive.add(processor_id)
        self._report(processor_id, m.ProcessorReady(threading.get_native_id()))

    def send(self, processor_id: bytes, message: m.Message) -> None:
        if isinstance(message, m.HelloReply) and self._listener is not None:
            self._storage_address = message.object_storage_address
            if processor_id not in self._links:
                self._links[processor_id] = self._listener.open_link(
                    processor_id, lambda work: self._take(processor_id, work)
                )
            self._links[processor_id].configure()

    def _take(self, processor_id: bytes, work: list[m.Message]) -> None:
        for message in work:
            if isinstance(message, m.Task):
                threading.Thread(target=self._run, args=(processor_id, message), daemon=True).start()

    def kill(self, processor_id: bytes, reason: str) -> None:
        if processor_id in self._alive:
            self._alive.discard(processor_id)
            link = self._links.pop(processor_id, None)
            if link is not None:
                link.close()
            assert self._loop is not None and self._listener is not None
            self._loop.call_soon(self._listener.on_processor_exit, processor_id, f"thread dropped: {reason}")

    def flush(self) -> None:
        pass  # send() starts each task's thread at once

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        return 0.0, 0

    def close(self) -> None:
        if self._storage is not None:
            self._storage.close()
        self._sockets.close()

    def _connection(self) -> ObjectStorageConnection:
        if self._storage is None:
            self._storage = ObjectStorageConnection(self._storage_address, role="processor", sockets=self._sockets)
        return self._storage

    def _run(self, processor_id: bytes, task: m.Task) -> None:
        result = TaskExecutor(self._connection, lambda log: None).run(task)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._answer, processor_id, result)

    def _answer(self, processor_id: bytes, result: m.TaskResult) -> None:
        """On the loop: the result on the processor's link."""
        link = self._links.get(processor_id)
        if link is not None and processor_id in self._alive:
            link.send([result])

    def _report(self, processor_id: bytes, message: m.Message) -> None:
        assert self._loop is not None and self._listener is not None
        self._loop.call_soon_threadsafe(self._listener.on_processor_messages, processor_id, [message])


if __name__ == "__main__":
    address, slots = sys.argv[1], int(sys.argv[2])
    config = WorkerConfig(scheduler_address=address, worker_type="THR", heartbeat_interval_seconds=0.5)
    security = find_keys("worker", address, config).security  # the scheduler's keys, as a worker finds them
    sys.exit(run_agent(config, new_worker_id("THR"), ThreadExecutor(security), slots=slots, security=security))
