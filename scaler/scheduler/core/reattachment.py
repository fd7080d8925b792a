"""Work that outlives a scheduler restart, as the new instance learns of it (pure: data in, answers out).

The scheduler keeps nothing on disk. After a restart at the same address, clients submit their unfinished tasks
again and workers register again, their processors saying which tasks they still hold. This table joins the two,
so a task that was running during the restart is neither run twice nor lost:

- `worker_holds`: a processor's hello names tasks it holds that this instance does not know: remembered, for
  `keep_seconds`, as held by its worker;
- `result_for_held`: a held task's result arrives before its client submitted it again: remembered;
- `take`: the client submits the task again: it gets the remembered result at once, or is adopted by the
  worker that runs it (no second run), or (neither) goes to the queue as usual;
- `park`: a task submitted again by a client that re-attaches early (its hello names the instance it knew)
  waits up to `window_seconds` after this instance started, so that the workers have re-registered first.

Everything is forgotten after `keep_seconds`: a worker's tasks whose client never comes back just run out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.protocol.messages import Task, TaskResult
from scaler.scheduler.core.shrink_rule import ShrinkRule, rebuild

#: How long after its start a new instance holds back tasks that re-attaching clients submit again.
WINDOW_SECONDS = 5.0
#: How long held tasks and their early results wait for their client to submit them again.
KEEP_SECONDS = 120.0
#: At most this many held tasks (or early results) are remembered; beyond it the oldest are forgotten.
MAX_REMEMBERED = 200_000


@dataclass(frozen=True, slots=True)
class Adoption:
    """What a task submitted again finds: its result already, or the worker that still runs it."""

    worker: PeerID
    result: TaskResult | None


class Reattachment:
    def __init__(self, window_seconds: float = WINDOW_SECONDS, keep_seconds: float = KEEP_SECONDS) -> None:
        self.window_seconds = window_seconds
        self.keep_seconds = keep_seconds
        self.started_at: float | None = None  #: the time of the first event this instance handled
        self._held: dict[TaskID, tuple[PeerID, float]] = {}
        self._results: dict[TaskID, tuple[PeerID, TaskResult, float]] = {}
        self._parked: list[tuple[ClientID, Task]] = []
        #: the two tables are rebuilt once they hold far fewer entries than at their peak (`shrink_rule`)
        self._shrink = (ShrinkRule(), ShrinkRule())
        self.adopted = 0  #: tasks submitted again that did not run again (for the monitor and tests)

    def saw(self, now: float) -> None:
        if self.started_at is None:
            self.started_at = now

    # ------------------------------------------------------------ workers

    def worker_holds(self, worker: PeerID, task_ids: tuple[TaskID, ...], now: float) -> None:
        for task_id in task_ids:
            self._held[task_id] = (worker, now)
        _trim(self._held)
        _shrink_if_due(self._held, self._shrink[0])

    def result_for_held(self, worker: PeerID, result: TaskResult, now: float) -> bool:
        """Remember a result for a task this worker said it holds; False: not one of those (stale or forged)."""
        held = self._held.get(result.task_id)
        if held is None or held[0] != worker:
            return False
        del self._held[result.task_id]
        self._results[result.task_id] = (worker, result, now)
        _trim(self._results)
        _shrink_if_due(self._results, self._shrink[1])
        return True

    def forget_held(self, task_ids: Iterable[TaskID]) -> None:
        """These tasks are held no more (the processor that held them died): submitted again, they run again."""
        for task_id in task_ids:
            self._held.pop(task_id, None)

    def worker_gone(self, worker: PeerID) -> None:
        for task_id in [task_id for task_id, (holder, _) in self._held.items() if holder == worker]:
            del self._held[task_id]

    # ------------------------------------------------------------ clients

    def take(self, task_id: TaskID) -> Adoption | None:
        remembered = self._results.pop(task_id, None)
        if remembered is not None:
            self.adopted += 1
            return Adoption(remembered[0], remembered[1])
        held = self._held.pop(task_id, None)
        if held is not None:
            self.adopted += 1
            return Adoption(held[0], None)
        return None

    def should_park(self, returning: bool, now: float) -> bool:
        """A task from a client that re-attaches waits while the workers may still be re-registering."""
        return returning and self.started_at is not None and now < self.started_at + self.window_seconds

    def park(self, client: ClientID, task: Task) -> None:
        self._parked.append((client, task))

    def release(self, now: float) -> list[tuple[ClientID, Task]]:
        """Parked tasks whose wait is over (all at once, in their order), and forget what is too old."""
        tables: tuple[dict[TaskID, Any], ...] = (self._held, self._results)
        for table, shrink in zip(tables, self._shrink, strict=True):
            for task_id in [task_id for task_id, entry in table.items() if now - entry[-1] > self.keep_seconds]:
                del table[task_id]
            _shrink_if_due(table, shrink)
        if not self._parked or self.should_park(True, now):
            return []
        released, self._parked = self._parked, []
        return released

    def forget_client(self, client: ClientID) -> None:
        self._parked = [(owner, task) for owner, task in self._parked if owner != client]

    @property
    def parked(self) -> int:
        return len(self._parked)


def _shrink_if_due(table: dict[TaskID, Any], shrink: ShrinkRule) -> None:
    """After `table` grew or lost entries: rebuilt if far below its peak (called after each growth, so that the
    rule knows the peak)."""
    if shrink.due(len(table)):
        rebuild(table)


def _trim(table: dict[TaskID, Any]) -> None:
    while len(table) > MAX_REMEMBERED:
        del table[next(iter(table))]
