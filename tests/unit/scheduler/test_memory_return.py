"""When the scheduler's shell gives memory back: after a big queue drained, not while a small one comes and goes."""

from __future__ import annotations

import itertools

from scaler.scheduler.core.shrink_rule import SHRINK_FACTOR
from scaler.scheduler.server import RETURN_AGAIN_AFTER_CALLS, TRIM_AFTER_TASKS, MemoryReturn


def returns(live_counts: list[int]) -> list[int]:
    """The live task counts after which memory was given back."""
    memory = MemoryReturn()
    return [live for live in live_counts if memory.after(live)]


def test_a_big_queue_gives_memory_back_as_it_drains_and_once_it_is_empty() -> None:
    peak = 64 * TRIM_AFTER_TASKS
    draining = list(range(peak, -1, -peak // 1000))
    given = returns([0, peak // 2, *draining, 0, 0])
    assert given[-1] == 0 and given.count(0) == 1  # once at empty (the one more comes later)
    middle = given[:-1]
    assert middle and all(live * SHRINK_FACTOR < peak for live in middle)
    assert all(later * SHRINK_FACTOR < earlier for earlier, later in itertools.pairwise(middle))


def test_small_queues_coming_and_going_never_give_memory_back() -> None:
    assert returns([0, TRIM_AFTER_TASKS - 1, 10, 0, TRIM_AFTER_TASKS // 2, 0] * 3) == []


def test_a_queue_that_stays_big_gives_nothing_back_until_it_drains() -> None:
    steady = 4 * TRIM_AFTER_TASKS
    assert returns([steady, steady - 100, steady + 100] * 10) == []
    assert returns([steady] * 3 + [0]) == [0]


def test_once_empty_memory_is_given_back_once_more_a_few_seconds_later_if_it_stays_empty() -> None:
    """What is freed just after the queue emptied (the leaving client's session and buffers) goes too. Checked with
    the second return switched off (`again` never set): the first case fails."""
    quiet = [0] * (3 * RETURN_AGAIN_AFTER_CALLS)
    memory = MemoryReturn()
    calls = [memory.after(live) for live in [2 * TRIM_AFTER_TASKS, 0, *quiet]]
    assert [index for index, given in enumerate(calls) if given] == [1, 1 + RETURN_AGAIN_AFTER_CALLS]
    memory = MemoryReturn()  # a new queue before the second one: no second one
    calls = [memory.after(live) for live in [2 * TRIM_AFTER_TASKS, 0, 0, 5, *quiet]]
    assert [index for index, given in enumerate(calls) if given] == [1]
