"""ScalerFuture: a `concurrent.futures.Future` whose value is deserialized when first asked for.

The client's I/O thread completes a future with the raw TaskResult; `result()` and `exception()` turn it into a value
or an exception in the thread that asks (large results are fetched from object storage then, not on the I/O thread,
unless a reading thread read it first: client/eager_reads.py). Futures work with `concurrent.futures.wait`,
`as_completed`, done callbacks and `await` (through `asyncio.wrap_future`).
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from typing_extensions import TypeVar

from scaler.client.display import future_state, html_table
from scaler.client.story import TaskStory, merge_story
from scaler.errors import ObjectStorageException
from scaler.payload.processor_context import BlockingWait
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID, short_task_id

if TYPE_CHECKING:
    from scaler.payload.result_reader import ResultReader

_UNSET = object()


class ReadingWait(Protocol):
    """How a waiting thread reads the client's connection itself (`ClientAgent.wait_reading`): the answer then wakes
    it directly, not through the client's I/O thread."""

    def wait_reading(self, done: Callable[[], bool], timeout_seconds: float | None) -> None: ...
    def wake_reader(self, future: Any) -> None: ...


class _TaskFailed(Exception):
    """What a failed task's future is completed with, so that `concurrent.futures.wait(FIRST_EXCEPTION)` wakes; never
    seen by users: result() and exception() give the task's own error, read from its result."""


#: What the task's function returns; a bare ScalerFuture is a ScalerFuture[Any].
T = TypeVar("T", default=Any)
#: The state of a cancelled future whose waiters were not told yet.
_CANCELLED = concurrent.futures._base.CANCELLED
#: The states of a done future (`concurrent.futures.Future.done`).
_DONE_STATES = frozenset(
    (
        concurrent.futures._base.CANCELLED,
        concurrent.futures._base.CANCELLED_AND_NOTIFIED,
        concurrent.futures._base.FINISHED,
    )
)

#: How long cancel() waits for the scheduler's confirmation when no timeout is given.
DEFAULT_CANCEL_TIMEOUT_SECONDS = 30.0


#: Held while a future's condition is made (`ScalerFuture._condition`), so that two threads get the same one.
_MAKING_CONDITIONS = threading.Lock()


class _Seldom:
    """A future's parts that most pending futures never need, made together when the first is (`ScalerFuture._parts`):
    one attribute of the future's dict for all three. An attribute set outside `__init__` stops, on Python 3.10, every
    later future sharing its dict's keys, and `__slots__` on the future stops its dict being inline on Python 3.13:
    either costs about 80 to 230 bytes a pending future (test_future_memory)."""

    __slots__ = ("cancel_answered", "on_taken", "value_lock")

    def __init__(self) -> None:
        self.cancel_answered: threading.Event | None = None  #: made by cancel(), the rare case
        #: held while the value is read (`ScalerFuture._value_lock`); `_thread.RLock` is the class `threading.RLock()`
        #: makes, which the API reference can name (`threading.RLock` is a function)
        self.value_lock: _thread.RLock | None = None
        self.on_taken: Callable[[], None] | None = None  #: set on a future read early, until its value is taken


