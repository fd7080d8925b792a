"""Overtaking: a task queued at a higher priority than tasks workers hold unstarted takes their place.

Credit-based dispatch lets a worker hold its slots' tasks plus a prefetch of one and what its processors stage (about
20 ms of its tasks' measured run time: core/peers.py). A task of a higher priority that arrives while every worker's
credit is taken would wait for the next result, and then for the tasks staged ahead of it.
So when tasks are queued above the lowest priority held at the workers, the core asks full workers to give back
(TaskReturn) their lowest-priority held task, the most recently dispatched one (the least likely to have started;
the oldest is assumed to run); a worker gives back only what it has not started, and the credit freed goes to the
queue's best task, the one that asked. Nothing running is stopped (no preemption).

Rules:
1. Only the user's priority counts (`priority >> PRIORITY_DEPTH_BITS`): the nesting depth orders the queue but takes
   nothing back, so a parent's children go before new work of its priority as they always did, and a task already
   at a worker is not sent back for them (a parked parent yields its slot to them anyway).
2. Planned only in a step where a task was queued above the lowest priority held (`DispatchQueue.pushed_top`), so
   a queue of one priority never costs a scan of the workers.
3. One worker per outranking queued task and capability set, from workers that can run it; from each, enough
   tasks to free one slot (one, or more when the worker holds more than its capacity, which shrinks when its
   tasks prove slower than it guessed).
4. A task is never asked for twice (a worker that already started it answered with nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import PRIORITY_DEPTH_BITS
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.task_table import TaskTable


class Overtaking:
    def __init__(self) -> None:
        self._asked: set[TaskID] = set()

    def step(self, tasks: TaskTable, workers: Iterable[WorkerRecord]) -> dict[PeerID, tuple[TaskID, ...]]:
        """The tasks to ask back from each worker now (usually none)."""
        queue, records = tasks.queue, tasks.records
        pushed_top, queue.pushed_top = queue.pushed_top, None
        if pushed_top is None:  # nothing pushed since the last step (a step of results): the held ones not asked for
            return {}
        lowest_held = tasks.lowest_held_priority()
        if lowest_held is None or _user(pushed_top) <= _user(lowest_held) or not len(queue):
            return {}
        if self._asked:
            self._asked = {task_id for task_id in self._asked if task_id in records}
        full = [worker for worker in workers if worker.free_slots <= 0 and len(worker.assigned) > 1]
        plan: dict[PeerID, list[TaskID]] = {}
        for key, _count in list(queue.groups()):
            head = queue.peek(key, records)
            if head is None:
                continue
            priority = _user(-head[0])
            # queued above every priority (with any depth) of the lowest user priority held
            wanted = queue.outranking(key, ((_user(lowest_held) + 1) << PRIORITY_DEPTH_BITS) - 1)
            for worker in full:
                if wanted <= 0:
                    break
                if worker.peer in plan or not worker.can_run(key):  # the key is () when capabilities are ignored
                    continue
                order = sorted(worker.assigned, key=lambda t: (records[t].dispatched_at, records[t].sequence))
                held = [t for t in order[1:] if _user(records[t].traits.priority) < priority and t not in self._asked]
                # enough to free one slot: a worker whose capacity shrank (its tasks proved slower than it guessed)
                # holds more than its capacity, and one task given back would not make room
                need = max(1, len(worker.assigned) - worker.capacity + 1)
                chosen = sorted(reversed(held), key=lambda t: records[t].traits.priority)[:need]  # stable: latest first
                if chosen:
                    plan[worker.peer] = chosen
                    self._asked.update(chosen)
                    wanted -= 1
        return {peer: tuple(task_ids) for peer, task_ids in plan.items()}


def _user(priority: int) -> int:
    """The user's priority of a wire priority (without the nesting depth)."""
    return priority >> PRIORITY_DEPTH_BITS
