"""Balancing what prefetch left behind: when a worker sits idle while others hold tasks they have not
started, ask those workers to give some back (TaskReturn). Credit-based dispatch keeps the queue in
the scheduler, so this only moves the few prefetched tasks of the last moments of a batch.

The plan is a pure function of the workers' state; the core acts on it once it has been the same
for `trigger_times` consecutive periods, and never asks twice for the same task.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import Capabilities
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.task_table import TaskTable


def balance_plan(
    workers: Iterable[WorkerRecord],
    requirement_of: Callable[[TaskID], Capabilities],
    dispatch_order: Callable[[TaskID], tuple[float, int]],
    already_asked: Callable[[TaskID], bool],
) -> dict[PeerID, tuple[TaskID, ...]]:
    """For each idle worker, one task from the most loaded worker that holds tasks it could run
    (the most recently dispatched first, as those are the least likely to have started)."""
    workers = list(workers)
    if not any(len(worker.assigned) > 1 for worker in workers):  # nothing to give (an idle cluster): no more to do
        return {}
    # a taker has a link with room: a task asked back for a worker none of whose processors said hello yet would only
    # be queued again and dispatched elsewhere (and a cluster under load has no such taker: no plan is made)
    idle = [w for w in workers if w.is_idle and w.free_slots > 0 and w.takes_tasks]
    if not idle:
        return {}
    # the donors in a heap, most spare tasks first (ties: the order they were found), each taker served from its top:
    # a sort of every donor for every idle worker was quadratic (10,000 workers: seconds a period). A donor enters it
    # with what it holds less one as its count, an upper bound; its spare tasks are sorted only once it comes to the
    # top (then it goes back in with its true count): at 10,000 workers under load, a sort of every donor each period
    # was most of the plan's cost, for the few donors the takers draw from
    spare: dict[PeerID, list[TaskID]] = {}
    donors = {worker.peer: worker for worker in workers if len(worker.assigned) > 1}
    heap = [(1 - len(worker.assigned), number, peer) for number, (peer, worker) in enumerate(donors.items())]
    heapq.heapify(heap)
    plan: dict[PeerID, list[TaskID]] = {}
    for taker in idle:
        passed: list[tuple[int, int, PeerID]] = []  #: donors holding nothing this taker can run
        while heap:
            entry = heapq.heappop(heap)
            donor = entry[2]
            tasks = spare.get(donor)
            if tasks is None:  # at the top for the first time: its count was a bound
                candidates = sorted((t for t in donors[donor].assigned if not already_asked(t)), key=dispatch_order)
                tasks = spare[donor] = candidates[1:]  # the oldest is assumed to run
                if len(tasks) != -entry[0]:
                    if tasks:
                        heapq.heappush(heap, (-len(tasks), entry[1], donor))
                    continue
            movable = next((t for t in reversed(tasks) if taker.can_run(requirement_of(t))), None)
            if movable is None:
                passed.append(entry)
                continue
            tasks.remove(movable)
            plan.setdefault(donor, []).append(movable)
            if tasks:
                heapq.heappush(heap, (-len(tasks), entry[1], donor))
            break
        for entry in passed:
            heapq.heappush(heap, entry)
    return {donor: tuple(sorted(tasks)) for donor, tasks in plan.items() if tasks}


class Balancer:
    """Acts on a balance plan once it has been the same `trigger_times` periods in a row, and never asks
    twice for the same task."""

    def __init__(self, trigger_times: int) -> None:
        self.trigger_times = trigger_times
        self._advice: dict[PeerID, tuple[TaskID, ...]] = {}
        self._advice_seen = 0
        self._asked: set[TaskID] = set()

    def step(self, tasks: TaskTable, workers: Iterable[WorkerRecord]) -> dict[PeerID, tuple[TaskID, ...]]:
        """One balancing period: the tasks to ask back from each donor now (usually none)."""
        records = tasks.records
        if self._asked:  # forget tasks that ended: O(asked), not a set of every live task each period
            self._asked = {task_id for task_id in self._asked if task_id in records}
        advice: dict[PeerID, tuple[TaskID, ...]] = {}  # queued work goes to idle workers anyway
        # a donor holds two tasks or more: with fewer live tasks there is none, and the workers are not looked at (an
        # idle cluster of 10,000 workers: no pass over them each period)
        if not len(tasks.queue) and len(records) > 1:
            advice = balance_plan(
                workers,
                lambda task_id: tasks.queue.key(records[task_id]),
                lambda task_id: (records[task_id].dispatched_at, records[task_id].sequence),
                lambda task_id: task_id in self._asked,
            )
        if advice != self._advice:
            self._advice, self._advice_seen = advice, 1
        else:
            self._advice_seen += 1
        if not advice or self._advice_seen != self.trigger_times:
            return {}
        for task_ids in advice.values():
            self._asked.update(task_ids)
        return advice
