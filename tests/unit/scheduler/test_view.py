"""The SchedulerView: the one read model of the core, checked against the state it is built from."""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler.protocol.feed import TaskCounts
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.scheduler.core.events import Received, Tick
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.task_tally import MAX_FUNCTIONS, OTHER_FUNCTIONS
from scaler.scheduler.scaling_hook import make_scaling_hook
from scaler.testing.simulation import PYTHON, SimulatedCluster, hello, task

CAPABILITY = CoreSettings("s", "o", PYTHON, allocate="capability")


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
    view = sim.core.view()
    assert view.tasks == TaskCounts(queued=2, running=2)
    sim.finish(worker, tid(1))
    sim.finish(worker, tid(2), m.ResultStatus.FAILED)
    sim.cancel(alice, [tid(3), tid(99)])  # 3 is running by now; 99 was never seen
    sim.finish(worker, tid(4))
    view = sim.core.view()
    assert view.tasks == TaskCounts(success=2, failed=1, canceled=1, not_found=1)
    clients = {entry.name: entry for entry in view.clients}
    assert clients["alice"].tasks == TaskCounts(success=1, failed=1, canceled=1, not_found=1)
    assert clients["bob"].tasks == TaskCounts(success=1)
    assert (clients["alice"].client_id, clients["alice"].hostname, clients["alice"].pid) == (alice.peer, "sim", 1)
    functions = {entry.function_name: entry.tasks for entry in view.functions}
    assert functions == {"inc": TaskCounts(success=2, failed=1), "dec": TaskCounts(canceled=1)}
    sim.check_invariants()


def test_graph_nodes_count_as_waiting_and_a_departed_client_leaves_the_view() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    nodes = (
        m.Task(tid(1), ClientID(client.peer), b"", "a", graph_id=GraphID(b"g")),
        m.Task(tid(2), ClientID(client.peer), b"", "b", graph_id=GraphID(b"g"), dependencies=(tid(1),)),
    )
    sim.submit_graph(client, m.GraphTask(GraphID(b"g"), ClientID(client.peer), nodes, (tid(2),)))
    assert sim.core.view().tasks == TaskCounts(waiting=1, queued=1)
    sim.send(client.peer, m.ClientDisconnect())
    view = sim.core.view()
    assert view.clients == () and view.tasks == TaskCounts(canceled=2)


def test_functions_beyond_the_limit_share_one_entry() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [named(client.peer, n, f"f{n}") for n in range(MAX_FUNCTIONS + 5)])
    functions = {entry.function_name: entry.tasks.queued for entry in sim.core.view().functions}
    assert len(functions) == MAX_FUNCTIONS + 1
    assert functions[OTHER_FUNCTIONS] == 5


def test_task_groups_say_why_tasks_wait() -> None:
    sim = SimulatedCluster(CAPABILITY)
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1, capabilities=(("gpu", 1),))])
    (group,) = sim.core.view().groups
    assert (group.queued, group.running, group.reason) == (1, 0, "no worker is connected")
    sim.add_worker("plain", capacity=1)
    (group,) = sim.core.view().groups
    assert group.reason == "no connected worker has the capabilities gpu"
    sim.add_worker("gpu", capacity=1, capabilities=(("gpu", -1),))
    sim.submit(client, [task(client.peer, 2, capabilities=(("gpu", 1),))])
    sim.advance(3.0)
    (group,) = sim.core.view().groups
    assert (group.queued, group.running) == (1, 1)
    assert group.reason == "all 1 worker(s) that can run them are busy"
    assert group.oldest_queued_seconds == pytest.approx(3.0)
    sim.send(b"manager", hello(m.ManagerInfo("gpus", (("gpu", -1),))))
    sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(units=3, pending_units=2)))
    (group,) = sim.core.view().pending
    assert group.reason == "all 1 worker(s) that can run them are busy; manager(s) booting workers: gpus (2)"


def test_workers_and_managers_as_the_view_shows_them() -> None:
    sim = SimulatedCluster()
    sim.send(b"manager", hello(m.ManagerInfo("native", (("linux", -1),), 4, "baremetal_native")))
    assert sim.core.view().managers[0].target is None  # no scaling hook: no target was ever sent
    sim.advance(2.0)
    worker = sim.add_worker(capacity=3, manager_id="native")
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    processors = (m.ProcessorStatus(42, 50.0, 1000, "running"),)
    sim.send(worker.peer, m.Heartbeat(1.5, 2048, m.WorkerStatus(queued=0, running=1, processors=processors)))
    sim.core.workers[worker.peer].round_trip_seconds = 0.004  # what the worker's heartbeat reports
    sim.advance(5.0)
    view = sim.core.view()
    (entry,) = view.workers
    assert (entry.worker_id, entry.hostname, entry.pid, entry.manager_id) == (worker.peer, "sim", 1, "native")
    assert (entry.capacity, entry.assigned, entry.free, entry.queued) == (3, 1, 2, 0)
    assert (entry.cpu_percent, entry.rss_bytes, entry.status.processors) == (1.5, 2048, processors)
    assert (entry.last_seen_seconds, entry.connected_seconds, entry.lag_seconds) == (5.0, 5.0, 0.004)
    (manager,) = view.managers
    assert (manager.manager_id, manager.manager_type, manager.max_workers) == ("native", "baremetal_native", 4)
    assert (manager.connected_workers, manager.seconds_since_heartbeat) == (1, 7.0)


def test_the_view_is_built_once_per_event_and_carries_wall_time_from_ticks() -> None:
    sim = SimulatedCluster()
    first = sim.core.view()
    assert sim.core.view() is first
    sim.feed(Tick(10.0, wall_time=1_700_000_000.0))
    view = sim.core.view()
    assert view is not first
    assert (view.now, view.wall_time) == (10.0, 1_700_000_000.0)
    sim.feed(Received(sim.add_client().peer, m.Heartbeat(), 12.5))
    assert sim.core.view().wall_time == 1_700_000_002.5  # derived from the offset of the last tick


def test_a_changed_target_is_a_decision_with_the_policys_reason() -> None:
    settings = CoreSettings("s", "o", PYTHON)
    sim = SimulatedCluster(settings, scaling=make_scaling_hook("simple", "allocate=even_load; scaling=work"))
    sim.feed(Tick(0.0, wall_time=1000.0))
    sim.send(b"manager", hello(m.ManagerInfo("ecs-1", (), 10)))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(8)])
    sim.advance(0.25)  # the tick sends the changed target
    decisions = sim.core.view().decisions
    assert [(d.manager_id, d.workers_before, d.workers_after, d.policy) for d in decisions] == [
        ("ecs-1", 0, 0, "work"),  # the first target, sent on registration
        ("ecs-1", 0, 8, "work"),
    ]
    assert decisions[-1].wall_time == 1000.25
    assert decisions[-1].text == (
        "manager ecs-1: 0 -> 8 workers: 8 tasks (8 queued, 0 running), 8 worker(s) of this manager at 1 per "
        "worker, work policy"
    )
    sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus()))  # the same target again: no decision
    assert len(sim.core.view().decisions) == 2
