"""client/eager_reads.py: stored results read as their tasks are answered, within a budget of values not taken."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from scaler.client.eager_reads import EagerReads

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
