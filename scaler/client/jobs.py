"""Jobs at the client: `Client.map_job` submits a named job, `Client.job` attaches to one (docs/guide/sharing.md).

A job's tasks outlive the client that submitted them; the scheduler keeps their results (scheduler/core/jobs.py)
and sends them to every client that follows the job. Submitting: the tasks are encoded, `JobOpen` reserves the
name (a name taken is refused before any task leaves), the tasks go, and a `JobAttach` look-up answered by the
scheduler proves that it holds every one of them (one connection keeps the order), so the submitter may exit as
soon as `map_job` returns. Attaching: a look-up gives the job's task ids, futures are made for them, then
`JobAttach(follow=True)` has the scheduler send the results kept so far and those to come.
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scaler.client.future import ScalerFuture
from scaler.payload.result_reader import ResultReader
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID, new_task_id

if TYPE_CHECKING:
    from scaler.client.client import Client

R = TypeVar("R")

#: The longest job name accepted (it travels in every JobOpen, JobAttach and JobReply).
MAX_NAME_LENGTH = 200


class JobFuture(ScalerFuture[R]):
    """A future of a job's task: leaving the client does not cancel it (`Client.disconnect` skips it)."""


class Job(Generic[R]):
    """A named job: its progress, its results in order or as they complete, and its cancel."""

    def __init__(self, name: str, futures: list[JobFuture[R]], cancel: Callable[[list[TaskID]], None]) -> None:
        self.name = name
        self.futures = futures
        self._cancel = cancel

    def __repr__(self) -> str:
        return f"<Job {self.name!r} {self.done}/{self.total} done>"

    @property
    def total(self) -> int:
        return len(self.futures)

    @property
    def done(self) -> int:
        return sum(1 for future in self.futures if future.done())

    def progress(self) -> tuple[int, int]:
        """(done, total)."""
        return self.done, self.total

    def __iter__(self) -> Iterator[R]:
        """The results in submission order, each as soon as it and those before it are in (a failed task raises)."""
        return (future.result() for future in self.futures)

    def results(self, timeout: float | None = None) -> list[R]:
        concurrent.futures.wait(self.futures, timeout=timeout)
        return [future.result(timeout=0) for future in self.futures]

    def as_completed(self, timeout: float | None = None) -> Iterator[R]:
        """The results as they complete."""
        return (future.result() for future in concurrent.futures.as_completed(self.futures, timeout=timeout))

    def result(self, timeout: float | None = None) -> R:
        """The result of a job of one task (`submit_job`)."""
        if self.total != 1:
            raise ValueError(f"job {self.name!r} has {self.total} tasks; use results(), iteration or as_completed()")
        return self.futures[0].result(timeout=timeout)

    def cancel(self) -> None:
        """Cancel the job's tasks not done yet (on the scheduler: whichever client submitted them)."""
        self._cancel([future.task_id for future in self.futures if not future.done()])


def checked_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"a job name must be a non-empty string of at most {MAX_NAME_LENGTH} characters, not {name!r}")
    return name


def refused(name: str, reply: m.JobReply) -> None:
    if not reply.accepted:
        raise ValueError(f"job {name!r}: {reply.reason}")


def submit_map_job(
    client: Client, fn: Callable[..., R], iterable: Iterable[Any], name: str, priority: int | None
) -> Job[R]:
    """fn(item) for each item, as the named job (see the module's docstring)."""
    client._check_open()
    checked_name(name)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((item,), {}) for item in iterable]
    if not calls:
        raise ValueError(f"job {name!r} has no items: map_job needs at least one")
    return submit_calls(client, fn, calls, name, priority)


def submit_calls(
    client: Client,
    fn: Callable[..., R],
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
    name: str,
    priority: int | None,
) -> Job[R]:
    """fn(*args, **kwargs) for each call, as the named job (see the module's docstring)."""
    client._check_open()
    checked_name(name)
    wire = client._priority(priority)
    encoder = client._encoder
    entry = encoder.function(fn)
    entry.check_call(*calls[0])
    reader = ResultReader(client._serializer, client._storage, keep_objects=True)
    batch: list[tuple[TaskID, ScalerFuture, bytes]] = []
    for args, kwargs in calls:
        task_id = new_task_id()
        task = encoder.task(
            task_id, entry, encoder.arguments(args, kwargs), profiling=client._profiling,
            stream_output=client._stream_output, priority=wire, capabilities=(),
        )  # fmt: skip
        batch.append((task_id, JobFuture(task_id, reader, client._request_cancel), codec.encode(task)))
    agent, timeout = client._agent, client._timeout_seconds
    refused(name, agent.ask_job(m.JobOpen(name, tuple(task_id for task_id, _, _ in batch)), timeout))
    client._object_storage.hand_over(batch)
    client._object_storage.flush()
    refused(name, agent.ask_job(m.JobAttach(name), timeout))  # answered: the scheduler holds every task
    return Job(name, [future for _, future, _ in batch], client._agent.cancel)  # type: ignore[misc]


def attach_job(client: Client, name: str) -> Job[Any]:
    """Follow the named job from this client (see the module's docstring)."""
    client._check_open()
    checked_name(name)
    agent, timeout = client._agent, client._timeout_seconds
    reply = agent.ask_job(m.JobAttach(name), timeout)
    refused(name, reply)
    owners_objects = functools.partial(client._object_storage.of_owner, reply.owner_id)
    reader = ResultReader(client._serializer, owners_objects, keep_objects=True)
    own = agent.unfinished()  # this client's own job, still running: its futures are the ones completed
    futures: list[JobFuture[Any]] = [
        known
        if isinstance(known := own.get(task_id), JobFuture)
        else JobFuture(task_id, reader, client._request_cancel)
        for task_id in reply.task_ids
    ]
    agent.follow([(future.task_id, future) for future in futures])
    refused(name, agent.ask_job(m.JobAttach(name, follow=True), timeout))
    return Job(name, futures, agent.cancel)
