"""A streamed map (`scaler.client.map_stream`): lazy reading, a bound on chunks in flight, results in order, and a
failure that stops the map, cancels what is in flight and names the item."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pytest

from scaler.client.map_stream import chunks_in_flight, stream_map

pytestmark = pytest.mark.timeout(30)


class ReadFuture(concurrent.futures.Future[Any]):
    """Counts the futures whose result the map has read: submitted minus read is what is in flight."""

    reads = 0

    def result(self, timeout: float | None = None) -> Any:
        ReadFuture.reads += 1
        return super().result(timeout)


class FakeCluster:
    """Runs each submitted chunk at once (`double` of every argument), or fails on the item `fail_on`."""

    def __init__(self, fail_on: int | None = None) -> None:
        ReadFuture.reads = 0
        self.fail_on = fail_on
        self.submitted: list[list[tuple[Any, ...]]] = []
        self.most_in_flight = 0
        self.cancelled: list[concurrent.futures.Future[Any]] = []
        self.first_flags: list[bool] = []

    def submit(self, chunks: list[list[tuple[Any, ...]]], first: bool) -> list[Any]:
        self.first_flags.append(first)
        futures = []
        for chunk in chunks:
            self.submitted.append(chunk)
            futures.append(ReadFuture())
        self.most_in_flight = max(self.most_in_flight, len(self.submitted) - ReadFuture.reads)
        for chunk, made in zip(chunks, futures, strict=True):
            values = [args[0] for args in chunk]
            if self.fail_on is not None and self.fail_on in values:
                error = ValueError("bad item")
                error.scaler_map_chunk_index = values.index(self.fail_on)  # type: ignore[attr-defined]
                made.set_exception(error)
            else:
                made.set_result([2 * value for value in values])
        return futures

    def cancel(self, future: Any) -> None:
        self.cancelled.append(future)


def counting(items: int, reads: list[int]) -> Iterator[tuple[int]]:
    for item in range(items):
        reads[0] += 1
        yield (item,)


def test_results_come_back_in_order_with_a_bound_on_chunks_in_flight() -> None:
    cluster, reads = FakeCluster(), [0]
    results = stream_map(counting(10_000, reads), 100, 8, cluster.submit, cluster.cancel)
    assert results == [2 * item for item in range(10_000)]
    assert len(cluster.submitted) == 100 and cluster.most_in_flight == 8
    assert cluster.first_flags[0] is True and not any(cluster.first_flags[1:]), "the function travels fresh once"


def test_the_arguments_are_read_as_chunks_go_out_not_all_at_once() -> None:
    cluster, reads = FakeCluster(fail_on=250), [0]
    with pytest.raises(ValueError, match="bad item") as raised:
        stream_map(counting(1_000_000, reads), 100, 4, cluster.submit, cluster.cancel)
    assert reads[0] <= 100 * 8, "the map read far ahead of its window"
    assert getattr(raised.value, "__notes__", None) == ["scaler: map item 250 failed; its arguments: (250,)"]


def test_a_failure_cancels_what_is_in_flight_and_submits_no_more() -> None:
    cluster = FakeCluster(fail_on=0)
    with pytest.raises(ValueError):
        stream_map(counting(5_000, [0]), 100, 6, cluster.submit, cluster.cancel)
    assert len(cluster.submitted) == 6, "nothing after the failure"
    assert cluster.cancelled == [], "the fake answers every chunk at once: nothing was left to cancel"


def test_a_chunk_that_failed_as_a_whole_names_its_items_and_the_window_grows_with_workers() -> None:
    failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
    failed.set_exception(TimeoutError("the task timed out"))
    waiting: concurrent.futures.Future[Any] = concurrent.futures.Future()
    futures = iter([failed, waiting])
    cancelled: list[Any] = []

    def submit(chunks: list[list[tuple[Any, ...]]], first: bool) -> list[Any]:
        return [next(futures) for _ in chunks]

    with pytest.raises(TimeoutError) as raised:
        stream_map(counting(20, [0]), 10, 2, submit, cancelled.append)
    assert getattr(raised.value, "__notes__", None) == ["scaler: map items 0 to 9 (one task) failed"]
    assert cancelled == [waiting], "the chunk still in flight is cancelled"
    assert chunks_in_flight(2) == 128 and chunks_in_flight(100) == 1600
