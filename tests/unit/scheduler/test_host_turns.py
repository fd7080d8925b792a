"""Dispatch takes equally loaded workers one per host in turn (scheduler/core/free_workers.py, a worker's place: its
rank on its host when it joined, then its join order), so a burst of tasks without inputs spreads evenly over the
hosts, each host's link carrying an equal share of their results, consecutive tasks on different hosts.

Checked with the mechanism off: with every worker's rank 0 (registration's `order_of(0, ...)`), the burst fills host
a's workers before host b's, and both tests fail."""

from __future__ import annotations

from scaler.protocol.ids import TaskID
from scaler_rehearsal.testing.simulation import SimulatedCluster, task


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def test_a_burst_of_tasks_goes_one_per_host_in_turn() -> None:
    """Hosts a and b of two workers each, a's both joined first; eight tasks at once: a0, b0, a1, b1, then again."""
    sim = SimulatedCluster()
    on_a = [sim.add_worker(f"a{n}", capacity=2, host="host-a") for n in range(2)]
    on_b = [sim.add_worker(f"b{n}", capacity=2, host="host-b") for n in range(2)]
    client = sim.add_client()
    sim.submit(client, [task(client.peer, number) for number in range(8)])
    order = [on_a[0], on_b[0], on_a[1], on_b[1]]
    assert [worker.held for worker in order] == [[tid(n), tid(n + 4)] for n in range(4)]
    sim.check_invariants()


def test_a_host_that_joined_with_more_workers_shares_ties_with_the_others_first() -> None:
    """Host a has three workers, host b one (joined last): b's takes the second task, not the fourth."""
    sim = SimulatedCluster()
    on_a = [sim.add_worker(f"a{n}", host="host-a") for n in range(3)]
    on_b = sim.add_worker("b0", host="host-b")
    client = sim.add_client()
    sim.submit(client, [task(client.peer, number) for number in range(4)])
    assert on_a[0].held == [tid(0)] and on_b.held == [tid(1)]
    assert on_a[1].held == [tid(2)] and on_a[2].held == [tid(3)]
    sim.check_invariants()
