"""The free-worker index (scheduler/core/free_workers.py) hands out the least loaded worker with room, among equals the
one of the lowest rank on its host, then the earliest joined, whatever happened to the workers since their entries
were pushed: compared, over random runs of placements, releases, departures and registrations again, with a scan of
every worker."""

from __future__ import annotations

import random

from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.free_workers import PLACE_BITS, FreeWorkers, order_of
from scaler.scheduler.core.peers import WorkerRecord


def joined(peer: bytes, sequence: int, capacity: int, rank: int = 0) -> WorkerRecord:
    return WorkerRecord(
        PeerID(peer), (), frozenset(), capacity, "", "", "", 0, 0.0, 0.0, sequence=sequence,
        order=order_of(rank, sequence),
    )  # fmt: skip


def scanned(workers: dict[PeerID, WorkerRecord]) -> WorkerRecord | None:
    """What a scan of every worker picks."""
    free = [worker for worker in workers.values() if worker.free_slots > 0]
    return min(free, key=lambda worker: (len(worker.assigned), worker.order), default=None)


def test_the_least_loaded_then_earliest_joined_worker_with_room_comes_first() -> None:
    workers = {worker.peer: worker for worker in (joined(b"late", 2, 2), joined(b"early", 1, 2))}
    free = FreeWorkers(workers)
    for worker in workers.values():
        free.offer(worker)
    found = free.next_free()
    assert found is not None and found[1].peer == b"early"
    found[1].assigned.add(TaskID(b"t1"))
    free.offer(found[1])
    second = free.next_free()
    assert second is not None and second[1].peer == b"late"


def test_a_worker_registered_again_is_not_handed_out_by_its_old_entries() -> None:
    """Its old entry names its old join order: dropped, the worker comes by its new entry only (at its new place in
    the order). Fails with the worker looked up by its identity alone."""
    workers = {PeerID(b"a"): joined(b"a", 1, 1), PeerID(b"b"): joined(b"b", 2, 1)}
    free = FreeWorkers(workers)
    for worker in workers.values():
        free.offer(worker)
    workers[PeerID(b"a")] = again = joined(b"a", 3, 1)
    found = free.next_free()
    assert found is not None and found[1].peer == b"b" and found[0] == order_of(0, 2)
    free.offer(again)
    found = free.next_free()
    assert found is not None and found[1] is again and found[0] == order_of(0, 3)
    assert free.next_free() is None


def test_random_runs_hand_out_what_a_scan_would() -> None:
    rng = random.Random(58)
    for _ in range(40):
        workers: dict[PeerID, WorkerRecord] = {}
        free = FreeWorkers(workers)
        sequence = 0
        task = 0
        for _ in range(400):
            action = rng.random()
            if action < 0.15 or not workers:  # a worker joins (maybe a peer seen before)
                sequence += 1
                worker = joined(b"w%d" % rng.randrange(30), sequence, rng.randint(1, 3), rng.randrange(4))
                workers[worker.peer] = worker
                free.offer(worker)
            elif action < 0.25:  # a worker leaves
                del workers[rng.choice(list(workers))]
            elif action < 0.5:  # a task ends
                worker = rng.choice(list(workers.values()))
                if worker.assigned:
                    worker.assigned.pop()
                    free.offer(worker)
            else:  # a placement, as dispatch makes it
                expected = scanned(workers)
                found = free.next_free()
                assert (found[1] if found else None) is expected
                if found is not None:
                    entry, worker = found
                    assert entry >> PLACE_BITS == len(worker.assigned)
                    if rng.random() < 0.2:  # it could take nothing this round
                        free.put_back([entry])
                    else:
                        task += 1
                        worker.assigned.add(TaskID(b"t%d" % task))
                        free.offer(worker)


def test_equally_loaded_workers_are_handed_out_one_per_host_in_turn() -> None:
    """Two hosts of two workers, host a's joined first: the rank on its host goes before the join order, so the
    first worker of each host comes before the second of either (fails with every rank 0: a0, a1, b0, b1)."""
    ranked = [(b"a0", 1, 0), (b"a1", 2, 1), (b"b0", 3, 0), (b"b1", 4, 1)]
    workers = {PeerID(peer): joined(peer, sequence, 1, rank) for peer, sequence, rank in ranked}
    free = FreeWorkers(workers)
    for worker in workers.values():
        free.offer(worker)
    handed = []
    while (found := free.next_free()) is not None:
        handed.append(found[1].peer)
        found[1].assigned.add(TaskID(b"t%d" % len(handed)))
    assert handed == [b"a0", b"b0", b"a1", b"b1"]
