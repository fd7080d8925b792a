"""When the scheduler's shell freezes the objects it holds (`heap.FreezeRule`): once it has held no task for a few
status intervals, again every ten minutes while that lasts, never while a task is held; and that a freeze keeps them out
of the collector's walks while what is freed by reference counting still goes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scaler.scheduler.heap import (
    FREEZE_AFTER_IDLE_CALLS,
    REFREEZE_IDLE_CALLS,
    TRIM_AFTER_TASKS,
    FreezeRule,
    Heap,
    refreeze,
)


def freezes(live_counts: list[int]) -> list[int]:
    """The calls (from 1) after which the heap was frozen."""
    rule = FreezeRule()
    return [call for call, live in enumerate(live_counts, 1) if rule.after(live)]


def test_frozen_after_a_few_idle_intervals_then_every_refreeze_interval() -> None:
    idle = [0] * (FREEZE_AFTER_IDLE_CALLS + 2 * REFREEZE_IDLE_CALLS)
    first = FREEZE_AFTER_IDLE_CALLS
    assert freezes(idle) == [first, first + REFREEZE_IDLE_CALLS, first + 2 * REFREEZE_IDLE_CALLS]


def test_never_frozen_while_a_task_is_held_and_a_task_starts_the_idle_count_again() -> None:
    busy = [1] * (3 * REFREEZE_IDLE_CALLS)
    assert freezes(busy) == []
    almost = [0] * (FREEZE_AFTER_IDLE_CALLS - 1)
    assert freezes([*almost, 5, *almost, 5, *almost]) == []
    assert freezes([*almost, 5, 0, *almost]) == [len(almost) + 1 + FREEZE_AFTER_IDLE_CALLS]


def test_the_heap_freezes_when_the_rule_says_so() -> None:
    done: list[int] = []
    heap = Heap(freeze=lambda: done.append(1))
    for _ in range(FREEZE_AFTER_IDLE_CALLS):
        heap.after(0, 0)
    assert done == [1]
    heap.after(3, 0)  # tasks held by workers are tasks held: nothing frozen while there are any
    for _ in range(FREEZE_AFTER_IDLE_CALLS - 1):
        heap.after(0, 0)
    assert done == [1]


def test_only_a_queue_no_worker_holds_gives_memory_back_as_it_drains() -> None:
    """Tasks the workers hold are bounded by their room and come and go with it: 10,000 workers holding a client's
    20,000 tasks are no big queue, and their windows are not each followed by a collection and a trim of a heap that
    10,000 peers' connections made big. Fails when the heap counts every live task as the queue."""
    held = Heap(freeze=None)
    for live, unplaced in [(2 * TRIM_AFTER_TASKS, 1_000), (TRIM_AFTER_TASKS, 0), (0, 0)]:
        held.after(live, unplaced)
    assert (held.memory.returns, held.memory.intake_trims) == (0, 0)
    queued = Heap(freeze=None)
    for live, unplaced in [(2 * TRIM_AFTER_TASKS, 2 * TRIM_AFTER_TASKS - 100), (TRIM_AFTER_TASKS, 0), (0, 0)]:
        queued.after(live, unplaced)
    assert queued.memory.returns == 1 and queued.memory.intake_trims == 1


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_a_freeze_keeps_objects_out_of_collections_until_the_next_one(unfrozen: None) -> None:
    """A cycle made before a freeze and dropped after it is not collected by a full collection (the collector does not
    walk it: the mechanism), and is by the next freeze; an object without a cycle is freed at once either way."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    cycle = weakref.ref(first)
    plain = Node()
    freed = weakref.ref(plain)
    refreeze()
    assert gc.get_freeze_count() > 0
    del first, second, plain
    assert freed() is None  # reference counting frees what is frozen too
    gc.collect()
    assert cycle() is not None  # frozen: no collection walks it
    refreeze()
    assert cycle() is None
