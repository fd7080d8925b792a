"""The proxy worker's executor: every task runs as a job of a remote system (AWS Batch, IBM Symphony).

A proxy is an ordinary worker agent (`run_agent`) whose `Executor` is this one, with as many slots as jobs may
be in flight: each slot is a processor with its own link to the scheduler (opened in the proxy's process,
worker/executors/hosted_link.py), where its task comes and its result leaves; the scheduler dispatches to it with the
normal credits, cancels and time-outs kill its processors, its heartbeats go on while remote calls are slow. Each
processor holds at most one job. What differs between remote systems is behind `OffloadBackend` (`backend.py`),
three blocking verbs (submit, poll, cancel) and close, called from this executor's threads, never from the agent's
event loop.

A task's way through here: packed with the objects it needs (`payload.remote_bundle.pack_task`, object storage reads
in a thread), collected for `batch_window_seconds` with the other tasks that arrive (a backend may send a
batch as one array job), submitted, polled until the backend reports its outcome, unpacked: objects the task
stored go to object storage, its output and its TaskResult on its processor's link, exactly as a processor reports
them. A job that ended without an outcome is the processor's death (`ProcessorDiedError` naming the job and
why), a lost host is HOST_LOST (the scheduler runs the task again within its retry budget), a refused
submission fails the task with the remote system's message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scaler.errors import MissingObjects, ObjectStorageException
from scaler.io.clock import REAL_CLOCK, Clock, Timer
from scaler.payload.remote_bundle import BundleError, open_outcome, pack_task
from scaler.protocol import messages as m
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.executors.hosted_link import HostedLink
from scaler.worker_manager.offload.backend import JobOutcome, OffloadBackend, OffloadError, RemoteJob

logger = logging.getLogger(__name__)

#: Threads per proxy for the backend's blocking calls and object storage transfers.
THREADS = 4
_T = TypeVar("_T")


class BlockingCalls(Protocol):
    """Where the backend's blocking calls and object storage transfers run (a ThreadPoolExecutor; in a simulation,
    an executor that calls at once, so that simulated time alone decides what happens when)."""

    def submit(self, fn: Callable[..., _T], /, *args: Any) -> concurrent.futures.Future[_T]: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


@dataclass(slots=True)
class _Job:
    key: str
    processor_id: bytes
    task: m.Task
    submitted: bool = False


class OffloadExecutor:
    """An `Executor` (worker/executors/contract.py) whose processors are jobs of `backend`."""

    max_staged_tasks = 0  #: a processor is one job: one task

    def __init__(
        self,
        backend: OffloadBackend,
        storage_factory: Callable[[str], Any],
        key_prefix: str,
        clock: Clock = REAL_CLOCK,
        threads: BlockingCalls | None = None,
    ) -> None:
        """`storage_factory(address)`: a blocking object storage connection (ObjectStorageConnection);
        `key_prefix`: names this proxy's jobs (its worker id, so a job says whose it is); `clock`: the batch window
        and the poll interval; `threads`: where blocking calls run (default: THREADS threads)."""
        self._backend = backend
        self._storage_factory = storage_factory
        self._key_prefix = key_prefix
        self._numbers = itertools.count(1)
        self._storage_address = ""
        self._storage: Any = None
        self._jobs: dict[str, _Job] = {}  #: by key: packed, submitted or in flight
        self._by_processor: dict[bytes, _Job] = {}
        self._links: dict[bytes, HostedLink] = {}  #: each processor's link to the scheduler, once configured
        self._batch: list[_Job] = []
        self._flush_timer: Timer | None = None
        self._clock = clock
        self._threads: BlockingCalls = threads or concurrent.futures.ThreadPoolExecutor(
            THREADS, thread_name_prefix="offload"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: ExecutorListener | None = None
        self._routines: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ the Executor contract

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop, self._listener = loop, listener
        self._run(self._poll_routine())

    def spawn(self, processor_id: bytes) -> None:
        assert self._loop is not None and self._listener is not None, "start() the executor first"
        ready: list[m.Message] = [m.ProcessorReady(0)]  # not a local process: ready at once
        self._loop.call_soon(self._listener.on_processor_messages, processor_id, ready)

    def send(self, processor_id: bytes, message: m.Message) -> None:
        """The agent configures a processor (HelloReply): it says hello on its link, where its task comes."""
        if isinstance(message, m.HelloReply) and self._listener is not None:
            self._storage_address = self._storage_address or message.object_storage_address
            link = self._links.get(processor_id)
            if link is None:
                link = self._links[processor_id] = self._listener.open_link(
                    processor_id, lambda work: self._from_link(processor_id, work)
                )
            link.configure()

    def kill(self, processor_id: bytes, reason: str) -> None:
        assert self._loop is not None and self._listener is not None
        self._drop_job(processor_id, reason)
        self._close_link(processor_id)
        self._loop.call_soon(self._listener.on_processor_exit, processor_id, f"stopped: {reason}")

    def _from_link(self, processor_id: bytes, work: list[m.Message]) -> None:
        """What came on a processor's link: its task, or a cancel of it (its remote job is cancelled)."""
        for message in work:
            if isinstance(message, m.Task) and not message.actor_id:
                self._queue(processor_id, message)
            elif isinstance(message, m.TaskCancel):
                job = self._by_processor.get(processor_id)
                if job is not None and job.task.task_id in message.task_ids:
                    self._drop_job(processor_id, "its task was cancelled")
                    self._report(processor_id, [m.TaskCancelConfirm(job.task.task_id, m.CancelOutcome.CANCELED)])

    def _drop_job(self, processor_id: bytes, reason: str) -> None:
        job = self._by_processor.pop(processor_id, None)
        if job is not None:
            self._jobs.pop(job.key, None)
            if job in self._batch:
                self._batch.remove(job)
            if job.submitted:
                self._run(self._call(self._backend.cancel, job.key, reason))

    def _report(self, processor_id: bytes, messages: list[m.Message]) -> None:
        link = self._links.get(processor_id)
        if link is not None:
            link.send(messages)

    def _close_link(self, processor_id: bytes) -> None:
        link = self._links.pop(processor_id, None)
        if link is not None:
            link.close()

    def flush(self) -> None:
        pass  # send() queues jobs for the submit routine itself

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        return 0.0, 0

    def close(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        for routine in list(self._routines):
            routine.cancel()
        try:
            self._backend.close()  # cancels whatever is still in flight
        except Exception:
            logger.exception("closing the %s backend failed", self._backend.name)
        self._jobs.clear()
        self._by_processor.clear()
        for processor_id in list(self._links):
            self._close_link(processor_id)
        if self._storage is not None:
            self._storage.close()
        self._threads.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ submitting

    def _queue(self, processor_id: bytes, task: m.Task) -> None:
        assert self._loop is not None
        job = _Job(f"{self._key_prefix}-{next(self._numbers)}", processor_id, task)
        self._jobs[job.key] = job
        self._by_processor[processor_id] = job
        self._batch.append(job)
        if self._flush_timer is None:
            self._flush_timer = self._clock.call_later(self._backend.batch_window_seconds, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        batch, self._batch = self._batch, []
        if batch:
            self._run(self._submit(batch))

    async def _submit(self, batch: list[_Job]) -> None:
        remote_jobs = []
        for job in batch:
            try:
                bundle = await self._call(lambda task=job.task: pack_task(task, self._object_storage()))
            except MissingObjects as error:
                self._fail(job, m.ResultStatus.MISSING_OBJECT, f"the task's inputs are not in object storage: {error}")
                continue
            except ObjectStorageException as error:
                self._fail(job, m.ResultStatus.ERROR, f"the task's inputs could not be read: {error}")
                continue
            if job.key in self._jobs:  # not killed meanwhile
                remote_jobs.append(RemoteJob(job.key, bundle))
        if not remote_jobs:
            return
        try:
            await self._call(self._backend.submit, remote_jobs)
        except Exception as error:  # OffloadError, or a backend bug: the tasks fail, the proxy goes on
            text = str(error) if isinstance(error, OffloadError) else repr(error)
            logger.error("%s refused %d job(s): %s", self._backend.name, len(remote_jobs), text)
            for remote in remote_jobs:
                job_or_none = self._jobs.get(remote.key)
                if job_or_none is not None:
                    self._fail(job_or_none, m.ResultStatus.ERROR, f"{self._backend.name} refused the job: {text}")
            return
        for remote in remote_jobs:
            job_or_none = self._jobs.get(remote.key)
            if job_or_none is None:  # killed while being submitted
                self._run(self._call(self._backend.cancel, remote.key, "its task was cancelled"))
            else:
                job_or_none.submitted = True

    # ------------------------------------------------------------ outcomes

    async def _poll_routine(self) -> None:
        while True:
            await self._clock.sleep(self._backend.poll_interval_seconds)
            if not any(job.submitted for job in self._jobs.values()):
                continue
            try:
                outcomes = await self._call(self._backend.poll)
            except Exception as error:  # a failed poll is retried at the next interval
                logger.warning("polling %s failed (retrying): %s", self._backend.name, error)
                continue
            for outcome in outcomes:
                await self._deliver(outcome)

    async def _deliver(self, outcome: JobOutcome) -> None:
        job = self._jobs.get(outcome.key)
        if job is None:
            return  # killed: its exit was reported already
        if outcome.outcome is None:
            self._forget(job)
            assert self._listener is not None
            if outcome.host_lost:
                result = m.TaskResult(job.task.task_id, m.ResultStatus.HOST_LOST, error_message=outcome.failure)
                self._report(job.processor_id, [result])
            else:
                self._close_link(job.processor_id)
                self._listener.on_processor_exit(job.processor_id, outcome.failure)
            return
        try:
            result, objects, logs = open_outcome(outcome.outcome)
            if objects:
                await self._call(self._store, objects)
        except (BundleError, ObjectStorageException) as error:
            self._fail(job, m.ResultStatus.ERROR, f"the result of {self._backend.name} job {job.key} was lost: {error}")
            return
        if self._jobs.get(job.key) is not job:
            return  # killed while its objects were being stored
        self._forget(job)
        self._report(job.processor_id, [*logs, result])

    def _store(self, objects: dict[bytes, tuple[tuple[bytes, ...], bytes, str]]) -> None:
        storage = self._object_storage()
        for object_id, (payload, owner, name) in objects.items():
            storage.put(object_id, payload, owner_id=owner, name=name)

    def _fail(self, job: _Job, status: m.ResultStatus, text: str) -> None:
        if self._jobs.get(job.key) is not job:
            return
        self._forget(job)
        self._report(job.processor_id, [m.TaskResult(job.task.task_id, status, error_message=text)])

    def _forget(self, job: _Job) -> None:
        self._jobs.pop(job.key, None)
        if self._by_processor.get(job.processor_id) is job:
            del self._by_processor[job.processor_id]

    # ------------------------------------------------------------ plumbing

    def _object_storage(self) -> Any:
        """The blocking object storage connection (made on first use, in a worker thread)."""
        if self._storage is None:
            if not self._storage_address:
                raise ObjectStorageException("the scheduler advertised no object storage address")
            self._storage = self._storage_factory(self._storage_address)
        return self._storage

    async def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.wrap_future(self._threads.submit(function, *args))

    def _run(self, routine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(routine)
        self._routines.add(task)
        task.add_done_callback(self._routine_done)

    def _routine_done(self, task: asyncio.Task[None]) -> None:
        self._routines.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("offload routine failed", exc_info=task.exception())
