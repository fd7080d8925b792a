"""client/eager_reads.py: stored results read as their tasks are answered, within a budget of values not taken."""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from scaler.client.eager_reads import EagerReads
from scaler.client.future import ScalerFuture
from scaler.errors import MissingObjects
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

pytestmark = pytest.mark.timeout(30)


class Stored:
    """A future whose value is read when asked (as ScalerFuture.read_before_taken does)."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.read = threading.Event()
        self.taken: Callable[[], None] | None = None

    def read_before_taken(self, taken: Callable[[], None]) -> bool:
        if self.fails:
            raise OSError("storage went away")
        self.taken = taken
        self.read.set()
        return True

    def take(self) -> None:
        assert self.taken is not None
        self.taken()


def on_reader_thread(function: Callable[[], Any]) -> Any:
    return function()


def settle(eager: EagerReads, held: int) -> None:
    deadline = time.monotonic() + 10
    while eager.held_bytes != held:
        assert time.monotonic() < deadline, f"held {eager.held_bytes} bytes, not {held}"
        time.sleep(0.01)


def test_results_are_read_as_answered_until_the_budget_is_full_and_the_next_when_one_is_taken() -> None:
    eager = EagerReads(on_reader_thread, lambda: False, budget_bytes=100)
    futures = [Stored() for _ in range(3)]
    eager.done([(future, 40) for future in futures])
    assert futures[0].read.wait(5) and futures[1].read.wait(5)
    settle(eager, 80)
    assert not futures[2].read.wait(0.3), "a result past the budget was read before another was taken"
    futures[0].take()
    assert futures[2].read.wait(5)
    settle(eager, 80)
    futures[0].take()  # a second take releases nothing more
    settle(eager, 80)
    eager.close()


def test_a_result_larger_than_the_budget_waits_to_be_taken() -> None:
    eager = EagerReads(on_reader_thread, lambda: False, budget_bytes=100)
    large, small = Stored(), Stored()
    eager.done([(large, 101), (small, 10)])
    assert small.read.wait(5)
    assert not large.read.is_set()
    eager.close()


def test_a_dropped_future_gives_its_bytes_back() -> None:
    eager = EagerReads(on_reader_thread, lambda: False, budget_bytes=100)
    dropped, waiting = Stored(), Stored()
    eager.done([(dropped, 90), (waiting, 20)])
    assert dropped.read.wait(5)
    del dropped
    gc.collect()
    assert waiting.read.wait(5)
    eager.close()


def test_a_read_that_fails_gives_its_bytes_back_and_is_left_to_the_user() -> None:
    eager = EagerReads(on_reader_thread, lambda: False, budget_bytes=100)
    failing, after = Stored(fails=True), Stored()
    eager.done([(failing, 90), (after, 20)])
    assert after.read.wait(5)
    settle(eager, 20)
    eager.close()


def test_on_the_storages_host_nothing_is_read_early() -> None:
    eager = EagerReads(on_reader_thread, lambda: True, budget_bytes=100)
    first, second = Stored(), Stored()
    eager.done([(first, 10)])
    settle(eager, 0)
    eager.done([(second, 10)])
    assert not first.read.is_set() and not second.read.is_set()
    eager.close()


def test_a_closed_reader_reads_nothing_more() -> None:
    eager = EagerReads(on_reader_thread, lambda: False, budget_bytes=100)
    eager.close()
    future = Stored()
    eager.done([(future, 10)])
    assert not future.read.wait(0.2)


class FlakyReader:
    """A result reader whose first read fails as a storage restarting under it does (the object not there yet)."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self, result: m.TaskResult) -> bytes:
        self.reads += 1
        if self.reads == 1:
            raise MissingObjects(f"object {result.payload.hex()} was not stored: its writer stopped mid-write")
        return b"the value"


def test_an_early_read_that_fails_leaves_the_future_to_the_users_own_read() -> None:
    reader = FlakyReader()
    future: ScalerFuture[bytes] = ScalerFuture(TaskID(b"t" * 16), reader, None)  # type: ignore[arg-type]
    future.set_task_result(m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 16))
    with pytest.raises(MissingObjects):
        future.read_before_taken(lambda: None)
    assert future.result(timeout=1) == b"the value"
    assert reader.reads == 2


def test_an_early_read_is_what_result_returns_and_taking_it_releases_its_bytes() -> None:
    reader = FlakyReader()
    reader.reads = 1  # reads well from the start
    future: ScalerFuture[bytes] = ScalerFuture(TaskID(b"u" * 16), reader, None)  # type: ignore[arg-type]
    future.set_task_result(m.TaskResult(TaskID(b"u" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 16))
    taken: list[bool] = []
    assert future.read_before_taken(lambda: taken.append(True))
    assert not future.read_before_taken(lambda: taken.append(False)), "a value read once is not read again"
    assert future.result(timeout=1) == b"the value" and future.result(timeout=1) == b"the value"
    assert taken == [True] and reader.reads == 2


class HeldReader:
    """A result reader whose read lasts until `release` is set (at most READ_BOUND_SECONDS): a result announced while
    its write is held, read early."""

    READ_BOUND_SECONDS = 15.0

    def __init__(self) -> None:
        self.reads = 0
        self.reading = threading.Event()
        self.release = threading.Event()
        self.read_ended = threading.Event()

    def read(self, result: m.TaskResult) -> bytes:
        self.reads += 1
        self.reading.set()
        self.release.wait(self.READ_BOUND_SECONDS)
        self.read_ended.set()
        return b"the value"


def test_waiting_on_a_future_does_not_wait_for_its_early_read() -> None:
    """`concurrent.futures.wait`, `as_completed` and a done callback of a future whose value is being read early
    answer during the read (they take the future's condition, which the read does not hold), and the user's result()
    then waits for that read and takes its value. Fails with the read under the future's condition
    (ScalerFuture._value_lock returning `self._condition`): wait() returns only once the read ended."""
    reader = HeldReader()
    future: ScalerFuture[bytes] = ScalerFuture(TaskID(b"v" * 16), reader, None)  # type: ignore[arg-type]
    future.set_task_result(m.TaskResult(TaskID(b"v" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 16))
    taken = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        early = threads.submit(future.read_before_taken, taken.set)
        try:
            assert reader.reading.wait(10)
            done, _ = concurrent.futures.wait([future])
            called: list[object] = []
            future.add_done_callback(called.append)
            completed = list(concurrent.futures.as_completed([future]))
            assert not reader.read_ended.is_set(), "waiting on the future waited for its early read"
            assert done == {future} and called == [future] and completed == [future]
            taking = threads.submit(future.result)
        finally:
            reader.release.set()
        assert early.result(30) and taking.result(30) == b"the value"
    assert taken.is_set() and reader.reads == 1, "the user's result() read the value again"
