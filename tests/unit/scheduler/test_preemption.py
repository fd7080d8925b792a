"""Preemption slots (core/preemption.py): a nested task queued behind parents that wait without parking gets its
worker one processor more, and the processor goes once the task leaves.

Each test that checks a mechanism says how it was checked to fail with the mechanism off."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.preemption import GRANT_WAIT_SECONDS, GRANTS, SlotEvent, SlotState
from scaler_rehearsal.testing.simulation import FakeClient, FakeWorker, SimulatedCluster, task

DEPTH = 1 << m.PRIORITY_DEPTH_BITS


def sent_to(sim: SimulatedCluster, peer: bytes, kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, kind)]


def tasks_on(sim: SimulatedCluster, link: bytes) -> list[TaskID]:
    return [t.task_id for t in sent_to(sim, link, m.Task)]


def busy_worker(capacity: int = 1) -> tuple[SimulatedCluster, FakeClient, FakeWorker, TaskID]:
    """One worker of one slot, its slot held by a parent that computes (it waits without parking)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=capacity)
    parent = task(client.peer, 1)
    sim.submit(client, [parent])
    assert tasks_on(sim, worker.link) == [parent.task_id]
    return sim, client, worker, parent.task_id


def test_a_child_queued_behind_its_computing_parent_gets_a_processor_of_its_own() -> None:
    """The parent's worker is asked for one processor more and the child goes there, not behind the parent; once the
    child's result is in, the slot goes and the processor is retired. Checked to fail with `plan` returning no grant
    (the child stayed queued: no ProcessorsWanted)."""
    sim, client, worker, parent = busy_worker()
    first = worker.link
    child = task(client.peer, 2, priority=1)  # depth 1: submitted inside the parent
    sim.submit(client, [child])
    sim.advance(GRANT_WAIT_SECONDS)
    assert sent_to(sim, worker.peer, m.ProcessorsWanted) == [m.ProcessorsWanted(1)]
    second = worker.links[1]
    assert tasks_on(sim, second) == [child.task_id] and tasks_on(sim, first) == [parent]
    assert sim.core.workers[worker.peer].preemption_slots == {1: child.task_id}
    sim.check_invariants()
    sim.finish(worker, child.task_id)
    assert client.answers[child.task_id] == [("result", "success")]
    assert sent_to(sim, worker.peer, m.ProcessorsWanted)[-1] == m.ProcessorsWanted(0)
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p2", "not needed any more")]
    assert not sim.core.workers[worker.peer].preemption_slots
    sim.finish(worker, parent)
    sim.check_invariants()


def test_one_slot_per_depth_and_the_next_sibling_gets_one_when_the_first_is_done() -> None:
    """Two children at depth 1 take turns in one preemption slot; a grandchild (depth 2) gets a slot of its own; a
    slot left while a nested task is queued is handed on to it in the same processor, and the extra processors go once
    nothing nested is left. Checked to fail with `released` handing nothing on (the sibling waited for a new
    processor: 4 started)."""
    sim, client, worker, parent = busy_worker()
    first_child, second_child = task(client.peer, 2, priority=1), task(client.peer, 3, priority=1)
    sim.submit(client, [first_child, second_child])
    sim.advance(GRANT_WAIT_SECONDS)
    assert len(worker.links) == 2 and sim.core.tasks.records[second_child.task_id].state.value == "queued"
    grandchild = task(client.peer, 4, priority=2)
    sim.submit(client, [grandchild])
    sim.advance(GRANT_WAIT_SECONDS)
    assert len(worker.links) == 3 and tasks_on(sim, worker.links[2]) == [grandchild.task_id]
    sim.finish(worker, grandchild.task_id)
    sim.finish(worker, first_child.task_id)
    assert second_child.task_id in worker.held, "the sibling got a slot one of them left"
    assert worker.started == 3, "in a processor already started"
    sim.finish(worker, second_child.task_id)
    sim.finish(worker, parent)
    assert len(worker.links) == 1
    sim.check_invariants()


