"""Sharing one scheduler (docs/guide/sharing.md): priorities overtaking prefetched work, weighted shares, quotas."""

from __future__ import annotations

from scaler.policy.snapshot import scaling_snapshot
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.messages import PRIORITY_DEPTH_BITS
from scaler.scheduler.core.effects import Send
from scaler_rehearsal.testing.simulation import SimulatedCluster, task


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def returns_to(effects: list, peer: bytes) -> list[m.TaskReturn]:  # type: ignore[type-arg]
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and e.peer.startswith(peer + b"/") and isinstance(e.message, m.TaskReturn)
    ]


def test_a_high_priority_task_takes_the_place_of_a_prefetched_low_one() -> None:
    """Checked by switching Overtaking.step off (returning {}): the high task then waits at the scheduler until
    a result frees credit, and the first assertion fails."""
    sim = SimulatedCluster()
    client = sim.add_client()
    workers = [sim.add_worker(f"w{n}", capacity=2) for n in range(2)]
    sim.submit(client, [task(client.peer, n) for n in range(1000)])
    assert all(len(worker.held) == 2 for worker in workers)
    sim.submit(client, [task(client.peer, 5000, priority=7 << PRIORITY_DEPTH_BITS)])
    holder = [worker for worker in workers if tid(5000) in worker.held]
    assert len(holder) == 1, "dispatched at once, in the place of a prefetched task given back"
    (worker,) = holder
    assert worker.returned == 1 and worker.held[1] == tid(5000)
    sim.finish(worker)  # the running task ends: the high one is next on that worker
    assert worker.held[0] == tid(5000)
    sim.check_invariants()


def test_no_task_is_asked_back_when_the_queue_has_one_priority() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    effects: list = []  # type: ignore[type-arg]
    for n in range(50):
        sim.submit(client, [task(client.peer, n)])
    effects = sim.effects
    assert not returns_to(effects, worker.peer) and worker.returned == 0


def test_nested_depth_orders_the_queue_but_takes_nothing_back_from_the_workers() -> None:
    """A child (depth 1, the same user priority) goes before queued new work, but a task a worker already holds
    stays there: only a higher user priority overtakes."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    sim.submit(client, [task(client.peer, n) for n in range(10)])
    sim.submit(client, [task(client.peer, 100, priority=1)])
    assert worker.returned == 0 and not returns_to(sim.effects, worker.peer)
    sim.finish(worker)
    assert worker.held[-1] == tid(100)  # the freed credit went to the child, ahead of the queued new work
    sim.check_invariants()


def test_overtaking_asks_for_a_task_once_even_when_the_worker_had_started_it() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    sim.submit(client, [task(client.peer, 10, priority=3 << PRIORITY_DEPTH_BITS)])
    sim.submit(client, [task(client.peer, 11, priority=3 << PRIORITY_DEPTH_BITS)])
    asked = [r.task_ids for r in returns_to(sim.effects, worker.peer)]
    assert asked == [(tid(2),)], "one return per task held, never twice"
    sim.check_invariants()


def run_split(first_share: float, second_share: float, first_submits_first: bool) -> float:
    """The first client's fraction of the task starts while both clients have work queued."""
    sim = SimulatedCluster()
    a, b = sim.add_client("a", share=first_share), sim.add_client("b", share=second_share)
    worker = sim.add_worker(capacity=1)
    order = [(a, 0), (b, 100_000)] if first_submits_first else [(b, 100_000), (a, 0)]
    for client, base in order:
        sim.submit(client, [task(client.peer, base + n) for n in range(2000)])
    started = {a.peer: 0, b.peer: 0}
    while worker.held:
        running = int.from_bytes(worker.held[0], "big")
        client = a if running < 100_000 else b
        started[client.peer] += 1
        sim.finish(worker)
        if max(started.values()) >= 2000 - 1:
            break
    return started[a.peer] / (started[a.peer] + started[b.peer])


