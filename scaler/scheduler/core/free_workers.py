"""Free workers: the index dispatch takes workers from, least loaded first, in O(log workers) per placement.

A heap of entries for every worker with a free slot: its load when pushed, then its place among equals
(`WorkerRecord.order`, `order_of`: unique among live workers, so the order is total). An entry goes stale when its
worker's load changes (a fresh entry is pushed then) or the worker leaves or fills up; stale entries are dropped when
they reach the top, and the heap is rebuilt from the workers once it holds mostly stale ones. So placing a task costs
the same from 10 workers to 1,000, rather than a scan of every worker.

Equally loaded workers are taken one per host in turn: a worker's place is how many workers its host had when it joined
(its rank there), then its join order. So a burst of tasks fills the first worker of every host, then the second of
every host, and so on, rather than both slots of the first host to join before any of the next: each host's link and
cache carry an equal share of the burst's results, and consecutive tasks (a shuffle's partitions for one reader, in
the order its client wrote them) are made on different hosts rather than two by two on one. On one host the place is
the join order, as before. The place is fixed at registration, so dispatch pays nothing for it.

An entry is one int, the load above PLACE_BITS bits of place (the rank above ORDER_BITS bits of join order), and the
worker is found by its place: an int is compared in one step where a tuple took two or three (with 10,000 workers the
heap is 15 levels deep, about 30 comparisons a placement: 2 us a task with tuples).
"""

from __future__ import annotations

import heapq

from scaler.protocol.ids import PeerID
from scaler.scheduler.core.peers import WorkerRecord, no_free_slot

#: A heap entry: the worker's load when pushed, shifted above its place among equals.
FreeEntry = int
#: Bits of a place that hold the join order (a trillion registrations).
ORDER_BITS = 40
#: Bits of a place that hold the worker's rank on its host (ranks beyond count as the last).
RANK_BITS = 20
#: Bits of an entry that hold the place.
PLACE_BITS = ORDER_BITS + RANK_BITS
_PLACE_MASK = (1 << PLACE_BITS) - 1
_MAX_RANK = (1 << RANK_BITS) - 1
_NO_PEER = PeerID(b"")


def order_of(rank: int, sequence: int) -> int:
    """A worker's place among equally loaded workers (`WorkerRecord.order`): `rank`, how many workers its host had
    when it joined, above `sequence`, its join order."""
    return min(rank, _MAX_RANK) << ORDER_BITS | sequence


class FreeWorkers:
    def __init__(self, workers: dict[PeerID, WorkerRecord]) -> None:
        self._workers = workers
        self._heap: list[FreeEntry] = []
        #: the worker of each place the heap may hold entries of
        self._peers: dict[int, PeerID] = {}

    def offer(self, worker: WorkerRecord) -> None:
        """The worker's load changed: it goes into the heap at its new load if it has room."""
        if no_free_slot(worker):
            return
        if len(self._heap) > 2 * len(self._workers) + 64:  # mostly stale entries: rebuild
            self._rebuild()
            return
        self._peers[worker.order] = worker.peer
        heapq.heappush(self._heap, len(worker.assigned) << PLACE_BITS | worker.order)

    def _rebuild(self) -> None:
        free = [worker for worker in self._workers.values() if worker.free_slots > 0]
        self._peers = {worker.order: worker.peer for worker in free}
        self._heap[:] = [len(worker.assigned) << PLACE_BITS | worker.order for worker in free]
        heapq.heapify(self._heap)

    def next_free(self) -> tuple[FreeEntry, WorkerRecord] | None:
        """The least loaded worker with room, its entry taken off the heap (None: no worker has room)."""
        heap, peers, workers = self._heap, self._peers, self._workers
        while heap:
            entry = heapq.heappop(heap)
            order = entry & _PLACE_MASK
            worker = workers.get(peers.get(order, _NO_PEER))
            if worker is None or worker.order != order:
                peers.pop(order, None)  # gone (or registered again since, under a new join order)
                continue
            if no_free_slot(worker) or len(worker.assigned) != entry >> PLACE_BITS:
                continue  # stale: full, or its load changed (a fresher entry is in the heap)
            return entry, worker
        return None

    def put_back(self, entries: list[FreeEntry]) -> None:
        """Workers `next_free` handed out that took no task this round: they stay candidates for the next."""
        for entry in entries:
            heapq.heappush(self._heap, entry)