def test_no_slot_when_the_worker_has_room_or_its_parent_parked_or_the_priorities_differ() -> None:
    """A parked parent yields its slot already; a task of another user priority does not preempt. Checked to fail
    with `_waits_behind` ignoring the user priority (a slot was granted for the other priority's task)."""
    sim, client, worker, parent = busy_worker()
    other = task(client.peer, 2, priority=5 * DEPTH + 1)  # another user priority, nested
    sim.submit(client, [other])
    sim.advance(GRANT_WAIT_SECONDS)
    assert not sent_to(sim, worker.peer, m.ProcessorsWanted)
    sim.send(worker.link, m.ProcessorBlocked(parent))
    assert tasks_on(sim, worker.link)[-1] == other.task_id, "the parked parent's slot took it"
    assert not sent_to(sim, worker.peer, m.ProcessorsWanted)
    sim.check_invariants()


def test_a_slot_nothing_filled_is_withdrawn_once_no_nested_task_is_queued() -> None:
    """A child cancelled before its processor said hello leaves a granted slot: it goes. Checked to fail with
    `Preemption.step` not withdrawing (the worker kept a processor more)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=1)
    parent, child = task(client.peer, 1), task(client.peer, 2, priority=1)
    sim.submit(client, [parent])
    slots = sim.core.workers[worker.peer].preemption_slots
    worker.slots = -1  # its agent starts no processor for now: the slot stays granted, not filled
    sim.submit(client, [child])
    sim.advance(GRANT_WAIT_SECONDS)
    assert slots == {1: None}
    sim.cancel(client, [child.task_id])
    assert not slots
    assert sent_to(sim, worker.peer, m.ProcessorsWanted)[-1] == m.ProcessorsWanted(0)


def test_nothing_is_staged_behind_the_waiting_parent_before_the_new_processor_says_hello() -> None:
    """Rule 3: the slot is counted at once, but only a link that computes nothing takes a task. Checked to fail with
    `WorkerRecord.link_for` staging on busy links while the worker has slots (the child went behind its parent)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=1)
    parent, child = task(client.peer, 1), task(client.peer, 2, priority=1)
    sim.submit(client, [parent])
    worker.slots = -1  # its agent is slow to start the processor
    sim.submit(client, [child])
    sim.advance(GRANT_WAIT_SECONDS)
    assert tasks_on(sim, worker.link) == [parent.task_id]
    assert sim.core.tasks.records[child.task_id].state.value == "queued"
    new = sim.add_processor(worker)
    assert tasks_on(sim, new) == [child.task_id]
    sim.check_invariants()


def test_a_parent_that_parks_soon_after_its_submit_gets_no_slot() -> None:
    """Rule 1: a parent waiting on scaler's futures parks within milliseconds of its submit and its slot serves the
    child; a slot granted before it parked would start a processor for nothing. Checked to fail with
    GRANT_WAIT_SECONDS at 0 (ProcessorsWanted(1) went to the worker)."""
    sim, client, worker, parent = busy_worker()
    child = task(client.peer, 2, priority=1)
    sim.submit(client, [child])
    sim.advance(GRANT_WAIT_SECONDS / 10)
    assert not sent_to(sim, worker.peer, m.ProcessorsWanted)
    sim.send(worker.link, m.ProcessorBlocked(parent))
    assert tasks_on(sim, worker.link) == [parent, child.task_id], "its parked parent's slot took it"
    sim.advance(GRANT_WAIT_SECONDS)
    assert not sent_to(sim, worker.peer, m.ProcessorsWanted)
    sim.check_invariants()


def test_the_slot_table_moves_only_by_its_pairs() -> None:
    assert GRANTS[(SlotState.NONE, SlotEvent.GRANT)] is SlotState.GRANTED
    assert (SlotState.GRANTED, SlotEvent.GRANT) not in GRANTS, "one slot per depth"
    assert (SlotState.FILLED, SlotEvent.WITHDRAW) not in GRANTS, "a slot a task holds stays until it leaves"
