"""A pending ScalerFuture makes its condition (a lock, a deque, five bound methods: 1.2 KB) and its lists of waiters and
callbacks only when first waited on or completed (issue 58: a million pending futures in at most 1 KB each, with the
client's other costs)."""

from __future__ import annotations

import concurrent.futures
import threading
import tracemalloc

from scaler.client.future import ScalerFuture
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID


class Reader:
    """What a future asks for its value (the client's result reader)."""

    def read(self, result: m.TaskResult) -> int:
        return 7


def future(number: int) -> ScalerFuture:
    return ScalerFuture(TaskID(number.to_bytes(16, "big")), Reader(), None)  # type: ignore[arg-type]


def pending_future_size() -> float:
    """Bytes a pending future costs, measured over 2,000 of them."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        futures = [future(number) for number in range(2000)]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(stat.size_diff for stat in after.compare_to(before, "lineno")) / len(futures)


def test_a_pending_future_costs_no_condition() -> None:
    """Fails with the condition made in __init__ (concurrent.futures.Future's): about 1,800 bytes a future (330 now)."""
    size = pending_future_size()
    assert size < 500, f"{size:.0f} bytes a pending future"


def test_futures_read_early_or_cancelled_leave_later_ones_as_small() -> None:
    """Fails with the parts few futures need set as attributes outside `__init__` (Python 3.10: later futures stop
    sharing their dict's keys, 576 bytes) or as `__slots__` of the future (Python 3.13: its dict is no longer inline,
    563 bytes), whichever Python runs it."""
    early = future(10)
    early.set_task_result(m.TaskResult(early.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.NONE))
    taken: list[bool] = []
    assert early.read_before_taken(lambda: taken.append(True))
    assert early.result(timeout=5) == 7 and taken == [True]
    cancelled = future(11)
    assert cancelled.cancel()
    size = pending_future_size()
    assert size < 500, f"{size:.0f} bytes a pending future"


def test_a_waiter_and_the_completing_thread_share_the_condition_made_late() -> None:
    waiting = future(1)
    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(waiting.result(timeout=30)))
    waiter.start()
    completed = concurrent.futures.wait([future(2)], timeout=0)  # a wait makes a condition on other futures too
    assert not completed.done
    waiting.set_task_result(m.TaskResult(waiting.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.NONE))
    waiter.join(30)
    assert results == [7] and waiting.done()
    assert list(concurrent.futures.as_completed([waiting], timeout=5)) == [waiting]


def test_threads_that_make_the_condition_at_once_get_one() -> None:
    shared = future(3)
    made: list[threading.Condition] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        made.append(shared._condition)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(made) == 8 and all(condition is made[0] for condition in made)
