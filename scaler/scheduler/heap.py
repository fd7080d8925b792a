"""What the scheduler's process does with its heap between messages, once a status interval (a second).

- `MemoryReturn`: memory given back once a big queue has drained (a collection and glibc's `malloc_trim`).
- `FreezeRule`: the objects the scheduler holds while it holds no task (its peers' sessions, the modules, the
  tables) are kept out of the collector's walks (`gc.freeze`). A full collection comes once the objects that
  survived two younger ones outnumber a quarter of those that survived the last full one; under load they are the
  tasks in flight, and each such collection walks every object of the process: one comes every 20,000 tasks or so
  (170 ms with 10,000 workers connected; 8-14 µs a task at 5,000). Frozen,
  the sessions are walked only when they are frozen again: after FREEZE_AFTER_IDLE_CALLS intervals holding no task,
  and every REFREEZE_IDLE_CALLS while that lasts (a full collection, then the freeze: about 30 ms at 1,000 workers
  and 130 ms at 10,000, once every ten minutes while idle). What is frozen is still freed when nothing refers to it
  (reference counts); only a cycle among frozen objects (a session of a peer that left meanwhile) waits for the next
  freeze to be collected: at most ten minutes. Once a minute, that full collection would be 0.05% of a core at 1,000
  idle workers and 0.2% at 10,000, for a heap that has barely changed: idle,
  what comes are heartbeats, whose statuses replace the last ones.

`FreezeRule` is pure (`after` takes the live tasks and says whether to freeze); `MemoryReturn` decides and gives
memory back itself; `Heap` calls both once a status interval and carries out the freeze.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from scaler.scheduler.core.shrink_rule import SHRINK_FACTOR

#: A queue must have held this many tasks before its draining gives memory back.
TRIM_AFTER_TASKS = 10_000
#: ... and this many per worker connected: giving back walks the whole heap, which grows with the connections (a
#: collection and a trim took 80-108 ms with 5,000 workers connected, against 6 MB that a queue of 10,000 tasks
#: held; a window of 20,000 tasks through 5,000 workers two deep queues 10,000 each time, and would give back each
#: time, 1.5-2 us a task). What a smaller queue freed is reused by the next one.
TRIM_TASKS_PER_WORKER = 10


def trim_after(workers: int) -> int:
    """The tasks a queue must have held (or grown by) before memory is given back, with `workers` connected."""
    return max(TRIM_AFTER_TASKS, TRIM_TASKS_PER_WORKER * workers)


#: Calls of `MemoryReturn.after` (one per status interval: seconds) from the return at empty to the one more that
#: follows while the queue stays empty.
RETURN_AGAIN_AFTER_CALLS = 5


class MemoryReturn:
    """Gives memory back once a big queue has drained (to zero, or to fewer than 1/SHRINK_FACTOR of the tasks it
    held at the last return, the rule the core's tables are rebuilt by). Two steps, both needed:

    - a full garbage collection, which also empties CPython's free lists (up to 2,000 spare tuples of each
      small size, 100 floats, 80 dicts, ...): each spare object keeps the 1 MiB arena it sits in alive, and
      after a big queue they sit in arenas the tasks filled (a 200,000-task drain kept 40 MB that way);
    - `malloc_trim`: CPython returns freed hash tables and large objects to glibc, which keeps the pages
      (Linux/glibc only; elsewhere only the collection runs); on glibc's malloc (`allocator.py`) every object too.

    Once empty, memory is given back once more RETURN_AGAIN_AFTER_CALLS seconds later if the queue stayed empty: what
    was freed meanwhile (the session and buffers of the client that leaves once its answers are in, the last
    messages ZeroMQ held) goes too.

    A queue is the tasks no worker holds (queued, or waiting for the nodes they depend on). Those the workers hold
    are bounded by the cluster's room and come and go with it, while a trim walks the whole heap, which grows with the
    peers connected: 10,000 workers holding a client's 20,000 tasks, counted in, had each such window trimmed twice
    (a collection and two trims, about 7 us a task) to give back the room that the next window takes again.

    The size that counts is TRIM_AFTER_TASKS, or TRIM_TASKS_PER_WORKER per worker connected when more (`trim_after`).
    And while a queue grows, for each TRIM_AFTER_TASKS tasks more since the last trim, and once its growth pauses
    (a tenth of that more, and none since the last call): `malloc_trim` alone. The frames of the submissions (ZeroMQ's
    messages, their copies) come and go through glibc's heap among what stays, and the pages they freed stayed the
    process's: about 170 bytes per queued task, a fifth of what the queue holds. The level a growth is counted from
    comes down only once the queue shrank by TRIM_AFTER_TASKS (or below it): a queue that flows at a steady level
    (a client keeping 20,000 tasks unanswered) is not trimmed at each of its ups and downs, a trim of the whole heap
    (70 ms with 10,000 workers connected: 7 us a task) each.
    """

    def __init__(self) -> None:
        self._level = 0  #: the most live tasks since the last return
        self._big = False  #: a queue of TRIM_AFTER_TASKS or more was seen since the queue was last empty
        self.returns = 0
        self._again = 0  #: calls to go before the return at empty is made once more (0: none due)
        self._trimmed_at = 0  #: the live tasks at the last trim (or fewer since)
        self._previous = 0  #: the live tasks at the last call
        self.intake_trims = 0
        self._trim: Callable[[int], int] | None = None
        try:
            import ctypes

            self._trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            self._trim = None

    def after(self, queued_tasks: int, workers: int = 0) -> bool:
        """Called every status interval with the number of tasks no worker holds (queued, or waiting for the nodes
        they depend on); True when memory was given back after a drain (a trim while a queue grows is counted in
        `intake_trims`); `workers`: the workers connected (`trim_after`)."""
        size = trim_after(workers)
        previous, self._previous = self._previous, queued_tasks
        grown = queued_tasks - self._trimmed_at
        paused = grown >= size // 10 and queued_tasks <= previous and queued_tasks >= size
        if grown >= size or paused:
            self._trimmed_at = queued_tasks
            self.intake_trims += 1
            if self._trim is not None:
                self._trim(0)
        elif queued_tasks <= self._trimmed_at - size or queued_tasks < size:
            self._trimmed_at = min(self._trimmed_at, queued_tasks)  # shrunk by a trim's worth: a new growth trims again
        self._level = max(self._level, queued_tasks)
        self._big = self._big or self._level >= size
        again = False
        if queued_tasks == 0:
            due, self._big = self._big, False
            if self._again:
                self._again -= 1
                again = not self._again
            if due:
                self._again = RETURN_AGAIN_AFTER_CALLS
        else:
            self._again = 0
            due = self._level >= size and queued_tasks * SHRINK_FACTOR < self._level
        if not due and not again:
            return False
        self._level = queued_tasks
        self.returns += 1
        gc.collect()
        if self._trim is not None:
            self._trim(0)
        return True


#: Status intervals in a row holding no task before the objects held are frozen (the last answers' clean-up done).
FREEZE_AFTER_IDLE_CALLS = 5
#: Status intervals between two freezes while the scheduler holds no task (peers came or went meanwhile): ten minutes.
REFREEZE_IDLE_CALLS = 600


class FreezeRule:
    """When the objects the scheduler holds are frozen again: at the FREEZE_AFTER_IDLE_CALLS-th status interval in a
    row holding no task, then every REFREEZE_IDLE_CALLS more while it holds none. Never while a task is held: what
    is frozen then is what lasts (a queue's tasks would be walked by no collection until the next freeze)."""

    def __init__(self) -> None:
        self._idle_calls = 0

    def after(self, live_tasks: int) -> bool:
        """Called every status interval with the number of live tasks; True when the heap is to be frozen now."""
        if live_tasks:
            self._idle_calls = 0
            return False
        self._idle_calls += 1
        since_first = self._idle_calls - FREEZE_AFTER_IDLE_CALLS
        return since_first >= 0 and since_first % REFREEZE_IDLE_CALLS == 0


def refreeze() -> None:
    """What was frozen back among the collected, a full collection, and every object left frozen."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class Heap:
    """The shell's keeper of its process's heap: `after` once a status interval."""

    def __init__(self, freeze: Callable[[], None] | None = refreeze) -> None:
        """`freeze` None: nothing frozen (a scheduler in another program's process: a freeze is the whole
        process's)."""
        self.memory = MemoryReturn()
        self.freeze_rule = FreezeRule()
        self._freeze = freeze

    def after(self, live_tasks: int, unplaced_tasks: int, workers: int = 0) -> None:
        """`live_tasks`: every task the scheduler holds; `unplaced_tasks`: those no worker holds (the queue);
        `workers`: the workers connected."""
        self.memory.after(unplaced_tasks, workers)
        if self.freeze_rule.after(live_tasks) and self._freeze is not None:
            self._freeze()
