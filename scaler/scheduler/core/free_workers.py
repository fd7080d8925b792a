"""Free workers: the index dispatch takes workers from, least loaded first, in O(log workers) per placement.

A heap of (load, join order, worker) for every worker with a free slot. An entry goes stale when its worker's load
changes (a fresh entry is pushed then) or the worker leaves or fills up; stale entries are dropped when they reach
the top, and the heap is rebuilt from the workers once it holds mostly stale ones. So placing a task costs the same
from 10 workers to 1,000, rather than a scan of every worker.
"""

from __future__ import annotations

import heapq

from scaler.protocol.ids import PeerID
from scaler.scheduler.core.peers import WorkerRecord

#: A heap entry: (load when pushed, the worker's join order, the worker).
FreeEntry = tuple[int, int, PeerID]


class FreeWorkers:
    def __init__(self, workers: dict[PeerID, WorkerRecord]) -> None:
        self._workers = workers
        self._heap: list[FreeEntry] = []

    def offer(self, worker: WorkerRecord) -> None:
        """The worker's load changed: it goes into the heap at its new load if it has room."""
        if worker.free_slots <= 0:
            return
        heap = self._heap
        if len(heap) > 2 * len(self._workers) + 64:  # mostly stale entries: rebuild
            heap[:] = [(len(w.assigned), w.sequence, w.peer) for w in self._workers.values() if w.free_slots > 0]
            heapq.heapify(heap)
            return
        heapq.heappush(heap, (len(worker.assigned), worker.sequence, worker.peer))

    def next_free(self) -> tuple[FreeEntry, WorkerRecord] | None:
        """The least loaded worker with room, its entry taken off the heap (None: no worker has room)."""
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            worker = self._workers.get(entry[2])
            if worker is None or worker.free_slots <= 0 or len(worker.assigned) != entry[0]:
                continue  # stale: gone, full, or its load changed (a fresher entry is in the heap)
            return entry, worker
        return None

    def put_back(self, entries: list[FreeEntry]) -> None:
        """Workers `next_free` handed out that took no task this round: they stay candidates for the next."""
        for entry in entries:
            heapq.heappush(self._heap, entry)
