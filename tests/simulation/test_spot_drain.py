"""A manager's units reclaimed by the provider (a spot interruption): their workers get no new task, give back
what they have not started, and have the notice period for what runs; what is left then, or lost with the
unit, runs elsewhere without spending the task's retry budget."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.testing.simulation import PYTHON, FakeWorker, SimulatedCluster, hello, task

MANAGER = b"Manager|spot"


def cluster() -> SimulatedCluster:
    # no retry at all: a task whose worker dies fails at once, unless its worker was drained
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, max_task_retries=0))
    sim.send(MANAGER, hello(m.ManagerInfo("spot", (), None, "aws_raw_ecs")))
    return sim


def spot_worker(sim: SimulatedCluster, unit: str, capacity: int = 3) -> FakeWorker:
    peer = PeerID(f"Worker|ECS-{unit}|0123".encode())
    worker = sim.workers[peer] = FakeWorker(peer, capacity)
    sim.send(peer, hello(m.WorkerInfo((), capacity, "spot", f"ECS-{unit}")))
    sim.add_processor(worker)
    return worker


def test_a_reclaimed_units_worker_is_drained_and_its_tasks_move_at_no_retry_cost() -> None:
    sim = cluster()
    client = sim.add_client("c")
    doomed = spot_worker(sim, "unit1")
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    assert len(doomed.held) == 3
    sim.send(MANAGER, m.UnitsReclaimed(("unit1",), 30.0))
    assert doomed.held == [task(client.peer, 0).task_id], "the two unstarted tasks were given back"
    spare = spot_worker(sim, "unit2", capacity=4)
    assert spare.held == [task(client.peer, 1).task_id, task(client.peer, 2).task_id]
    sim.submit(client, [task(client.peer, 3)])
    assert task(client.peer, 3).task_id not in doomed.held, "a draining worker gets no new task"
    sim.advance(31.0)  # the notice ends with task 0 still running there: it moves, its worker is told to stop it
    assert doomed.held == [] and task(client.peer, 0).task_id in spare.held
    sim.kill(doomed)
    while spare.held:
        sim.finish(spare)
    assert all(answers == [("result", "success")] for answers in client.answers.values()), client.answers
    sim.check_invariants()


def test_a_drained_worker_that_dies_before_its_notice_ends_costs_no_retry() -> None:
    sim = cluster()
    client = sim.add_client("c")
    doomed = spot_worker(sim, "unit1", capacity=1)
    sim.submit(client, [task(client.peer, 0)])
    sim.send(MANAGER, m.UnitsReclaimed(("unit1",), 120.0))
    sim.kill(doomed)  # the provider took it early
    spare = spot_worker(sim, "unit2")
    sim.finish(spare)
    assert client.answers[task(client.peer, 0).task_id] == [("result", "success")]


def test_another_managers_units_are_not_touched() -> None:
    sim = cluster()
    client = sim.add_client("c")
    other = sim.add_worker("native")  # no unit, no manager
    sim.submit(client, [task(client.peer, 0)])
    sim.send(MANAGER, m.UnitsReclaimed(("native",), 10.0))
    assert other.held == [task(client.peer, 0).task_id]
    assert sim.core.workers[other.peer].draining_until is None