def test_two_clients_split_the_task_starts_by_their_shares_whoever_submitted_first() -> None:
    """Checked by making every share 1 in DispatchQueue.push: the 3:1 split becomes 1:1 and this fails."""
    for first in (True, False):
        assert abs(run_split(3.0, 1.0, first) - 0.75) < 0.01
        assert abs(run_split(1.0, 1.0, first) - 0.5) < 0.01


def test_a_client_share_that_is_not_positive_is_refused() -> None:
    sim = SimulatedCluster()
    effects = sim.send(b"Client|bad", m.Hello(m.PROTOCOL_VERSION, sim.settings.python_version, 1, "h",
                                             m.ClientInfo("bad", -1.0)))  # fmt: skip
    (reply,) = [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, m.HelloReply)]
    assert not reply.accepted and "share" in reply.reason


def test_a_client_at_its_quota_waits_and_the_status_says_why_while_others_run() -> None:
    """Checked by ignoring the quota in DispatchQueue.peek: the capped client then takes all eight slots."""
    sim = SimulatedCluster()
    capped, other = sim.add_client("capped", max_running_tasks=2), sim.add_client("other")
    workers = [sim.add_worker(f"w{n}", capacity=4) for n in range(2)]
    sim.submit(capped, [task(capped.peer, n) for n in range(100)])
    held = [t for w in workers for t in w.held]
    assert len(held) == 2
    (group,) = sim.core.view().pending
    assert "98 at their client's quota" in group.reason
    (demand,) = scaling_snapshot(sim.core.view(), 10.0).task_groups
    assert demand.queued == 0, "more workers would not start tasks held back by their client's quota"
    sim.submit(other, [task(other.peer, 1000 + n) for n in range(10)])
    assert sum(len(w.held) for w in workers) == 8  # the others' work fills the rest
    finished = 0
    while any(w.held for w in workers):  # as tasks end, the capped client's next start: never more than two at once
        for worker in workers:
            if worker.held:
                finished += int.from_bytes(worker.held[0], "big") < 1000
                sim.finish(worker)
        running = sum(1 for w in workers for t in w.held if int.from_bytes(t, "big") < 1000)
        assert running <= 2
    assert finished == 100
    sim.check_invariants()


def test_a_worker_holding_more_than_its_shrunk_capacity_gives_back_enough_to_make_room() -> None:
    """Checked by asking for one task per worker only: the high task then stays queued behind the worker's
    surplus, and this fails."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=10)
    sim.submit(client, [task(client.peer, n) for n in range(100)])
    sim.send(worker.peer, m.WorkerCapacity(3))  # its tasks proved slow: it wants 3, holds 10
    sim.submit(client, [task(client.peer, 5000, priority=1 << PRIORITY_DEPTH_BITS)])
    assert worker.returned == 8 and tid(5000) in worker.held
    sim.check_invariants()


def test_the_status_gives_the_wait_of_tasks_their_clients_quota_holds() -> None:
    """Tasks that only a quota holds still wait: their group's oldest wait is theirs, not 0 s (scaler_top and the
    dashboard show it beside the reason). Checked by reading the heap's head only (what `_groups` did): the
    capped group then says 0 s, and the first assert fails; the second fails when the set-aside tasks are left out
    while another client's younger task heads the heap."""
    sim = SimulatedCluster()
    capped, other = sim.add_client("capped", max_running_tasks=1), sim.add_client("other")
    sim.add_worker(capacity=4)
    sim.submit(capped, [task(capped.peer, n) for n in range(5)])
    sim.advance(30.0)
    (group,) = sim.core.view().pending
    assert group.count == 4 and group.oldest_queued_seconds >= 30.0
    sim.submit(other, [task(other.peer, 1000 + n) for n in range(10)])  # 3 start, 7 wait behind them
    sim.advance(5.0)
    (group,) = sim.core.view().pending
    assert group.oldest_queued_seconds >= 35.0, "the capped client's tasks have waited longest"
