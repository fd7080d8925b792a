"""The core's read model (`SchedulerCore.view()`, a `StatusSnapshot`), checked against the state it shows."""

from __future__ import annotations

import pytest

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.events import Received, Tick
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, hello, task

CAPABILITY = CoreSettings("s", "o", PYTHON, allocate=Allocation.CAPABILITY)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def named(client: bytes, number: int, function: str) -> m.Task:
    return m.Task(tid(number), ClientID(client), b"body", function)


def test_counts_follow_tasks_in_total_per_client_and_per_function() -> None:
    sim = SimulatedCluster()
    alice, bob = sim.add_client("alice"), sim.add_client("bob")
    worker = sim.add_worker(capacity=2)
    sim.submit(alice, [named(alice.peer, 1, "inc"), named(alice.peer, 2, "inc"), named(alice.peer, 3, "dec")])
    sim.submit(bob, [named(bob.peer, 4, "inc")])
    stats = sim.core.view().scheduler
    assert (stats.queued, stats.running) == (2, 2)
    sim.finish(worker, tid(1))
    sim.finish(worker, tid(2), m.ResultStatus.FAILED)
    sim.cancel(alice, [tid(3), tid(99)])  # 3 runs by now; 99 was never seen
    sim.send(worker.link, m.TaskCancelConfirm(tid(3), m.CancelOutcome.CANCELED))
    sim.finish(worker, tid(4))
    view = sim.core.view()
    stats = view.scheduler
    assert (stats.queued, stats.running, stats.succeeded, stats.failed, stats.canceled) == (0, 0, 2, 1, 1)
    assert stats.not_found == 1
    clients = {summary.name: summary for summary in view.clients}
    assert clients["alice"].counts == m.TaskCounts(succeeded=1, failed=1, canceled=1)
    assert clients["bob"].counts == m.TaskCounts(succeeded=1)
    assert (clients["alice"].client_id, clients["alice"].hostname, clients["alice"].tasks) == (alice.peer, "sim", 0)
    functions = {summary.name: summary.counts for summary in view.functions}
    assert functions == {"inc": m.TaskCounts(succeeded=2, failed=1), "dec": m.TaskCounts(canceled=1)}
    sim.check_invariants()


def test_graph_nodes_count_as_waiting_and_a_departed_client_leaves_the_view() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    first = m.Task(tid(1), ClientID(client.peer), b"", "a")
    second = m.Task(tid(2), ClientID(client.peer), b"", "b", dependencies=(tid(1),))
    sim.submit_graph(client, 7, [first, second], [tid(2)])
    view = sim.core.view()
    ((summary,), (group,)) = view.clients, view.pending
    assert (summary.counts.waiting, summary.counts.queued, summary.tasks) == (1, 1, 2)
    assert (view.scheduler.queued, view.scheduler.graphs, group.count) == (2, 1, 1)  # waiting counts as queued
    sim.send(client.peer, m.ClientDisconnect())
    view = sim.core.view()
    assert view.clients == () and view.pending == ()
    assert (view.scheduler.queued, view.scheduler.canceled, view.scheduler.graphs) == (0, 2, 0)


def test_pending_groups_say_why_tasks_wait() -> None:
    sim = SimulatedCluster(CAPABILITY)
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1, capabilities=(("gpu", 1),))])
    (group,) = sim.core.view().pending
    assert (group.count, group.running, group.reason) == (1, 0, "no worker is connected")
    sim.add_worker("plain", capacity=1)
    (group,) = sim.core.view().pending
    assert group.reason == "no connected worker has the capabilities gpu"
    # a gpu worker whose processors have not said hello yet takes no task: the reason stays (its story tells one wait;
    # checked off: counting it said "all workers that can run them are busy" meanwhile, a second span of waiting)
    sim.send(PeerID(b"Worker|SIM|starting"), hello(m.WorkerInfo((("gpu", -1),), 1, "", "SIM")))
    (group,) = sim.core.view().pending
    assert group.reason == "no connected worker has the capabilities gpu"
    sim.add_worker("gpu", capacity=1, capabilities=(("gpu", -1),))
    sim.submit(client, [task(client.peer, 2, capabilities=(("gpu", 1),))])
    sim.advance(3.0)
    (group,) = sim.core.view().pending
    assert (group.count, group.running, group.reason) == (1, 1, "all workers that can run them are busy")
    assert group.oldest_queued_seconds == pytest.approx(3.0)
    sim.send(b"manager", hello(m.ManagerInfo("gpus", (("gpu", -1),))))
    sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(units=3, pending_units=2)))
    (group,) = sim.core.view().pending
    assert group.reason == "all workers that can run them are busy; 2 more unit(s) starting"


