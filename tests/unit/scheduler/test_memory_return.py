"""When the scheduler's shell gives memory back: after a big queue drained, not while a small one comes and goes."""

from __future__ import annotations

import itertools

from scaler.scheduler.core.shrink_rule import SHRINK_FACTOR
from scaler.scheduler.server import TRIM_AFTER_TASKS, MemoryReturn


def returns(live_counts: list[int]) -> list[int]:
    """The live task counts after which memory was given back."""
    memory = MemoryReturn()
    return [live for live in live_counts if memory.after(live)]


def test_a_big_queue_gives_memory_back_as_it_drains_and_once_it_is_empty() -> None:
    peak = 64 * TRIM_AFTER_TASKS
    draining = list(range(peak, -1, -peak // 1000))
    given = returns([0, peak // 2, *draining, 0, 0])
    assert given[-1] == 0 and given.count(0) == 1  # once at empty, not again while it stays empty
    middle = given[:-1]
    assert middle and all(live * SHRINK_FACTOR < peak for live in middle)
    assert all(later * SHRINK_FACTOR < earlier for earlier, later in itertools.pairwise(middle))


def test_small_queues_coming_and_going_never_give_memory_back() -> None:
    assert returns([0, TRIM_AFTER_TASKS - 1, 10, 0, TRIM_AFTER_TASKS // 2, 0] * 3) == []


def test_a_queue_that_stays_big_gives_nothing_back_until_it_drains() -> None:
    steady = 4 * TRIM_AFTER_TASKS
    assert returns([steady, steady - 100, steady + 100] * 10) == []
    assert returns([steady] * 3 + [0]) == [0]
