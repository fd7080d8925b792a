"""A streaming task in its processor: its function's values go to the client one by one, as they are made.

A task with `Task.stream_credit` set is a stream (Client.stream): its function returns an iterable (a generator,
usually), which is driven here, on the task's thread. Before each value is computed, the client's credit is
checked (`StreamHost.wait_credit`): the task may yield the values of index below the credit, which its client raises
as its reader consumes values (StreamCredit), so a slow reader holds the generator here, in its processor, not a
growing queue anywhere. Each value leaves at once as a StreamItem (inline, or through object storage like a
result). The task's TaskResult ends the stream: a success saying how many values there were, or the exception
raised after the last of them (the client raises it at that point of its iteration). A stopped task (cancelled,
timed out) has TaskAbandoned raised at its credit check, or in its thread while it computes a value; either way
the iterator is closed (a generator sees GeneratorExit at the `yield` it waits at) and the task is answered
CANCELED by the processor's threads.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from scaler.payload.result_writer import NotStreamable, failed_result, stream_item
from scaler.payload.serializer import Serializer
from scaler.payload.storage import StorageAccess
from scaler.protocol import messages as m


class StreamHost(Protocol):
    """What a streaming task needs from its processor (`processor.threads.TaskThreads`)."""

    def wait_credit(self, index: int) -> None:
        """Return once the running task may compute its value `index`; raise TaskAbandoned when it was stopped."""
        ...

    def send(self, message: m.Message) -> None:
        """Send a StreamItem on the processor's link."""
        ...


def run_stream(
    task: m.Task,
    values: Any,
    serializer: Serializer,
    host: StreamHost,
    storage: Callable[[], StorageAccess],
    user_traceback: Callable[[BaseException], str],
) -> m.TaskResult:
    """Drive the iterable the task's function returned (`values`); the TaskResult that ends the stream. Raises
    TaskAbandoned when the task is stopped (the iterator is closed first)."""
    produced = 0
    iterator: Iterator[Any] | None = None
    try:
        try:
            iterator = iter(values)
        except Exception as error:
            problem = TypeError(
                f"a streaming task's function must return an iterable (a generator, usually), not "
                f"{type(values).__qualname__}: {error}"
            )
            return _failed(task, problem, "", produced)
        while True:
            host.wait_credit(produced)  # outside the user's code: a stop raised here closes the generator below
            try:
                value = next(iterator)
            except StopIteration:
                break
            except SystemExit as exit_request:
                replacement = RuntimeError(f"the task called sys.exit({exit_request.code!r})")
                return _failed(task, replacement, "".join(traceback.format_exception(exit_request)), produced)
            except Exception as error:
                return _failed(task, error, user_traceback(error), produced)
            try:
                item = stream_item(task, produced, serializer, value, storage)
            except NotStreamable as problem:
                return _failed(task, problem, "", produced)
            host.send(item)
            produced += 1
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            try:
                close()  # a generator left at a yield (stopped, or failed after) runs its finally blocks now
            except Exception:
                pass  # its own error while closing: the stream's outcome is already decided
    return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, streamed=produced)


def _failed(task: m.Task, error: BaseException, trace: str, produced: int) -> m.TaskResult:
    result = failed_result(task, error, trace)
    return m.TaskResult(
        result.task_id, result.status, result.payload_kind, result.payload, result.error_message, streamed=produced
    )
