"""Issue 73: a worker's credit (scheduler/core/peers.py, `WorkerRecord.restage`) counts back up whatever its size.
Its hello's capacity is its slots plus one prefetched task, at most `per_worker_task_queue_size`; the prefetch is not
offered while its tasks compute long. A credit of its slots or fewer counts no prefetch, so none is withdrawn: a worker
of one task took its first task, learned from its result that its tasks compute long, and was offered nothing again.

Each test was checked to fail with the prefetch withdrawn whatever the credit (`has_prefetch` without
`self.capacity > self.slots`): the worker holds one task fewer than its credit from its second round on (none for a
credit of one), and its parked parent's child is never sent; the last one also with `on_capacity` not restaging."""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler_rehearsal.testing.simulation import FakeClient, FakeWorker, SimulatedCluster, task

LONG_SECONDS = 3.0  #: what each task computed: long (STAGED_WAIT_SECONDS and more)


def one_worker(capacity: int, slots: int) -> tuple[SimulatedCluster, FakeClient, FakeWorker]:
    sim = SimulatedCluster()
    return sim, sim.add_client(), sim.add_worker(capacity=capacity, slots=slots)


def computed_long(sim: SimulatedCluster, worker: FakeWorker, task_id: TaskID) -> None:
    """The worker's processor answers for the task, which computed LONG_SECONDS (the scheduler learns from it)."""
    worker.held.remove(task_id)
    ran = m.RunStamps(started_at=100.0, finished_at=100.0 + LONG_SECONDS)
    result = m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v", ran=ran)
    sim.send(worker.where.pop(task_id), result)


def rounds_held(
    sim: SimulatedCluster, client: FakeClient, worker: FakeWorker, rounds: int, per_round: int
) -> list[int]:
    """Submit `rounds * per_round` tasks; then, round by round, how many the worker holds before all of them end."""
    first = len(client.answers) + 1
    tasks = [task(client.peer, n) for n in range(first, first + rounds * per_round)]
    sim.submit(client, tasks)
    held = []
    while worker.held:
        held.append(len(worker.held))
        for task_id in list(worker.held):
            computed_long(sim, worker, task_id)
        sim.check_invariants()
    assert all(client.answers[t.task_id] == [("result", "success")] for t in tasks), "a task never ran"
    return held


@pytest.mark.parametrize(
    ("capacity", "slots"), [(1, 1), (1, 2), (2, 2), (3, 4)], ids=["one", "one-of-two-slots", "two", "below-slots"]
)
def test_a_credit_of_its_slots_or_fewer_is_offered_whole_after_its_tasks_computed_long(
    capacity: int, slots: int
) -> None:
    sim, client, worker = one_worker(capacity, slots)
    assert rounds_held(sim, client, worker, rounds=3, per_round=capacity) == [capacity] * 3


def test_a_credit_beyond_its_slots_keeps_its_prefetch_back_while_its_tasks_compute_long() -> None:
    """The prefetch withdrawn (the contrast): a task staged behind a long one would wait for it."""
    sim, client, worker = one_worker(capacity=2, slots=1)
    assert rounds_held(sim, client, worker, rounds=2, per_round=2)[:3] == [2, 1, 1]


def test_a_parent_parked_on_a_worker_of_one_task_yields_its_slot_to_its_child() -> None:
    sim, client, worker = one_worker(capacity=1, slots=1)
    rounds_held(sim, client, worker, rounds=1, per_round=1)  # its tasks compute long, it learned
    parent, child = task(client.peer, 100), task(client.peer, 101)
    sim.submit(client, [parent])
    sim.send(worker.link, m.ProcessorBlocked(parent.task_id))
    sim.submit(client, [child])
    assert worker.held == [parent.task_id, child.task_id], "the child runs in the slot its parent yields"
    computed_long(sim, worker, child.task_id)
    sim.send(worker.link, m.ProcessorResumeRequest(parent.task_id))
    computed_long(sim, worker, parent.task_id)
    assert client.answers[parent.task_id] == [("result", "success")]
    sim.check_invariants()


def test_a_worker_that_lowers_its_credit_to_its_slots_is_offered_all_of_it() -> None:
    """WorkerCapacity replaces its hello's: whether the credit counts a prefetch follows it."""
    sim, client, worker = one_worker(capacity=2, slots=1)
    rounds_held(sim, client, worker, rounds=1, per_round=2)  # its tasks compute long, it learned
    sim.send(worker.peer, m.WorkerCapacity(1))
    assert rounds_held(sim, client, worker, rounds=2, per_round=1) == [1, 1]
