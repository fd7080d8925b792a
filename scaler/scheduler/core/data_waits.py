"""Whether a task whose large inputs a busy host holds waits for that host, and how long at most (issue 74 item 4):
Dask's rule (`decide_worker`: the worker with the least expected wait plus transfer time), with a bound.

Rules:
W1. Asked only when dispatch offers a task naming large inputs to a worker whose host holds fewer of them than some
    others, and none of those has an idle slot (object_hosts.py, `nearer`'s `Busy`). The common path (a task without
    inputs, or a holding host with an idle slot) never gets here.
W2. A host's cost is its expected wait for a slot plus the time to fetch the input bytes it lacks at the link rate
    (`link_bytes_per_second`) after its link's backlog (what it still brings in for the readers placed there,
    object_hosts.py); the offered worker's wait is 0. Sizes are known for stored results only (a client's
    object counts 0 bytes): inputs of unknown size are never waited for.
W3. A busy host's wait (`slot_wait`): when its (k+1)-th slot frees, k the tasks held for it already; each task that
    computes there frees its slot after its expected run time less what it ran already (at least 0), and a task
    staged behind one takes the slot it frees first, for its own expected run. A task's expected run is its
    function's mean (run_times.py), or, for a function none of whose tasks ended yet (a shuffle's reducers are such
    when the first of them wait), the mean of its worker's recent tasks (`WorkerRecord.run_seconds`, which the
    worker's staging depth follows too). With neither (a worker that never ended a task), its worker's wait is
    unknown: not waited for; a host with no known worker is not waited for.
W4. The task is held for the cheapest busy host when that host's cost is below the offered worker's (the wait shorter
    than the transfer it saves), until its bound: when first held, plus the transfer time saved, at most
    `max_wait_seconds`. While held it stays queued, in its place; dispatch sets it aside for a round each time another
    host's worker is offered it (task_lifecycle.py), and a slot of its host freeing takes it (object_hosts.py).
W5. Once its bound passed, or its host no longer among those `Busy` names (its last worker left, or another host now
    holds more of its inputs), it goes wherever dispatch offers it, at once, and is not held again while queued.
W6. Bounded: at most MAX_HELD tasks followed (beyond, none is held); a task's entry goes when it is dispatched or
    leaves the queue otherwise (`forget`, `sweep` on each beat).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scaler.protocol.ids import ObjectID, TaskID
from scaler.scheduler.core.peers import WorkerRecord

#: Tasks followed at most (each one a few dozen bytes).
MAX_HELD = 4096
#: Workers of a busy host looked at for its wait (a host of 1,000 workers must not cost a scan per task).
MAX_WEIGHED = 64

#: A task's expected run (W3: seconds, or None when unknown) and when it was dispatched.
Expected = Callable[[TaskID], tuple[float | None, float]]


@dataclass(slots=True)
class Hold:
    host: str  #: the busy host it waits for
    until: float  #: its bound (W4); at or past it (or released, W5) it is never held again while queued


class DataWaits:
    def __init__(self, link_bytes_per_second: float, max_wait_seconds: float) -> None:
        self._rate = link_bytes_per_second
        self._max_wait = max_wait_seconds
        self._holds: dict[TaskID, Hold] = {}
        #: tasks held at least once, and those of them that went elsewhere at their bound or their host's loss
        self.held = 0
        self.released = 0

    def __len__(self) -> int:
        return len(self._holds)

    def holds(
        self,
        task_id: TaskID,
        inputs: Iterable[ObjectID],
        busy: tuple[str, ...],
        offered_host: str,
        now: float,
        size_of: Callable[[ObjectID], int],
        holds: Callable[[str, ObjectID], bool],
        wait_of: Callable[[str, int], float | None],
        backlog_of: Callable[[str], float] = lambda host: 0.0,
    ) -> bool:
        """Whether the task stays queued for one of the `busy` hosts rather than go to the offered worker's host now
        (W4, W5). `holds(host, object)`: whether a host holds an input; `wait_of(host, ahead)`: its W3 wait with
        `ahead` tasks held for it already; `backlog_of(host)`: the seconds its link still takes to bring in what the
        readers placed there lack (W2)."""
        hold = self._holds.get(task_id)
        if hold is not None:
            if now < hold.until and hold.host in busy:
                return True
            if hold.until > now:  # its host is gone, or no longer the best placed: released before its bound
                hold.until = now
            if hold.host:
                hold.host = ""  # released: counted once, never held again while queued
                self.released += 1
            return False
        rate = self._rate
        if self._max_wait <= 0 or rate <= 0 or len(self._holds) >= MAX_HELD:
            return False
        sized = [(object_id, size_of(object_id)) for object_id in inputs]
        here = sum(size for object_id, size in sized if size and not holds(offered_host, object_id)) / rate
        here += backlog_of(offered_host)
        best: tuple[float, str, float] | None = None  # (cost, host, transfer saved)
        for host in busy:
            there = sum(size for object_id, size in sized if size and not holds(host, object_id)) / rate
            there += backlog_of(host)
            saved = here - there
            if saved <= 0.0 or (best is not None and there >= best[0]):
                continue
            wait = wait_of(host, self._ahead(host, now))
            if wait is None or wait >= saved:
                continue
            if best is None or wait + there < best[0]:
                best = wait + there, host, saved
        if best is None:
            return False
        self._holds[task_id] = Hold(best[1], now + min(best[2], self._max_wait))
        self.held += 1
        return True

    def hold_of(self, task_id: TaskID) -> tuple[str, float]:
        """The host a held task waits for and its bound."""
        hold = self._holds[task_id]
        return hold.host, hold.until

    def _ahead(self, host: str, now: float) -> int:
        return sum(1 for hold in self._holds.values() if hold.host == host and hold.until > now)

    def forget(self, task_id: TaskID) -> None:
        """The task was dispatched (or left the queue): it is no longer followed."""
        if self._holds:
            self._holds.pop(task_id, None)

    def sweep(self, queued: Callable[[TaskID], bool]) -> None:
        """Each beat: the entries of tasks no longer queued (cancelled, failed) go (W6)."""
        if self._holds:
            for task_id in [task_id for task_id in self._holds if not queued(task_id)]:
                del self._holds[task_id]


def slot_wait(workers: Iterable[WorkerRecord], ahead: int, expected: Expected, now: float) -> float | None:
    """W3: when the (`ahead`+1)-th slot of these workers (a host's) frees, as far as their tasks' expected run times
    tell; None when no worker's is known, or they have no more slots than `ahead`."""
    frees: list[float] = []
    for weighed, worker in enumerate(workers):
        if weighed >= MAX_WEIGHED:
            break
        slot_frees = _worker_frees(worker, expected, now)
        if slot_frees is not None:
            frees.extend(slot_frees)
    if len(frees) <= ahead:
        return None
    return heapq.nsmallest(ahead + 1, frees)[-1]


def _worker_frees(worker: WorkerRecord, expected: Expected, now: float) -> list[float] | None:
    """In how long each of the worker's slots frees (tasks staged behind the computing ones taking the first freed);
    None when a task's run time is not known."""
    slots = max(worker.slots, 1)
    runs = sorted((expected(task_id) for task_id in worker.assigned), key=lambda run: run[1])
    frees: list[float] = []
    for mean, dispatched_at in runs[:slots]:
        if mean is None:
            return None
        frees.append(max(0.0, mean - (now - dispatched_at)))
    frees.extend(0.0 for _ in range(slots - len(frees)))
    heapq.heapify(frees)
    for mean, _ in runs[slots:]:
        if mean is None:
            return None
        heapq.heappush(frees, heapq.heappop(frees) + mean)
    return frees