class ScalerFuture(concurrent.futures.Future[T]):
    #: True for a job's task (`jobs.JobFuture`): the client's leaving does not cancel it
    outlives_client: ClassVar[bool] = False

    def __init__(
        self,
        task_id: TaskID,
        reader: ResultReader | None,
        request_cancel: Callable[[TaskID], None] | None,
        profiling: bool = False,
        request_story: Callable[[TaskID, float], m.TaskStoryReply | None] | None = None,
        client_name: str = "",
        reading: ReadingWait | None = None,
    ) -> None:
        # what concurrent.futures.Future.__init__ sets, but for its condition (`_condition`, made when first used)
        self._state = concurrent.futures._base.PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._made_condition: threading.Condition | None = None
        self._made_waiters: list[Any] | None = None  #: `_waiters`, made when first used
        self._made_callbacks: list[Callable[[concurrent.futures.Future[T]], object]] | None = None
        #: for the task's story: when it was made (submitted) and answered, wall clock; who asks the scheduler
        self._submitted_at = time.time()
        self._answered_at = 0.0
        self._request_story = request_story
        self._client_name = client_name
        self._task_id = task_id
        self._reader = reader
        self._request_cancel = request_cancel
        self._profiling = profiling
        self._raw: m.TaskResult | None = None
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._seldom: _Seldom | None = None  #: made when first used (`_parts`)
        self._reading = reading
        self._wakes_reader = False  #: its completion wakes a thread that reads the connection (once registered)

    @property
    def _condition(self) -> threading.Condition:
        """The future's lock and condition, as concurrent.futures.Future has it, made when first used (a wait, a
        completion): a condition is a lock, a deque and five bound methods, 1.2 KB, most of a pending future's
        cost, and a client holding a million pending futures need not pay for a million of them."""
        condition = self._made_condition
        if condition is None:
            with _MAKING_CONDITIONS:
                condition = self._made_condition
                if condition is None:
                    condition = self._made_condition = threading.Condition()
        return condition

    @_condition.setter
    def _condition(self, condition: threading.Condition) -> None:
        self._made_condition = condition

    @property
    def _value_lock(self) -> _thread.RLock:
        """Held while the value is read (`_materialize`, `read_before_taken`): one read at a time, a second reader
        then finds the first one's value. Not the future's condition: `concurrent.futures.wait`, `as_completed`, done
        callbacks and the client's I/O thread completing futures take that one, and a read lasts as long as its
        transfer, or as long as the result's write when the result was announced while written: under the condition,
        a `wait` on a future read early would wait for the read, and an `as_completed` would hold the conditions of
        the futures it took before it meanwhile, so the I/O thread completing those would wait too."""
        parts = self._parts
        lock = parts.value_lock
        if lock is None:
            with _MAKING_CONDITIONS:
                lock = parts.value_lock
                if lock is None:
                    lock = parts.value_lock = threading.RLock()
        return lock

    @property
    def _parts(self) -> _Seldom:
        parts = self._seldom
        if parts is None:
            with _MAKING_CONDITIONS:
                parts = self._seldom
                if parts is None:
                    parts = self._seldom = _Seldom()
        return parts

    @property
    def _waiters(self) -> list[Any]:
        """concurrent.futures.Future's waiters (`wait`, `as_completed`), made when first used (an empty list is 56
        bytes of every pending future)."""
        waiters = self._made_waiters
        if waiters is None:
            with _MAKING_CONDITIONS:
                waiters = self._made_waiters
                if waiters is None:
                    waiters = self._made_waiters = []
        return waiters

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._made_waiters = waiters

    @property
    def _done_callbacks(self) -> list[Callable[[concurrent.futures.Future[T]], object]]:
        """concurrent.futures.Future's done callbacks, made when first used."""
        callbacks = self._made_callbacks
        if callbacks is None:
            with _MAKING_CONDITIONS:
                callbacks = self._made_callbacks
                if callbacks is None:
                    callbacks = self._made_callbacks = []
        return callbacks

    @_done_callbacks.setter
    def _done_callbacks(self, callbacks: list[Callable[[concurrent.futures.Future[T]], object]]) -> None:
        self._made_callbacks = callbacks

    @property
    def task_id(self) -> TaskID:
        return self._task_id

    def reads_with(self, reader: ResultReader) -> bool:
        """Whether its value is read by `reader` (a client's own results; a job's are another owner's)."""
        return self._reader is reader

    def done(self) -> bool:
        """As `concurrent.futures.Future.done`, without taking the future's lock: one read of its state (asked several
        times per answer by a thread that reads the connection while it waits)."""
        return self._state in _DONE_STATES

    def __repr__(self) -> str:
        return f"<ScalerFuture task={short_task_id(self._task_id)} state={self._display_state()}>"

    def _repr_html_(self) -> str:
        return html_table("ScalerFuture", [("task", self._task_id.hex()), ("state", self._display_state())])

    def _display_state(self) -> str:
        """What a repr shows. A successful task's value not read yet is not read for it (a repr in a notebook or a
        log line would fetch a large result, and mark a result read early as taken): it shows as finished."""
        done, cancelled = self.done(), self.cancelled()
        failed = None
        if done and not cancelled:
            raw = self._raw
            unread = raw is not None and raw.status is m.ResultStatus.SUCCESS and self._value is _UNSET
            if not unread or self._error is not None:
                failed = self.exception(timeout=0)
        return future_state(done, cancelled, self.running(), failed)

    # ------------------------------------------------------------ completion: what the client's I/O thread (and its
    # session) does to a future, as `set_result` is what an executor does to a concurrent.futures.Future

    def _answered(self) -> None:
        if not self._answered_at:
            self._answered_at = time.time()
        parts = self._seldom
        if parts is not None and parts.cancel_answered is not None:
            parts.cancel_answered.set()

    def set_task_result(self, result: m.TaskResult) -> None:
        """The task's answer; its value (or error) is read from it when first asked for."""
        if self.done():
            return
        self._raw = result
        self._answered()
        try:
            if result.status is m.ResultStatus.SUCCESS:
                self.set_result(cast(T, None))  # the value is read from _raw, not from here
            else:  # wakes wait(FIRST_EXCEPTION); result() and exception() read the task's own error from _raw
                self.set_exception(_TaskFailed())
        except concurrent.futures.InvalidStateError:
            pass

    def add_stream_item(self, item: m.StreamItem) -> int | None:
        """A value of a streaming task (`streams.TaskStream`); a task that is not a stream has none: ignored."""
        return None

    def set_value(self, value: Any) -> None:
        """A value known at once (a graph's data key)."""
        if self.done():
            return
        self._value = value
        self._answered()
        try:
            self.set_result(value)
        except concurrent.futures.InvalidStateError:
            pass

    def set_failed(self, error: BaseException) -> None:
        """The task will not be answered (its connection or its argument's put failed)."""
        if self.done():
            return
        self._error = error
        self._answered()
        try:
            self.set_exception(error)  # wakes wait(FIRST_EXCEPTION)
        except concurrent.futures.InvalidStateError:
            pass

    def set_cancel_confirmed(self) -> None:
        """The scheduler confirmed the task's cancel."""
        self._cancel_and_notify()
        self._answered()

    def _cancel_and_notify(self) -> bool:
        """Cancel, and wake `concurrent.futures.wait`/`as_completed` callers: `Future.cancel` alone does not
        (executors notify them later through `set_running_or_notify_cancel`), so a wait on a cancelled
        future would sleep until its timeout."""
        if not concurrent.futures.Future.cancel(self):
            return False
        with self._condition:  # a reentrant lock, also taken by set_running_or_notify_cancel
            if self._state == _CANCELLED:
                self.set_running_or_notify_cancel()
        return True

    def abandon(self) -> None:
        """Ask the scheduler to cancel the task, without waiting, and wake whoever waits on this future now (what the
        processor does to the futures of a parked parent that is being stopped)."""
        if self.done():
            return
        if self._request_cancel is not None:
            self._request_cancel(self._task_id)
        self._cancel_and_notify()

    # ------------------------------------------------------------ user API

    def story(self, timeout: float = 10.0) -> TaskStory:
        """The task's history across the client, the scheduler, its worker and processor: each step with its time,
        where it happened and what caused it (waits and why, retries and why, balancing moves, a restart). A task
        the scheduler forgot (`--story-retention-tasks`/`-seconds`) says so in `note`, with `known` False."""
        mine = [m.StoryEntry(self._submitted_at, "client", self._client_name, "submitted", "the user's call")]
        if self._answered_at:
            state = "cancelled" if self.cancelled() else "answered"
            mine.append(m.StoryEntry(self._answered_at, "client", self._client_name, state, "the scheduler's answer"))
        reply = self._request_story(self._task_id, timeout) if self._request_story is not None else None
        if reply is None and self._request_story is None:
            return TaskStory(self._task_id.hex(), tuple(mine), False, "this future has no client to ask")
        return merge_story(self._task_id.hex(), reply, mine, timeout)

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        self._materialize()
        self._taken()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        self._materialize()
        self._taken()
        return self._error

    def cancel(self, timeout: float | None = None) -> bool:
        """Ask the scheduler to cancel the task (a graph member cancels its whole graph); waits for
        its answer up to `timeout` seconds. True if the task was cancelled, False if it finished first."""
        if self.done():
            return self.cancelled()
        if self._request_cancel is None:
            return self._cancel_and_notify()
        parts = self._parts
        with self._condition:
            if parts.cancel_answered is None:
                parts.cancel_answered = threading.Event()
            answered = parts.cancel_answered
        self._request_cancel(self._task_id)
        if not self.done():
            answered.wait(DEFAULT_CANCEL_TIMEOUT_SECONDS if timeout is None else timeout)
        return self.cancelled()

    def profiling_info(self) -> Any:
        from scaler.client.profile import ProfileResult

        if not self.done():
            raise ValueError("the task has not finished yet: call result() first, then profiling_info()")
        self.result()
        raw = self._raw
        if raw is None or not self._profiling:
            raise ValueError("no profiling information: submit with profiling=True or use Client(profiling=True)")
        return ProfileResult.from_profile(raw.profile)

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self).__await__()

    # ------------------------------------------------------------ internals

    def _wait(self, timeout: float | None) -> None:
        """Wait until done, reading the connection on this thread meanwhile when it can (`ReadingWait`); raises
        TimeoutError or CancelledError as `Future.result` does. Future.exception, not Future.result: it waits and
        raises the same way, but returns the stand-in a failure was completed with instead of raising it; the task's
        error comes from _raw."""
        if self.done():
            concurrent.futures.Future.exception(self, timeout)  # raises CancelledError when cancelled
            return
        with BlockingWait():
            reading = self._reading
            if reading is not None:
                started = time.monotonic()
                if not self._wakes_reader:  # completed on another thread, it wakes the reading thread
                    self._wakes_reader = True
                    self.add_done_callback(reading.wake_reader)
                reading.wait_reading(self.done, timeout)
                if timeout is not None:
                    timeout = max(0.0, timeout - (time.monotonic() - started))
            concurrent.futures.Future.exception(self, timeout)

    def read_before_taken(self, taken: Callable[[], None]) -> bool:
        """Read a successful task's stored value now, before the user asks (client/eager_reads.py): True when it was
        read here, and then `taken()` is called once the user takes it (`result()`, `exception()`); False when it was
        read or taken before. A read that fails raises and leaves nothing behind: whatever went wrong (the storage
        restarted mid-read, a value that does not deserialize), the user's own call reads again and says it."""
        raw = self._raw
        if self._value is not _UNSET or self._error is not None or raw is None:
            return False
        with self._value_lock:
            if self._value is not _UNSET or self._error is not None or raw.status is not m.ResultStatus.SUCCESS:
                return False
            assert self._reader is not None
            self._parts.on_taken = taken  # before the value shows: a user who sees it takes it
            try:
                self._value = self._reader.read(raw)
            except BaseException:
                self._pop_taken()
                raise
            return True

    def _taken(self) -> None:
        taken = self._pop_taken()  # set only on a future read early: none on most
        if taken is not None:
            taken()

    def _pop_taken(self) -> Callable[[], None] | None:
        parts = self._seldom
        if parts is None or parts.on_taken is None:
            return None
        with _MAKING_CONDITIONS:  # one of two threads taking it at once calls it
            taken, parts.on_taken = parts.on_taken, None
        return taken

    def _materialize(self) -> None:
        """Turn the task's answer into its value or its error, once: both are remembered. A task that failed carries its
        error in its answer (nothing is read from storage), so every result() and exception() call gives the same
        error at once, whatever it is (an ObjectStorageException the task raised included). Only a successful task's
        value that could not be read from storage (ObjectStorageException: storage silent for the client's timeout,
        unreachable) is not the task's outcome: it is raised and not remembered, and the next call reads again."""
        if self._value is not _UNSET or self._error is not None or self._raw is None:
            return
        with self._value_lock:
            if self._value is not _UNSET or self._error is not None:
                return
            assert self._reader is not None
            raw = self._raw
            try:
                self._value = self._reader.read(raw)
            except ObjectStorageException as error:
                if raw.status is m.ResultStatus.SUCCESS:
                    raise
                self._error = error
            except BaseException as error:
                self._error = error
