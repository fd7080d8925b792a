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
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scaler.client.future import ScalerFuture
from scaler.client.session import TaskOptions
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

if TYPE_CHECKING:
    from scaler.client.session import Session

R = TypeVar("R")

#: The longest job name accepted (it travels in every JobOpen, JobAttach and JobReply).
MAX_NAME_LENGTH = 200


class JobFuture(ScalerFuture[R]):
    """A future of a job's task: leaving the client does not cancel it (`Client.disconnect` skips it)."""

    outlives_client = True


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
    session: Session, fn: Callable[..., R], iterable: Iterable[Any], name: str, priority: int | None
) -> Job[R]:
    """fn(item) for each item, as the named job (see the module's docstring)."""
    session.check_open()
    checked_name(name)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((item,), {}) for item in iterable]
    if not calls:
        raise ValueError(f"job {name!r} has no items: map_job needs at least one")
    return submit_calls(session, fn, calls, name, priority)


def submit_calls(
    session: Session,
    fn: Callable[..., R],
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
    name: str,
    priority: int | None,
) -> Job[R]:
    """fn(*args, **kwargs) for each call, as the named job (see the module's docstring)."""
    session.check_open()
    checked_name(name)
    options = TaskOptions.of(priority)
    session.function(fn).check_call(*calls[0])
    reader = session.result_reader(keep_objects=True)
    batch = session.prepare(fn, calls, options, future_type=JobFuture, reader=reader, outlives_task=True)
    refused(name, session.ask_job(m.JobOpen(name, tuple(task_id for task_id, _, _ in batch))))
    session.send(batch)  # type: ignore[arg-type]
    refused(name, session.ask_job(m.JobAttach(name)))  # answered: the scheduler holds every task
    return Job(name, [future for _, future, _ in batch], session.cancel)


def attach_job(session: Session, name: str) -> Job[Any]:
    """Follow the named job from this client (see the module's docstring)."""
    session.check_open()
    checked_name(name)
    reply = session.ask_job(m.JobAttach(name))
    refused(name, reply)
    reader = session.result_reader(reply.owner_id, keep_objects=True)
    own = session.unfinished()  # this client's own job, still running: its futures are the ones completed
    futures: list[JobFuture[Any]] = [
        known if isinstance(known := own.get(task_id), JobFuture) else JobFuture(task_id, reader, session.cancel_one)
        for task_id in reply.task_ids
    ]
    session.follow(futures)  # type: ignore[arg-type]
    refused(name, session.ask_job(m.JobAttach(name, follow=True)))
    return Job(name, futures, session.cancel)
