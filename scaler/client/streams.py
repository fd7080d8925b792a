"""Streaming tasks on the client's side (`Client.stream`): the values a task's generator yields, in order, as they come.

A `TaskStream` is the future of a streaming task (done when the stream ends; its result is how many values there
were) and the iterator of its values. The client's I/O thread hands it each StreamItem as it arrives
(`add_stream_item`); the reader takes them in index order (`__next__`, or `AsyncStream` for asyncio code), and
each value read raises the task's credit: the task may run `window` values ahead of its reader and no further
(back-pressure: a slow reader holds the generator on its worker, not a growing queue here). Credit goes out in
steps of half the window, so a fast reader costs one StreamCredit per half window, not one per value.

The TaskResult that ends the stream says how many values there were (`TaskResult.streamed`): the iteration stops
after that many, or, when the task failed, raises its exception (with its traceback) at that point, after the
values yielded before it. A stream whose task ran again (its worker died: the scheduler retried it) yields its
values again from the first; those already here are skipped by index, and the new run is given the credit the
reader had (so a generator should yield the same values when run again, as with Ray's streaming generators).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic

from typing_extensions import TypeVar

from scaler.client.future import ScalerFuture
from scaler.payload.processor_context import BlockingWait
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

#: Values a streaming task may run ahead of its reader, unless the caller says otherwise.
DEFAULT_WINDOW = 16
#: How long a reader waits for a value the task's end says was sent, before it gives up on it.
MISSING_VALUE_SECONDS = 30.0

V = TypeVar("V", default=Any)

STREAM_END = object()  #: what `TaskStream.next_item` gives after the last value


class StreamValueLostError(ConnectionError):
    """A value the stream's end says was sent never arrived (its message was lost with a scheduler)."""


class TaskStream(ScalerFuture[int], Generic[V]):
    """The values of a streaming task as they come (`for value in stream`), and the task's future: its result
    (`ScalerFuture.result`) is how many values the task yielded, and cancelling it (`ScalerFuture.cancel`) stops its
    generator on the worker (GeneratorExit at its `yield`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arrived: dict[int, m.StreamItem] = {}  #: values here and not read yet, by index
        self._read = 0  #: values read: the index of the next one
        self._window = DEFAULT_WINDOW
        self._granted = DEFAULT_WINDOW  #: the credit the task has: values of index below it
        self._grant: Callable[[TaskID, int], None] | None = None
        self._ready_callbacks: list[Callable[[], None]] = []  #: asyncio readers waiting for the next value or the end

    def open(self, window: int, grant: Callable[[TaskID, int], None]) -> None:
        """Before the task is submitted: it may run `window` values ahead (its Task.stream_credit); `grant(task id,
        up to)` sends the task more credit."""
        self._window = self._granted = window
        self._grant = grant

    @property
    def window(self) -> int:
        return self._window

    def __repr__(self) -> str:
        return f"<TaskStream task={self.task_id.hex()[:8]} read={self._read} state={self._display_state()}>"

    # ------------------------------------------------------------ what the client's I/O thread does

    def add_stream_item(self, item: m.StreamItem) -> int | None:
        """A value arrived. Returns the credit to send the task again when the value is the first of a run that
        starts over (the scheduler ran the task again after its worker died: the new run has its own credit only)."""
        with self._condition:
            if item.index < self._read or item.index in self._arrived:
                return self._granted if item.index == 0 and self._granted > self._window else None
            self._arrived[item.index] = item
            ready = item.index == self._read
            self._condition.notify_all()
        if ready:
            self._wake_readers()
        return None

    def set_task_result(self, result: m.TaskResult) -> None:
        super().set_task_result(result)
        self._wake_readers()

    def set_failed(self, error: BaseException) -> None:
        super().set_failed(error)
        self._wake_readers()

    def set_cancel_confirmed(self) -> None:
        super().set_cancel_confirmed()
        self._wake_readers()

    # ------------------------------------------------------------ reading

    def __iter__(self) -> Iterator[V]:
        return self

    def __next__(self) -> V:
        item = self.next_item()
        if item is STREAM_END:
            raise StopIteration
        return self.value_of(item)

    def next_item(self, timeout: float | None = None) -> Any:
        """The next value's StreamItem once it is here (waiting up to `timeout`: TimeoutError), or `STREAM_END` after
        the last one; raises the task's exception where its values stopped, CancelledError for a cancelled stream."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            item = self._take_locked()
            if item is None:
                with BlockingWait():  # inside a task: a parent waiting on its child's values yields its slot
                    while item is None:
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise concurrent.futures.TimeoutError(f"no value of the stream came within {timeout} s")
                        self._wait_locked(remaining)
                        item = self._take_locked()
        self._credit_after_read()
        return item

    def is_ready(self) -> bool:
        """Whether `next_item` would answer at once (a value, the end or an error): for asyncio readers."""
        with self._condition:
            return self._read in self._arrived or self.done()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on the client's I/O thread, or here) once `is_ready` holds."""
        with self._condition:
            if not (self._read in self._arrived or self.done()):
                self._ready_callbacks.append(callback)
                return
        callback()

    def value_of(self, item: m.StreamItem) -> V:
        """A StreamItem's value (fetched from object storage when it travelled there)."""
        assert self._reader is not None
        value: V = self._reader.stream_value(item)
        return value

    # ------------------------------------------------------------ internals

    def _take_locked(self) -> Any:
        """The next value's item, `STREAM_END`, or None while there is neither; raises how the stream ended badly."""
        if self.cancelled():  # its values still here are not read
            raise concurrent.futures.CancelledError()
        item = self._arrived.pop(self._read, None)
        if item is not None:
            self._read += 1
            return item
        if not self.done():
            return None
        raw = self._raw
        if raw is None:  # failed without an answer: the connection was lost
            error = self.exception(0)
            assert error is not None
            raise error
        if self._read < raw.streamed:
            return None  # the end overtook values still travelling
        if raw.status is m.ResultStatus.SUCCESS:
            return STREAM_END
        raise self._stream_error()

    def _wait_locked(self, remaining: float | None) -> None:
        raw = self._raw
        if raw is not None and self._read < raw.streamed:  # the end is here: the value should be too, soon
            limit = MISSING_VALUE_SECONDS if remaining is None else min(remaining, MISSING_VALUE_SECONDS)
            if not self._condition.wait(limit) and self._read not in self._arrived:
                raise StreamValueLostError(
                    f"value #{self._read} of the stream never arrived, though its task says it yielded "
                    f"{raw.streamed} (it was lost on its way: the scheduler restarted?)"
                )
            return
        self._condition.wait(remaining)

    def _credit_after_read(self) -> None:
        """Raise the task's credit once the reader is half a window past what was granted."""
        up_to = self._read + self._window
        if up_to - self._granted < max(1, self._window // 2) or self.done():
            return
        self._granted = up_to
        if self._grant is not None:
            try:
                self._grant(self.task_id, up_to)
            except Exception:
                pass  # the connection is gone: the stream fails with it

    def _wake_readers(self) -> None:
        with self._condition:
            callbacks, self._ready_callbacks = self._ready_callbacks, []
        for callback in callbacks:
            callback()

    def _materialize(self) -> None:
        """The future's value is how many values the task yielded (its values are read by iterating)."""
        raw = self._raw
        if raw is not None and raw.status is m.ResultStatus.SUCCESS:
            self._value = raw.streamed
            return
        super()._materialize()

    def _stream_error(self) -> BaseException:
        error = self.exception(0)
        assert error is not None
        return error
