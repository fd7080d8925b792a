"""When the scheduler's shell gives memory back: after a big queue drained, not while a small one comes and goes."""

from __future__ import annotations

import itertools
import random

from scaler.scheduler.core.shrink_rule import SHRINK_FACTOR
from scaler.scheduler.heap import RETURN_AGAIN_AFTER_CALLS, TRIM_AFTER_TASKS, TRIM_TASKS_PER_WORKER, MemoryReturn


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


def test_the_queue_that_gives_memory_back_grows_with_the_workers_connected() -> None:
    """Giving back walks the whole heap, which the connections make big: with 5,000 workers connected a queue of twice
    TRIM_AFTER_TASKS neither trims as it grows nor gives back once drained (a window of 20,000 tasks through 5,000
    workers two deep queued 10,000, and each drain cost a collection and a trim); with 100 workers it does, and so does
    a queue of TRIM_TASKS_PER_WORKER per worker with 5,000. Fails with the workers not counted."""
    workers = 5_000
    queue = [0, TRIM_AFTER_TASKS, 2 * TRIM_AFTER_TASKS, 2 * TRIM_AFTER_TASKS, TRIM_AFTER_TASKS, 0]
    many, few = MemoryReturn(), MemoryReturn()
    assert [many.after(live, workers) for live in queue] == [False] * len(queue) and many.intake_trims == 0
    assert [few.after(live, 100) for live in queue][-1] and few.intake_trims > 0
    big = TRIM_TASKS_PER_WORKER * workers
    assert [many.after(live, workers) for live in [big // 2, big, big, 0]][-1] and many.intake_trims > 0


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


def test_a_growing_queue_trims_the_heap_as_it_grows_and_once_its_intake_pauses() -> None:
    """What the submissions' frames freed goes back while the queue is held (not only after it drained); a small
    queue, or a big one that stays as it is, is not trimmed again. Fails with the intake's trim off."""
    memory = MemoryReturn()
    trims: list[int] = []
    memory._trim = trims.append
    growing = [TRIM_AFTER_TASKS * n // 4 for n in range(1, 19)]  # a quarter of TRIM_AFTER_TASKS each interval
    for live in [0, *growing, growing[-1], growing[-1], growing[-1] - 5, growing[-1] + 5]:
        memory.after(live)
    assert memory.intake_trims == len(trims) == 5  # at 1, 2, 3 and 4 times TRIM_AFTER_TASKS, then at 4.5 paused
    assert trims == [0] * 5
    small = MemoryReturn()
    small._trim = trims.append
    for live in [0, TRIM_AFTER_TASKS - 1, TRIM_AFTER_TASKS - 1, 0] * 3:
        small.after(live)
    assert small.intake_trims == 0


def test_a_queue_flowing_at_a_steady_level_is_not_trimmed_at_each_of_its_ups_and_downs() -> None:
    """A client keeping 20,000 tasks unanswered: the live count moves by a few thousand between status intervals. Each
    trim walks the whole heap (70 ms with 10,000 workers connected), so only the growth to the level trims, and the
    highs a few times; a drain by a trim's worth and a growth again trims again. Fails with the level brought down at
    each dip (every up after a down was a trim: about a third of the calls)."""
    memory = MemoryReturn()
    trims: list[int] = []
    memory._trim = trims.append
    level, wobble = 2 * TRIM_AFTER_TASKS, TRIM_AFTER_TASKS // 5
    flow = [level + random.Random(seed).randint(-wobble, wobble) for seed in range(300)]
    for live in [0, TRIM_AFTER_TASKS, *flow]:
        memory.after(live)
    assert memory.intake_trims <= 6
    before = memory.intake_trims
    for live in [level - TRIM_AFTER_TASKS, level - TRIM_AFTER_TASKS, level + TRIM_AFTER_TASKS // 10, level]:
        memory.after(live)
    assert memory.intake_trims == before + 1  # shrunk by a trim's worth, then grown by a tenth and paused