def test_workers_and_managers_as_the_view_shows_them() -> None:
    sim = SimulatedCluster()
    sim.send(b"manager", hello(m.ManagerInfo("native", (("linux", -1),), 4, "baremetal_native")))
    sim.advance(2.0)
    worker = PeerID(b"Worker|native|1")
    sim.send(worker, hello(m.WorkerInfo((("linux", -1),), 3, "native", "NAT")))
    sim.send(worker + b"/p1", hello(m.ProcessorInfo(b"p1", worker)))  # its processor's link: its tasks go there
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    processors = (m.ProcessorStatus(42, 50.0, 1000, "running"),)
    status = m.WorkerStatus(queued=0, running=1, processors=processors)
    sim.send(worker, m.Heartbeat(1.5, 2048, status, round_trip_seconds=0.004))
    sim.advance(5.0)
    view = sim.core.view()
    (entry,) = view.workers
    assert (entry.worker_id, entry.hostname, entry.pid, entry.manager_id) == (worker, "sim", 1, "native")
    assert (entry.capacity, entry.assigned, entry.capabilities) == (3, 1, (("linux", -1),))
    assert (entry.cpu_percent, entry.rss_bytes, entry.status.processors, entry.lag_seconds) == (1.5, 2048, processors,
                                                                                              0.004)  # fmt: skip
    assert (entry.last_seen_seconds_ago, entry.connected_seconds_ago) == (5.0, 5.0)
    (manager,) = view.managers
    assert (manager.manager_id, manager.manager_type, manager.max_workers) == ("native", "baremetal_native", 4)
    assert (manager.connected_workers, manager.seconds_since_heartbeat, manager.last_target) == (1, 7.0, None)


def test_the_view_is_built_once_per_step_and_carries_wall_time_from_ticks() -> None:
    sim = SimulatedCluster()
    first = sim.core.view()
    assert sim.core.view() is first  # asked twice in one step: one build
    sim.feed(Tick(10.0, wall_time=1_700_000_000.0))
    view = sim.core.view()
    assert view is not first
    assert (view.time, view.wall_time, view.feed_version) == (10.0, 1_700_000_000.0, m.FEED_VERSION)
    sim.feed(Received(sim.add_client().peer, m.Heartbeat(), 12.5))
    assert sim.core.view().wall_time == 1_700_000_002.5  # monotonic time plus the offset of the last tick


def test_units_waiting_in_a_managers_queue_show_in_the_view_the_task_reason_and_the_decisions() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    sim.send(b"manager", hello(m.ManagerInfo("slurm", manager_type="slurm")))
    waits = (m.UnitWaits("Resources", 2, "the partition's nodes are busy"), m.UnitWaits("Priority", 1))
    for _ in range(2):  # the same reasons again are not news
        sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(units=3, pending_units=3, waits=waits)))
    (manager,) = sim.core.view().managers
    assert (manager.waits, manager.held) == (waits, "")
    (group,) = sim.core.view().pending
    assert group.reason == (
        "no worker is connected; a worker manager is starting 3 unit(s) "
        "(3 unit(s) of slurm wait in its provider's queue: Resources, Priority)"
    )
    held = "at most 3 unit(s) may wait in the provider's queue at once"
    sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(units=3, pending_units=3, waits=waits, held=held)))
    sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(units=1, pending_units=0)))
    reasons = [decision.reason for decision in sim.core.feed.decisions if decision.manager_id == "slurm"]
    assert reasons == [
        "3 unit(s) wait in the provider's queue: 2 Resources (the partition's nodes are busy), 1 Priority",
        "3 unit(s) wait in the provider's queue: 2 Resources (the partition's nodes are busy), 1 Priority; "
        f"launches held back: {held}",
        "no unit waits in the provider's queue any more",
    ]
